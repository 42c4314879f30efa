// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package localcluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/liqo-go/liqo/internal/testenv"
)

func skipWithoutRealNodes(t *testing.T) {
	t.Helper()
	skipShort(t)
	bin, err := FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := RealNodesSupported(bin); err != nil {
		testenv.Unsupported(t, "no real nodes: "+err.Error())
	}
}

// TestRealNode starts a cluster with one real node: it registers and is
// Ready; its pods really run, with addresses from the node's pod range,
// reach each other through a Service and the API server through the
// kubernetes Service; the API server reaches the kubelet for their logs;
// and Stop leaves no process, network namespace or cgroup behind.
func TestRealNode(t *testing.T) {
	skipWithoutRealNodes(t)
	ctx := t.Context()
	c, err := Start(ctx, Options{Name: "real", Dir: filepath.Join(t.TempDir(), "c"), RealNodes: 1, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop()
		}
	})
	cs, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, c.RealNodeName(0), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !NodeReady(node) || node.Status.NodeInfo.KubeletVersion != "v1.37.1" || node.Spec.PodCIDR != c.realNodes[0].podCIDR {
		t.Errorf("node %s: ready %v, kubelet %q, pod range %q", node.Name, NodeReady(node), node.Status.NodeInfo.KubeletVersion, node.Spec.PodCIDR)
	}

	// A server behind a Service, a client that fetches it through the
	// Service's cluster IP (kube-proxy), and a pod that asks the API
	// server through the kubernetes Service (the relay on the underlay);
	// their logs come back through the API server's egress to the kubelet.
	nonRoot := &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532)}
	probe := func(name string, labels map[string]string, args ...string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
			Spec: corev1.PodSpec{
				RestartPolicy:   corev1.RestartPolicyNever,
				SecurityContext: nonRoot,
				Containers:      []corev1.Container{{Name: "probe", Image: ProbeImage, ImagePullPolicy: corev1.PullNever, Args: args}},
			},
		}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "hello"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if svc, err = cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, pod := range []*corev1.Pod{
		probe("server", map[string]string{"app": "hello"}, "/probe", "serve", ":8080", "hello from a real pod"),
		probe("client", nil, "/probe", "get", "http://"+svc.Spec.ClusterIP+"/"),
		probe("api", nil, "/probe", "api"),
	} {
		pod.Spec.Containers[0].Command, pod.Spec.Containers[0].Args = pod.Spec.Containers[0].Args[:1], pod.Spec.Containers[0].Args[1:]
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var server *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		server, err = cs.CoreV1().Pods("default").Get(ctx, "server", metav1.GetOptions{})
		return err == nil && server.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("server pod not Running: %v; status %+v", err, server.Status)
	}
	ip, err := netip.ParseAddr(server.Status.PodIP)
	if err != nil || !netip.MustParsePrefix(c.realNodes[0].podCIDR).Contains(ip) || server.Spec.NodeName != c.RealNodeName(0) {
		t.Errorf("pod on %s with IP %q, want one in %s on %s", server.Spec.NodeName, server.Status.PodIP, c.realNodes[0].podCIDR, c.RealNodeName(0))
	}
	for name, want := range map[string]string{"client": "hello from a real pod", "api": `"gitVersion": "v1.37.1"`} {
		var pod *corev1.Pod
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			pod, err = cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			return err == nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed), nil
		})
		logs, lerr := cs.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil || pod.Status.Phase != corev1.PodSucceeded || lerr != nil || !strings.Contains(string(logs), want) {
			t.Errorf("pod %s: %v, phase %s; logs (%v):\n%s\nwant %q", name, err, pod.Status.Phase, lerr, logs, want)
		}
	}

	n := c.realNodes[0]
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	waitNoProcesses(t, c.Dir, 10*time.Second)
	for _, left := range realNodeLeftovers(n) {
		t.Errorf("left behind: %s", left)
	}
}

