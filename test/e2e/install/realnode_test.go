// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package install

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/ctl/generateaddcommand"
	"github.com/liqo-go/liqo/internal/ctl/install"
	"github.com/liqo-go/liqo/internal/ctl/uninstall"
	liqoinstall "github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestInstallOnRealNodes is the path an operator takes, on two clusters
// with a real node each: liqoctl install runs the controller manager as a
// pod from the image make images builds, with only the chart's
// ServiceAccount and rights; the clusters peer through
// generate-add-command and add; a pod offloaded from one runs in a real
// container on the other's node; and liqoctl uninstall leaves nothing.
func TestInstallOnRealNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters with real nodes")
	}
	bin, err := localcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.RealNodesSupported(bin); err != nil {
		t.Skipf("no real nodes on this machine: %v", err)
	}
	ctx := t.Context()
	dir := t.TempDir()
	archive, ref, err := framework.BuildControllerManagerImage(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	network, err := localcluster.NewNetwork()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := network.Close(); err != nil {
			t.Error(err)
		}
	})

	names := []string{"consumer", "provider"}
	clusters := make([]*localcluster.Cluster, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			clusters[i], errs[i] = localcluster.Start(ctx, localcluster.Options{
				Name: name, Dir: filepath.Join(dir, name), RealNodes: 1, Network: network,
				NodeImages: []string{archive}, Log: testr.New(t),
			})
		})
	}
	wg.Wait()
	for i, c := range clusters {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		t.Cleanup(func() {
			if err := c.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	consumer, provider := clusters[0], clusters[1]

	// Install: the controller manager's pods run on the real node.
	repo, tag, _ := strings.Cut(ref, ":")
	for i, c := range clusters {
		var out bytes.Buffer
		o := &install.Options{
			Kubeconfig: c.KubeconfigPath, Namespace: liqoinstall.DefaultNamespace, Distribution: "generic", ClusterName: names[i],
			APIServerURL: c.UnderlayAPIServerURL(), PodCIDR: "10.100.0.0/14", AuthServiceType: "NodePort",
			ImageRepository: repo, ImageTag: tag, PullPolicy: "Never", Timeout: 3 * time.Minute,
		}
		if err := o.Run(ctx, &out); err != nil {
			t.Fatalf("install on %s: %v\n%s", names[i], err, out.String())
		}
		t.Logf("liqoctl install on %s:\n%s", names[i], out.String())
		cs := clientset(t, c)
		pods, err := cs.CoreV1().Pods(liqoinstall.DefaultNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controller-manager"})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 2 {
			t.Errorf("%s: %d controller-manager pods, want the chart's 2", names[i], len(pods.Items))
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != c.RealNodeName(0) || p.Status.Phase != corev1.PodRunning || p.Spec.ServiceAccountName != liqoinstall.ControllerManagerName {
				t.Errorf("%s: pod %s on %q, %s, ServiceAccount %s", names[i], p.Name, p.Spec.NodeName, p.Status.Phase, p.Spec.ServiceAccountName)
			}
		}
		checkRights(t, cs)
	}

	// Peer, as an operator does.
	var line bytes.Buffer
	if err := (&generateaddcommand.Options{Kubeconfig: provider.KubeconfigPath, Namespace: liqoinstall.DefaultNamespace}).Run(ctx, &line); err != nil {
		t.Fatal(err)
	}
	f := regexp.MustCompile(`--auth-url (\S+) --id (\S+) --token (\S+)`).FindStringSubmatch(line.String())
	if f == nil {
		t.Fatalf("generate-add-command printed %q", line.String())
	}
	if !strings.HasPrefix(f[1], "https://10.254.") {
		t.Errorf("the provider's auth URL %s is not its node's address on the underlay", f[1])
	}
	// liqoctl add asks the provider's auth service first: it runs where
	// an operator would, on the clusters' network (the underlay), never
	// from the host's namespace, which has no route there.
	if out, err := liqoctlOnUnderlay(t, network, consumer, "add", "--auth-url", f[1], "--id", f[2], "--token", f[3], "--timeout", "10s", "--wait", "2m"); err != nil {
		t.Fatalf("liqoctl add: %v\n%s", err, out)
	}
	cc := ctrlClient(t, consumer)
	framework.Eventually(t, 2*time.Minute, func() error {
		var fc discoveryv1alpha1.ForeignCluster
		if err := cc.Get(ctx, client.ObjectKey{Name: f[2]}, &fc); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(fc.Status.Conditions, discoveryv1alpha1.ConditionVirtualNodeReady) {
			return fmt.Errorf("ForeignCluster %s: %+v", fc.Name, fc.Status.Conditions)
		}
		return nil
	})

	// Offload a pod: it runs in a real container on the provider's node,
	// and its logs come back through the virtual node.
	ns := "work"
	if err := cc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := cc.Create(ctx, &offloadingv1alpha1.NamespaceOffloading{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName},
		Spec:       offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote},
	}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		var no offloadingv1alpha1.NamespaceOffloading
		if err := cc.Get(ctx, client.ObjectKey{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(no.Status.Conditions, offloadingv1alpha1.ConditionReady) {
			return fmt.Errorf("NamespaceOffloading not Ready: %+v", no.Status)
		}
		return nil
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "probe", Image: localcluster.ProbeImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/probe"}, Args: []string{"serve", ":8080", "hello from the provider"},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	if err := cc.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pcs := clientset(t, provider)
	framework.Eventually(t, 2*time.Minute, func() error {
		if err := cc.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("offloaded pod %s on %q: %s", pod.Name, pod.Spec.NodeName, pod.Status.Phase)
		}
		remote, err := pcs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + provider.RealNodeName(0)})
		if err != nil {
			return err
		}
		for _, p := range remote.Items {
			if p.Spec.Containers[0].Image == localcluster.ProbeImage && p.Status.Phase == corev1.PodRunning {
				ip, err := netip.ParseAddr(p.Status.PodIP)
				if err != nil || !netip.MustParsePrefix("10.100.0.0/14").Contains(ip) {
					return fmt.Errorf("the provider's pod %s has IP %q", p.Name, p.Status.PodIP)
				}
				return nil
			}
		}
		return fmt.Errorf("no Running probe pod on the provider's real node")
	})
	framework.Eventually(t, time.Minute, func() error {
		logs, err := clientset(t, consumer).CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return err
		}
		if !strings.Contains(string(logs), "serving on :8080") {
			return fmt.Errorf("logs %q", logs)
		}
		return nil
	})
	if err := cc.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	// Uninstall: the consumer unpeers first (--purge); then nothing of
	// Liqo is left in either cluster.
	for i, c := range clusters {
		var out bytes.Buffer
		un := &uninstall.Options{Kubeconfig: c.KubeconfigPath, Namespace: liqoinstall.DefaultNamespace, Purge: i == 0, Timeout: 3 * time.Minute}
		if err := un.Run(ctx, &out); err != nil {
			t.Fatalf("uninstall on %s: %v\n%s", names[i], err, out.String())
		}
		t.Logf("liqoctl uninstall on %s:\n%s", names[i], out.String())
		for _, left := range leftovers(t, c.RESTConfig) {
			t.Errorf("%s: left behind: %s", names[i], left)
		}
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		for _, c := range clusters {
			pods, err := clientset(t, c).CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, p := range pods.Items {
				return fmt.Errorf("%s: pod %s/%s still there", c.Name, p.Namespace, p.Name)
			}
		}
		return nil
	})
}

