// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider/providertest"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// metricsAPI serves metrics.k8s.io/v1beta1 pods in m, in place of
// metrics-server, until the test ends.
func metricsAPI(t *testing.T, m *playground.Member) {
	t.Helper()
	cl := framework.Client(t, m)
	if err := providertest.MetricsAPI(t.Context(), cl); err != nil {
		t.Fatal(err)
	}
	framework.DeleteOnCleanup(t, cl, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: providertest.MetricsAPIName}})
}

// serviceAccountToken is a token of a ServiceAccount name, in m's Liqo
// namespace, made until the test ends.
func serviceAccountToken(t *testing.T, m *playground.Member, name string) string {
	t.Helper()
	framework.DeleteOnCleanup(t, framework.Client(t, m), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: install.DefaultNamespace, Name: name}})
	return framework.ServiceAccountToken(t, m.Cluster, name, "")
}

// podMetrics writes, in m, what the metrics API says pod in ns uses.
func podMetrics(t *testing.T, m *playground.Member, ns, pod string, at time.Time, usage map[string]corev1.ResourceList) {
	t.Helper()
	cl := framework.Client(t, m)
	framework.Eventually(t, 30*time.Second, func() error { return providertest.WritePodMetrics(t.Context(), cl, ns, pod, at, usage) })
}