// realNodeLeftovers lists what of n is still on the machine.
func realNodeLeftovers(n *realNode) []string {
	var left []string
	if _, err := os.Stat("/run/netns/" + n.netns); err == nil {
		left = append(left, "network namespace "+n.netns)
	}
	hs, _ := cgroupHierarchies(true)
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, n.cgroup)); err == nil {
			left = append(left, "cgroup "+filepath.Join(h, n.cgroup))
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for line := range strings.SplitSeq(string(mounts), "\n") {
		if strings.Contains(line, n.dir) || strings.Contains(line, n.netns) {
			left = append(left, fmt.Sprintf("mount %s", line))
		}
	}
	return left
}

// TestRealNodeFailedStartLeavesNothing: a real node that cannot start (an
// image to import is missing) fails the cluster's start with the node's
// log named, and leaves no network namespace, cgroup or process.
func TestRealNodeFailedStartLeavesNothing(t *testing.T) {
	skipWithoutRealNodes(t)
	before := harnessResources(t)
	dir := filepath.Join(t.TempDir(), "c")
	_, err := Start(t.Context(), Options{Name: "broken", Dir: dir, RealNodes: 1, NodeImages: []string{filepath.Join(dir, "missing.tar")}, Log: testr.New(t)})
	if err == nil || !strings.Contains(err.Error(), "broken-node-0") {
		t.Fatalf("start with a missing image: %v, want an error naming the node", err)
	}
	waitNoProcesses(t, dir, 10*time.Second)
	if after := harnessResources(t); !slices.Equal(before, after) {
		t.Errorf("left behind: before %v, after %v", before, after)
	}
}

// harnessResources lists the harness's network namespaces and cgroups on
// the machine.
func harnessResources(t *testing.T) []string {
	t.Helper()
	var found []string
	entries, err := os.ReadDir("/run/netns")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), NetnsPrefix) {
			found = append(found, "netns "+e.Name())
		}
	}
	hs, err := cgroupHierarchies(true)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		matches, _ := filepath.Glob(filepath.Join(h, NetnsPrefix+"*"))
		for _, m := range matches {
			found = append(found, "cgroup "+m)
		}
	}
	slices.Sort(found)
	return found
}

// TestClusterDNSNeedsRealNodes: a cluster DNS runs in a real container;
// asking for one without real nodes is refused before anything starts.
func TestClusterDNSNeedsRealNodes(t *testing.T) {
	o := Options{Name: "dns", Dir: t.TempDir(), ClusterDNSImage: "registry.k8s.io/coredns/coredns:v1.15.0"}
	if err := o.complete(); err == nil || !strings.Contains(err.Error(), "ClusterDNSImage needs RealNodes") {
		t.Fatalf("ClusterDNSImage without real nodes: %v, want refused", err)
	}
}

// TestPodCIDR: each node takes the next /20 of the cluster's pod range
// (the default one as before: 10.100.0.0/14), and a range that cannot
// hold them, or is not one, is refused before anything starts.
func TestPodCIDR(t *testing.T) {
	for _, tc := range []struct {
		cidr  string
		index int
		want  string
	}{
		{"", 0, "10.100.0.0/20"},
		{"", 1, "10.100.16.0/20"},
		{"", 17, "10.101.16.0/20"},
		{"10.104.0.0/14", 0, "10.104.0.0/20"},
		{"10.104.0.0/14", 33, "10.106.16.0/20"},
		{"172.16.0.0/12", 16, "172.17.0.0/20"},
	} {
		o := Options{Name: "pods", Dir: t.TempDir(), BinDir: t.TempDir(), PodCIDR: tc.cidr}
		if err := o.complete(); err != nil && !strings.Contains(err.Error(), "not found in") {
			t.Fatalf("PodCIDR %q: %v", tc.cidr, err)
		}
		if got := (&Cluster{opts: o}).podCIDR(tc.index); got != tc.want {
			t.Errorf("PodCIDR %q, node %d: %s, want %s", tc.cidr, tc.index, got, tc.want)
		}
	}
	for _, bad := range []string{"10.100.0.0/16", "10.100.0.1/14", "fd00::/14", "10.100.0.0"} {
		o := Options{Name: "pods", Dir: t.TempDir(), PodCIDR: bad}
		if err := o.complete(); err == nil || !strings.Contains(err.Error(), "PodCIDR") {
			t.Errorf("PodCIDR %q: %v, want refused naming PodCIDR", bad, err)
		}
	}
}