// checkRights: the controller manager can do what it needs and no more
// than the chart granted; a SubjectAccessReview asks the API server as it
// would decide for the pod's ServiceAccount.
func checkRights(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	sa := "system:serviceaccount:" + liqoinstall.DefaultNamespace + ":" + liqoinstall.ControllerManagerName
	for _, tc := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "discovery.liqo.io", Resource: "foreignclusters"}, true},
		{authorizationv1.ResourceAttributes{Verb: "delete", Group: "apps", Resource: "deployments", Namespace: "kube-system"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "persistentvolumes"}, false},
	} {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: sa, Groups: []string{"system:serviceaccounts"}, ResourceAttributes: &tc.attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.want {
			t.Errorf("the controller manager may %s %s/%s: %v, want %v", tc.attrs.Verb, tc.attrs.Group, tc.attrs.Resource, sar.Status.Allowed, tc.want)
		}
	}
}

// liqoctlOnUnderlay runs bin/liqoctl inside the underlay namespace, with
// the cluster's admin credentials and its API server at its underlay
// address.
func liqoctlOnUnderlay(t *testing.T, network *localcluster.Network, c *localcluster.Cluster, args ...string) (string, error) {
	t.Helper()
	bin, err := localcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.LoadFromFile(c.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range kc.Clusters {
		cl.Server = c.UnderlayAPIServerURL()
	}
	path := filepath.Join(c.Dir, "underlay.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "nsenter", append([]string{"--net=" + network.Path(), "--", filepath.Join(bin, "liqoctl")},
		append(args, "--kubeconfig", path)...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func clientset(t *testing.T, c *localcluster.Cluster) kubernetes.Interface {
	t.Helper()
	cs, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func ctrlClient(t *testing.T, c *localcluster.Cluster) client.Client {
	t.Helper()
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
