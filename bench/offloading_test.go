// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/offloading"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/internal/sharing"
	"github.com/liqo-go/liqo/internal/virtualkubelet"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// BenchmarkOffloading is the project's headline figure: one Deployment of N
// pods created in an offloaded namespace of the consumer, timed from its
// creation until all its pods are Ready as the consumer sees them, against
// the same Deployment created directly in the provider and timed until
// Ready there, in the same run on the same provider. It prints both times,
// the ratio, p50 and p99 per-pod latency (first seen to Ready, both seen
// by a watch), the consumer controller manager's peak memory and CPU, and
// the write requests sent to the provider per offloaded pod (the create
// and the delete; status comes back by watch).
func BenchmarkOffloading(b *testing.B) {
	p := startPlayground(b, playground.Options{
		Clusters: 2, NodesPerCluster: 2,
		ClusterConfig: func(_ string, spec *configv1alpha1.ClusterConfigSpec) {
			spec.DiscoveryConfig.EnableDiscovery = ptr.To(false)
			spec.DiscoveryConfig.EnableAdvertisement = ptr.To(false)
		},
	}, 5*time.Minute)
	consumer, provider := p.Members[0], p.Members[1]
	framework.AddWithToken(b, consumer, provider)
	cc := framework.Client(b, consumer)
	ctx := context.Background()
	framework.Eventually(b, 60*time.Second, func() error {
		var nodes corev1.NodeList
		if err := cc.List(ctx, &nodes, client.MatchingLabels{virtualkubelet.RemoteClusterLabel: provider.ClusterID}); err != nil {
			return err
		}
		if len(nodes.Items) != 1 || nodes.Items[0].Status.Allocatable.Pods().Value() < 1000 {
			return fmt.Errorf("no virtual node for 1000 pods yet")
		}
		return nil
	})
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			for i := range b.N {
				ns := fmt.Sprintf("offloaded-%d-%d", n, i)
				off := runDeployment(b, consumer, ns, n, func(ns string) {
					no := &offloadingv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName},
						Spec: offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote}}
					if err := cc.Create(ctx, no); err != nil {
						b.Fatal(err)
					}
					framework.Eventually(b, 30*time.Second, func() error {
						if err := cc.Get(ctx, client.ObjectKeyFromObject(no), no); err != nil {
							return err
						}
						if c := meta.FindStatusCondition(no.Status.Conditions, offloading.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
							return fmt.Errorf("namespace %s not offloaded yet", ns)
						}
						return nil
					})
				})
				// The provider pods must be gone too before the writes are counted.
				pc := framework.Client(b, provider)
				framework.Eventually(b, 2*time.Minute, func() error {
					var pods corev1.PodList
					if err := pc.List(ctx, &pods, client.MatchingLabels{sharing.OriginClusterLabel: consumer.ClusterID}); err != nil {
						return err
					}
					if len(pods.Items) > 0 {
						return fmt.Errorf("%d provider pods left", len(pods.Items))
					}
					return nil
				})
				// Then the baseline, on the same provider, now idle again.
				base := runDeployment(b, provider, fmt.Sprintf("direct-%d-%d", n, i), n, nil)
				writes := framework.Metric(b, consumer, "liqo_virtualkubelet_provider_writes_total", map[string]string{"resource": "pods"}) - off.podWritesBefore
				ratio := off.total.Seconds() / base.total.Seconds()
				b.ReportMetric(off.total.Seconds(), "s-offloaded")
				b.ReportMetric(base.total.Seconds(), "s-direct")
				b.ReportMetric(ratio, "ratio")
				b.ReportMetric(writes/float64(n), "pod-writes/pod")
				b.Logf("N=%d: offloaded %s (p50 %s, p99 %s), direct in the provider %s (p50 %s, p99 %s), ratio %.2f; "+
					"consumer controller manager: peak RSS %d MiB, CPU %.1f s (%.2f cores on average) during the offloaded run; "+
					"pod writes to the provider per pod %.2f (creates and deletes)",
					n, off.total.Round(10*time.Millisecond), off.p50, off.p99, base.total.Round(10*time.Millisecond), base.p50, base.p99, ratio,
					off.peakRSS>>20, off.cpu.Seconds(), off.cpu.Seconds()/off.total.Seconds(), writes/float64(n))
			}
		})
	}
}

type runResult struct {
	total, p50, p99 time.Duration
	peakRSS         int64
	cpu             time.Duration
	podWritesBefore float64
}

// runDeployment creates namespace ns in m (prepare, if set, runs once it
// exists), a Deployment of n pods in it, and times until all are Ready as
// m's API server shows them; then deletes the namespace's Deployment and
// waits until its pods are gone.
func runDeployment(b *testing.B, m *playground.Member, ns string, n int, prepare func(ns string)) runResult {
	b.Helper()
	ctx := context.Background()
	c := framework.Client(b, m)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	if prepare != nil {
		prepare(ns)
	}
	cs, err := kubernetes.NewForConfig(m.RESTConfig)
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	seen, ready := map[string]time.Time{}, map[string]time.Time{}
	allReady := make(chan struct{})
	observe := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if _, ok := seen[string(pod.UID)]; !ok {
			seen[string(pod.UID)] = now
		}
		if _, ok := ready[string(pod.UID)]; ok {
			return
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready[string(pod.UID)] = now
				if len(ready) == n {
					close(allReady)
				}
			}
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: observe, UpdateFunc: func(_, o any) { observe(o) }})
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	cache.WaitForCacheSync(stop, inf.HasSynced)

	var res runResult
	cmPID := 0
	if proc := m.Process(playground.ControllerManager); proc != nil && prepare != nil {
		cmPID = proc.PID
		res.podWritesBefore = framework.Metric(b, m, "liqo_virtualkubelet_provider_writes_total", map[string]string{"resource": "pods"})
	}
	cpuBefore := cpuTime(cmPID)
	labels := map[string]string{"app": "bench"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bench"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(n)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	start := time.Now()
	if err := c.Create(ctx, dep); err != nil {
		b.Fatal(err)
	}
	select {
	case <-allReady:
	case <-time.After(5 * time.Minute):
		mu.Lock()
		b.Fatalf("%s: %d of %d pods Ready after 5 minutes", ns, len(ready), n)
	}
	mu.Lock()
	var last time.Time
	lat := make([]time.Duration, 0, len(ready))
	for uid, r := range ready {
		lat = append(lat, r.Sub(seen[uid]))
		if r.After(last) {
			last = r
		}
	}
	mu.Unlock()
	slices.Sort(lat)
	res.total = last.Sub(start)
	res.p50 = lat[len(lat)/2].Round(time.Millisecond)
	res.p99 = lat[len(lat)*99/100].Round(time.Millisecond)
	res.cpu = cpuTime(cmPID) - cpuBefore
	res.peakRSS = peakRSS(cmPID)

	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	framework.Eventually(b, 3*time.Minute, func() error {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods of %s left", len(pods.Items), ns)
		}
		return nil
	})
	return res
}

// cpuTime is the user and system CPU time of process pid so far (Linux).
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// peakRSS is the peak resident memory of process pid (VmHWM), in bytes.
func peakRSS(pid int) int64 {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