// TestKubeletResourceEndpoints: a virtual node's /stats/summary and
// /metrics/resource (what metrics-server scrapes for kubectl top) show
// what the provider's metrics API says its copy of each offloaded pod
// uses, under the consumer's names: CPU as a usage and a growing counter,
// memory as the working set; a container the provider adds, or a
// provider's pod the consumer does not have, is not shown. They answer
// users allowed nodes/stats and nodes/metrics, as a kubelet does, and
// refuse one allowed only nodes/proxy (403), whether the caller shows a
// client certificate or a ServiceAccount's token. With its peering's
// credentials, the consumer reads the metrics of its own namespaces in
// the provider, no other.
func TestKubeletResourceEndpoints(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	cl := framework.Client(t, a)
	const ns = "offload-stats"
	remotes := offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote})
	remote := remoteNamespaceOf(remotes, b.ClusterID)
	node, err := framework.VirtualNode(cl, b.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, pauseOn(ns, "measured", node.Name)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error { return allRunning(t, ns, 1) })

	metricsAPI(t, b)
	// Samples of the past: the virtual kubelet takes a sample of the
	// future (a provider's clock is its own) as taken now.
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	podMetrics(t, b, remote, "measured", t0, map[string]corev1.ResourceList{
		"app":            {corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("40Mi")},
		"provider-added": {corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	})
	podMetrics(t, b, remote, "not-the-consumers", t0, map[string]corev1.ResourceList{
		"app": {corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")},
	})

	const user = "liqo-e2e-stats-reader"
	reader := clientCert(t, a, user)
	base := kubeletEndpoint(t, cl, b)
	grant := func(t *testing.T, name string, subresources ...string) {
		t.Helper()
		grantUser(t, cl, name, user, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: subresources, Verbs: []string{"get"}, ResourceNames: []string{node.Name}})
	}

	t.Run("nodes/proxy alone does not read stats nor resource metrics", func(t *testing.T) {
		grant(t, user+"-proxy", "nodes/proxy")
		framework.Eventually(t, 10*time.Second, func() error {
			if code, body := kubeletGet(t, reader, base+"/pods"); code != http.StatusOK {
				return fmt.Errorf("/pods with nodes/proxy: %d %q", code, body)
			}
			return nil
		})
		for p, sub := range map[string]string{"/stats/summary": "nodes/stats", "/metrics/resource": "nodes/metrics", "/metrics": "nodes/metrics", "/metrics/cadvisor": "nodes/metrics"} {
			if code, body := kubeletGet(t, reader, base+p); code != http.StatusForbidden || !strings.Contains(body, sub) {
				t.Errorf("%s with nodes/proxy alone: %d %q, want 403 naming %s", p, code, body, sub)
			}
		}
	})

	grant(t, user, "nodes/stats", "nodes/metrics")
	var first statsv1alpha1.Summary
	t.Run("/stats/summary shows the pod's usage as the provider measured it", func(t *testing.T) {
		framework.Eventually(t, 30*time.Second, func() error {
			var err error
			if first, err = summaryOf(t, reader, base); err != nil {
				return err
			}
			if len(first.Pods) != 1 {
				return fmt.Errorf("/stats/summary shows %d pods, want the one measured: %+v", len(first.Pods), first.Pods)
			}
			return nil
		})
		p := first.Pods[0]
		if p.PodRef.Namespace != ns || p.PodRef.Name != "measured" || p.PodRef.UID != podUID(t, cl, ns, "measured") {
			t.Fatalf("/stats/summary shows pod %+v, want %s/measured under the consumer's names", p.PodRef, ns)
		}
		if len(p.Containers) != 1 || p.Containers[0].Name != "app" {
			t.Fatalf("/stats/summary shows containers %+v, want app alone (not the provider's own)", p.Containers)
		}
		c := p.Containers[0]
		if got := *c.CPU.UsageNanoCores; got != 250_000_000 {
			t.Errorf("CPU usage %d nanocores, want 250m", got)
		}
		if got := *c.Memory.WorkingSetBytes; got != 40<<20 {
			t.Errorf("working set %d, want 40Mi", got)
		}
		// The first sample counts its window: 0.25 cores for 10 s.
		if got := *c.CPU.UsageCoreNanoSeconds; got != 2_500_000_000 {
			t.Errorf("CPU counter %d core-ns, want 2.5 s", got)
		}
		if first.Node.NodeName != node.Name || *first.Node.Memory.WorkingSetBytes != 40<<20 {
			t.Errorf("node stats %s with %d bytes, want %s with the pod's 40Mi", first.Node.NodeName, *first.Node.Memory.WorkingSetBytes, node.Name)
		}
	})

	t.Run("/metrics/resource carries a counter that grows with each new sample", func(t *testing.T) {
		// 0.5 cores for the 20 s after the first sample: 10 s more.
		podMetrics(t, b, remote, "measured", t0.Add(20*time.Second), map[string]corev1.ResourceList{
			"app": {corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("48Mi")},
		})
		framework.Eventually(t, 30*time.Second, func() error {
			code, body := kubeletGet(t, reader, base+"/metrics/resource")
			if code != http.StatusOK {
				return fmt.Errorf("/metrics/resource: %d %q", code, body)
			}
			want := fmt.Sprintf(`container_cpu_usage_seconds_total{container="app",namespace=%q,pod="measured"} 12.5 %d`, ns, t0.Add(20*time.Second).UnixMilli())
			if !strings.Contains(body, want) {
				return fmt.Errorf("/metrics/resource has no %q:\n%s", want, body)
			}
			mem := fmt.Sprintf(`container_memory_working_set_bytes{container="app",namespace=%q,pod="measured"} %s`, ns, strconv.FormatFloat(48<<20, 'g', -1, 64))
			if !strings.Contains(body, mem) {
				return fmt.Errorf("/metrics/resource has no %q:\n%s", mem, body)
			}
			if strings.Contains(body, "provider-added") || strings.Contains(body, "not-the-consumers") {
				return fmt.Errorf("/metrics/resource shows what the consumer does not run:\n%s", body)
			}
			return nil
		})
	})

	t.Run("/metrics and /metrics/cadvisor answer what monitoring scrapes of every node", func(t *testing.T) {
		code, body := kubeletGet(t, reader, base+"/metrics")
		for _, want := range []string{fmt.Sprintf("kubelet_node_name{node=%q} 1", node.Name), "kubelet_running_pods 1", `kubelet_running_containers{container_state="running"} 1`} {
			if code != http.StatusOK || !strings.Contains(body, want) {
				t.Errorf("/metrics: %d, no %q in:\n%s", code, want, body)
			}
		}
		var pod corev1.Pod
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "measured"}, &pod); err != nil || len(pod.Status.ContainerStatuses) != 1 {
			t.Fatalf("the measured pod: %v, container statuses %+v", err, pod.Status.ContainerStatuses)
		}
		code, body = kubeletGet(t, reader, base+"/metrics/cadvisor")
		want := fmt.Sprintf(`container_cpu_usage_seconds_total{container="app",id=%q,image=%q,name=%q,namespace=%q,pod="measured",cpu="total"} 12.5`,
			pod.Status.ContainerStatuses[0].ContainerID, pod.Spec.Containers[0].Image, containerName(pod.Status.ContainerStatuses[0].ContainerID), ns)
		if code != http.StatusOK || !strings.Contains(body, want) || strings.Contains(body, "provider-added") {
			t.Errorf("/metrics/cadvisor: %d, want %q and nothing the consumer does not run, in:\n%s", code, want, body)
		}
	})

	t.Run("a bearer token is checked as a kubelet checks it", func(t *testing.T) {
		// A ServiceAccount allowed nodes/metrics alone, as Prometheus'
		// kubelet scrape is.
		const scraper = "liqo-e2e-kubelet-scraper"
		grantUser(t, cl, scraper, "system:serviceaccount:"+install.DefaultNamespace+":"+scraper,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}})
		token := serviceAccountToken(t, a, scraper)
		framework.Eventually(t, 30*time.Second, func() error {
			code, body := kubeletGetWithToken(t, token, base+"/metrics/resource")
			if code != http.StatusOK || !strings.Contains(body, `pod="measured"`) {
				return fmt.Errorf("/metrics/resource with the token of a ServiceAccount allowed nodes/metrics: %d %q", code, body)
			}
			return nil
		})
		if code, body := kubeletGetWithToken(t, token, base+"/stats/summary"); code != http.StatusForbidden || !strings.Contains(body, "nodes/stats") {
			t.Errorf("/stats/summary with a token allowed nodes/metrics alone: %d %q, want 403 naming nodes/stats", code, body)
		}
		// get on nodes/proxy reads the node's pods, and opens no shell,
		// whatever the form of the exec (its WebSocket form is a GET).
		const proxyGetter = "liqo-e2e-kubelet-proxy-getter"
		grantUser(t, cl, proxyGetter, "system:serviceaccount:"+install.DefaultNamespace+":"+proxyGetter,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"}})
		getter := serviceAccountToken(t, a, proxyGetter)
		framework.Eventually(t, 30*time.Second, func() error {
			if code, body := kubeletGetWithToken(t, getter, base+"/pods"); code != http.StatusOK {
				return fmt.Errorf("/pods with a token allowed get on nodes/proxy: %d %q", code, body)
			}
			return nil
		})
		for _, p := range []string{"/exec/" + ns + "/measured/app?command=id&output=1", "/attach/" + ns + "/measured/app?output=1", "/portForward/" + ns + "/measured"} {
			if code, body := kubeletGetWithToken(t, getter, base+p); code != http.StatusForbidden || !strings.Contains(body, "create") {
				t.Errorf("GET %s with a token allowed get on nodes/proxy: %d %q, want 403 naming create", p, code, body)
			}
		}
		stranger := serviceAccountToken(t, a, "liqo-e2e-kubelet-stranger")
		if code, body := kubeletGetWithToken(t, stranger, base+"/metrics/resource"); code != http.StatusForbidden {
			t.Errorf("/metrics/resource with the token of a ServiceAccount allowed nothing: %d %q, want 403", code, body)
		}
		if code, body := kubeletGetWithToken(t, "made-up", base+"/metrics/resource"); code != http.StatusUnauthorized {
			t.Errorf("/metrics/resource with a made-up token: %d %q, want 401", code, body)
		}
		// The provider's own cluster's token, of an account that may do
		// anything there, is nothing in the consumer's.
		const admin = "liqo-e2e-provider-admin"
		grantUser(t, framework.Client(t, b), admin, "system:serviceaccount:"+install.DefaultNamespace+":"+admin,
			rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}})
		if code, body := kubeletGetWithToken(t, serviceAccountToken(t, b, admin), base+"/metrics/resource"); code != http.StatusUnauthorized {
			t.Errorf("/metrics/resource on the provider's node with the provider's own admin token: %d %q, want 401", code, body)
		}
		// Nor is the identity the provider holds in the consumer.
		peer := framework.ProviderConfig(t, b, a.ClusterID)
		peerCert, err := tls.X509KeyPair(peer.CertData, peer.KeyData)
		if err != nil {
			t.Fatal(err)
		}
		if code, body := kubeletGet(t, &peerCert, base+"/metrics/resource"); code != http.StatusForbidden {
			t.Errorf("/metrics/resource on the provider's node with the provider's identity in the consumer: %d %q, want 403", code, body)
		}
	})

	t.Run("kubectl top pod shows it, through the consumer's metrics-server", func(t *testing.T) {
		if err := a.StartMetricsServer(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := a.StopMetricsServer(context.Background()); err != nil {
				t.Errorf("stopping metrics-server: %v", err)
			}
		})
		// The provider's metrics-server samples as time goes: 0.25 cores
		// and 40Mi, a new sample at most every second (a bounded loop).
		var out string
		var last time.Time
		failed := errors.New("no sample written yet")
		framework.Eventually(t, 2*time.Minute, func() error {
			if time.Since(last) < time.Second {
				return failed // the last answer, while a second passes between samples
			}
			last = time.Now()
			podMetrics(t, b, remote, "measured", last.Truncate(time.Second), map[string]corev1.ResourceList{
				"app": {corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("40Mi")},
			})
			var err error
			if out, err = framework.Kubectl(t, a, "", "top", "pod", "measured", "--namespace", ns, "--no-headers"); err != nil {
				failed = fmt.Errorf("kubectl top pod: %w: %s", err, out)
				return failed
			}
			return nil
		})
		fields := strings.Fields(out)
		if len(fields) != 3 || fields[0] != "measured" || fields[2] != "40Mi" {
			t.Fatalf("kubectl top pod printed %q, want measured, its CPU and 40Mi", out)
		}
		cpu, err := resource.ParseQuantity(fields[1])
		if err != nil || cpu.MilliValue() < 200 || cpu.MilliValue() > 300 {
			t.Fatalf("kubectl top pod shows %s of CPU (%v), want about the provider's 250m", fields[1], err)
		}
		t.Logf("kubectl top pod: %s", strings.TrimSpace(out))

		// A user who may read pods but not their metrics is refused.
		const viewer = "liqo-e2e-pod-viewer"
		grantUser(t, cl, viewer, viewer, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}})
		kubeconfig := framework.UserKubeconfig(t, a, viewer)
		if out, err := framework.KubectlAt(t, kubeconfig, "", "top", "pod", "measured", "--namespace", ns); err == nil || !strings.Contains(err.Error()+out, "forbidden") {
			t.Fatalf("kubectl top pod as %s, who may not read pod metrics: %v %q, want forbidden", viewer, err, out)
		}
	})

	t.Run("a provider stating impossible figures moves nothing, and the other provider's node is unharmed", func(t *testing.T) {
		before, err := summaryOf(t, reader, base)
		if err != nil {
			t.Fatal(err)
		}
		// Written in the provider's own cluster, with its admin's rights.
		podMetrics(t, b, remote, "measured", time.Now().Truncate(time.Second), map[string]corev1.ResourceList{
			"app": {corev1.ResourceCPU: resource.MustParse("1e30"), corev1.ResourceMemory: resource.MustParse("1e30")},
		})
		var after statsv1alpha1.Summary
		framework.Eventually(t, 30*time.Second, func() error {
			var err error
			if after, err = summaryOf(t, reader, base); err != nil {
				return err
			}
			if len(after.Pods) != 1 || len(after.Pods[0].Containers) != 1 {
				return fmt.Errorf("/stats/summary shows %+v, want the measured pod's app", after.Pods)
			}
			if *after.Pods[0].Containers[0].Memory.WorkingSetBytes == 40<<20 {
				return errors.New("the provider's new sample is not read yet")
			}
			return nil
		})
		app, was := after.Pods[0].Containers[0], before.Pods[0].Containers[0]
		if got := *app.Memory.WorkingSetBytes; got >= 1<<40 {
			t.Errorf("a provider stating 1e30 bytes: working set %d shown, want the figure dropped", got)
		}
		if got, old := *app.CPU.UsageCoreNanoSeconds, *was.CPU.UsageCoreNanoSeconds; got < old || got-old > uint64(time.Hour) {
			t.Errorf("a provider stating 1e30 cores: the CPU counter went from %d to %d, want it neither back nor up by more than an hour of a core", old, got)
		}
		// The other provider's node answers as before.
		other := kubeletEndpoint(t, cl, c)
		otherNode, err := framework.VirtualNode(cl, c.ClusterID)
		if err != nil {
			t.Fatal(err)
		}
		grantUser(t, cl, user+"-other", user, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes/stats"}, Verbs: []string{"get"}, ResourceNames: []string{otherNode.Name}})
		framework.Eventually(t, 10*time.Second, func() error {
			code, body := kubeletGet(t, reader, other+"/stats/summary")
			if code != http.StatusOK || !strings.Contains(body, otherNode.Name) {
				return fmt.Errorf("/stats/summary of %s: %d %q", otherNode.Name, code, body)
			}
			return nil
		})
	})

	t.Run("the peering reads the metrics of the consumer's own namespaces only", func(t *testing.T) {
		vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))
		list := func(namespace string) error {
			var l unstructured.UnstructuredList
			l.SetAPIVersion("metrics.k8s.io/v1beta1")
			l.SetKind("PodMetricsList")
			return vk.List(ctx, &l, client.InNamespace(namespace))
		}
		if err := list(remote); err != nil {
			t.Fatalf("the consumer's virtual kubelet listing the metrics of its namespace %s in %s: %v", remote, b.Name, err)
		}
		if err := list("kube-system"); !apierrors.IsForbidden(err) {
			t.Fatalf("the consumer's virtual kubelet listing the metrics of kube-system in %s: %v, want forbidden", b.Name, err)
		}
	})
}

func podUID(t *testing.T, cl client.Client, ns, name string) string {
	t.Helper()
	var p corev1.Pod
	if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	return string(p.UID)
}

// summaryOf is the /stats/summary a kubelet API at base answers cert.
func summaryOf(t *testing.T, cert *tls.Certificate, base string) (statsv1alpha1.Summary, error) {
	t.Helper()
	var sum statsv1alpha1.Summary
	code, body := kubeletGet(t, cert, base+"/stats/summary")
	if code != http.StatusOK {
		return sum, fmt.Errorf("/stats/summary: %d %q", code, body)
	}
	if err := json.Unmarshal([]byte(body), &sum); err != nil {
		return sum, fmt.Errorf("/stats/summary: %w in %q", err, body)
	}
	return sum, nil
}

// containerName is a container ID without its runtime's scheme, as
// cAdvisor names containers.
func containerName(id string) string {
	_, name, _ := strings.Cut(id, "://")
	return name
}
