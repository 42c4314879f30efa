// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/playground"
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
//
// Each cluster runs on a core of its own (the consumer on the first, the
// provider on the second), as two clusters on separate machines do: the
// direct run gets the provider's core, not the idle consumer's as well.
// With LIQO_BENCH_SHARED_CPUS=1 both clusters share every core instead.
// LIQO_BENCH_OFFLOADING_PODS lists the sizes (default 100,1000); sizes
// above 2000 give the provider's nodes room for them and share all of it.
// With LIQO_BENCH_PROFILE_DIR set, it also saves there a 10-second CPU
// profile of each controller manager from the start of each run
// (go tool pprof <file>).
func BenchmarkOffloading(b *testing.B) {
	profiles := newProfiler(b, os.Getenv("LIQO_BENCH_PROFILE_DIR"))
	cpus := clusterCPUs(b)
	sizes := benchSizes(b)
	largest := slices.Max(sizes)
	p := startPlayground(b, playground.Options{
		Customize: func(name string, o *localcluster.Options) {
			o.CPUs = cpus[name]
			if largest > 2000 { // two nodes of the default 1100 pods are not enough
				o.NodeCapacity = corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1000"), corev1.ResourceMemory: resource.MustParse("4Ti"),
					corev1.ResourcePods: *resource.NewQuantity(int64(largest/2+100), resource.DecimalSI),
				}
			}
		},
		Clusters: 2, NodesPerCluster: 2,
		ClusterConfig: func(_ string, spec *configv1alpha1.ClusterConfigSpec) {
			spec.DiscoveryConfig.EnableDiscovery = ptr.To(false)
			spec.DiscoveryConfig.EnableAdvertisement = ptr.To(false)
			if largest > 2000 {
				spec.SharingConfig.SharePercentage = 100
			}
		},
		ControllerManagerArgsFor: profiles.args,
	}, 5*time.Minute)
	consumer, provider := p.Members[0], p.Members[1]
	framework.AddWithToken(b, consumer, provider)
	cc := framework.Client(b, consumer)
	ctx := context.Background()
	framework.Eventually(b, 60*time.Second, func() error {
		var nodes corev1.NodeList
		if err := cc.List(ctx, &nodes, client.MatchingLabels{offloadingv1alpha1.RemoteClusterLabel: provider.ClusterID}); err != nil {
			return err
		}
		if len(nodes.Items) != 1 || nodes.Items[0].Status.Allocatable.Pods().Value() < int64(largest) {
			return fmt.Errorf("no virtual node for %d pods yet", largest)
		}
		return nil
	})
	offload := func(ns string) {
		offloadNamespace(b, cc, ns, offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote})
	}
	for _, n := range sizes {
		if n == 1 {
			b.Run("pods=1", func(b *testing.B) {
				for i := range b.N {
					singlePods(b, consumer, provider, fmt.Sprintf("single-%d", i), offload)
				}
			})
			continue
		}
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			for i := range b.N {
				ns := fmt.Sprintf("offloaded-%d-%d", n, i)
				profiles.start(ns)
				off := runDeployment(b, p.Members, consumer, ns, n, offload)
				// The provider namespace must be gone too, pods and events,
				// before the writes are counted and the baseline starts.
				pc := framework.Client(b, provider)
				framework.Eventually(b, patience(n), func() error {
					var nss corev1.NamespaceList
					if err := pc.List(ctx, &nss, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}); err != nil {
						return err
					}
					if len(nss.Items) > 0 {
						return fmt.Errorf("provider namespace %s left (%s)", nss.Items[0].Name, nss.Items[0].Status.Phase)
					}
					return nil
				})
				// The offloaded teardown ends when both namespaces are gone.
				offTeardown := time.Since(off.deleted)
				offRejected := rejectedEventWrites(b, p.Members) - off.rejectedEventsBefore
				// Then the baseline, on the same provider, now idle again.
				profiles.start(fmt.Sprintf("direct-%d-%d", n, i))
				base := runDeployment(b, p.Members, provider, fmt.Sprintf("direct-%d-%d", n, i), n, nil)
				baseRejected := rejectedEventWrites(b, p.Members) - base.rejectedEventsBefore
				writes := framework.Metric(b, consumer, "liqo_virtualkubelet_provider_writes_total", map[string]string{"resource": "pods"}) - off.podWritesBefore
				ratio := off.total.Seconds() / base.total.Seconds()
				b.ReportMetric(off.total.Seconds(), "s-offloaded")
				b.ReportMetric(base.total.Seconds(), "s-direct")
				b.ReportMetric(ratio, "ratio")
				b.ReportMetric(writes/float64(n), "pod-writes/pod")
				b.Logf("N=%d: offloaded %s (p50 %s, p99 %s), direct in the provider %s (p50 %s, p99 %s), ratio %.2f; "+
					"reflection latency in the consumer's virtual kubelet (liqo_virtualkubelet_pod_reflection_seconds, interpolated within its buckets): %s; "+
					"consumer controller manager: peak RSS %d MiB, CPU %.1f s (%.2f cores on average) during the offloaded run; "+
					"pod writes to the provider per pod %.2f (creates and deletes)",
					n, off.total.Round(10*time.Millisecond), off.p50, off.p99, base.total.Round(10*time.Millisecond), base.p50, base.p99, ratio,
					off.reflection, off.peakRSS>>20, off.cpu.Seconds(), off.cpu.Seconds()/off.total.Seconds(), writes/float64(n))
				teardownRatio := offTeardown.Seconds() / base.teardown.Seconds()
				b.ReportMetric(offTeardown.Seconds(), "s-teardown-offloaded")
				b.ReportMetric(base.teardown.Seconds(), "s-teardown-direct")
				b.ReportMetric(teardownRatio, "teardown-ratio")
				b.ReportMetric(offRejected, "rejected-events-offloaded")
				b.Logf("N=%d: teardown (namespace deleted until gone; offloaded: both the consumer's and the provider's): offloaded %s, direct %s, ratio %.2f; "+
					"event writes the API servers refused meanwhile (a namespace terminating or gone): offloaded %.0f, direct %.0f",
					n, offTeardown.Round(10*time.Millisecond), base.teardown.Round(10*time.Millisecond), teardownRatio, offRejected, baseRejected)
				b.Logf("N=%d: CPUs: %s", n, describeCPUs(cpus))
				b.Logf("N=%d: CPU seconds by component, offloaded run: %s", n, off.components)
				b.Logf("N=%d: CPU seconds by component, direct run: %s", n, base.components)
				b.Logf("N=%d: API server writes per pod, offloaded run: %s", n, off.writes)
				b.Logf("N=%d: API server writes per pod, direct run: %s", n, base.writes)
			}
		})
	}
}

// offloadNamespace offloads ns of the consumer behind cc with spec and
// waits until the offloading is Ready.
func offloadNamespace(b *testing.B, cc client.Client, ns string, spec offloadingv1alpha1.NamespaceOffloadingSpec) {
	b.Helper()
	ctx := context.Background()
	no := &offloadingv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, Spec: spec}
	if err := cc.Create(ctx, no); err != nil {
		b.Fatal(err)
	}
	framework.Eventually(b, 30*time.Second, func() error {
		if err := cc.Get(ctx, client.ObjectKeyFromObject(no), no); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(no.Status.Conditions, offloadingv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("namespace %s not offloaded yet", ns)
		}
		return nil
	})
}

type runResult struct {
	total, p50, p99 time.Duration
	peakRSS         int64
	cpu             time.Duration
	podWritesBefore float64
	// components is the CPU time each component of every cluster used
	// during the run, and their sum against the wall time.
	components string
	// writes are the write requests each API server served during the
	// run, per pod, by verb and resource.
	writes string
	// deleted is when the namespace's deletion was asked, and teardown
	// how long until it was gone.
	deleted  time.Time
	teardown time.Duration
	// rejectedEventsBefore is rejectedEventWrites when the deletion was
	// asked.
	rejectedEventsBefore float64
	// reflection is the virtual kubelet's reflection latency during an
	// offloaded run, by step, p50 and p99.
	reflection string
}

// reflectionSteps are the steps of liqo_virtualkubelet_pod_reflection_seconds.
var reflectionSteps = []string{"create", "status"}

// reflectionHistograms reads the reflection latency histogram of m's
// controller manager, by step; none for a direct run (pid 0).
func reflectionHistograms(b *testing.B, m *playground.Member, pid int) map[string][]framework.Bucket {
	b.Helper()
	if pid == 0 {
		return nil
	}
	out := map[string][]framework.Bucket{}
	for _, step := range reflectionSteps {
		out[step] = framework.Histogram(b, m, "liqo_virtualkubelet_pod_reflection_seconds", map[string]string{"step": step})
	}
	return out
}

// formatReflection prints p50 and p99 of each step between two readings.
func formatReflection(before, after map[string][]framework.Bucket) string {
	if after == nil {
		return ""
	}
	var parts []string
	for _, step := range reflectionSteps {
		p50 := framework.Quantile(0.5, before[step], after[step])
		p99 := framework.Quantile(0.99, before[step], after[step])
		parts = append(parts, fmt.Sprintf("%s p50 %s, p99 %s", step, seconds(p50), seconds(p99)))
	}
	return strings.Join(parts, "; ")
}

// seconds prints a latency in seconds as a duration, or "none".
func seconds(s float64) string {
	if math.IsNaN(s) {
		return "none"
	}
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// runDeployment creates namespace ns in m (prepare, if set, runs once it
// exists), a Deployment of n pods in it, and times until all are Ready as
// m's API server shows them; then deletes the namespace's Deployment and
// waits until its pods are gone.
func runDeployment(b *testing.B, all []*playground.Member, m *playground.Member, ns string, n int, prepare func(ns string)) runResult {
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
	reflectionBefore := reflectionHistograms(b, m, cmPID)
	cpuBefore := cpuTime(cmPID)
	componentsBefore := componentCPU(all)
	writesBefore := apiWrites(b, all)
	labels := map[string]string{"app": "bench"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bench"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(n)), //nolint:gosec // at most LIQO_BENCH_OFFLOADING_PODS, a few thousand
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
	case <-time.After(patience(n)):
		mu.Lock()
		b.Fatalf("%s: %d of %d pods Ready after %s", ns, len(ready), n, patience(n))
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
	res.components = formatComponentCPU(all, componentsBefore, componentCPU(all), res.total)
	res.writes = formatAPIWrites(all, writesBefore, apiWrites(b, all), n)
	res.peakRSS = peakRSS(cmPID)
	res.reflection = formatReflection(reflectionBefore, reflectionHistograms(b, m, cmPID))

	res.rejectedEventsBefore = rejectedEventWrites(b, all)
	res.deleted = time.Now()
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	// The namespace's end (its pods, then its events) is waited for, so
	// that the next run starts on a quiet cluster.
	framework.Eventually(b, patience(n), func() error {
		err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s still there (%w)", ns, err)
		}
		return nil
	})
	res.teardown = time.Since(res.deleted)
	return res
}

// componentCPU is the CPU time of every component of every member, by
// "member/component".
func componentCPU(members []*playground.Member) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, m := range members {
		for _, p := range m.Processes() {
			out[m.Name+"/"+p.Name] = cpuTime(p.PID)
		}
	}
	return out
}

// formatComponentCPU prints the CPU each component used between two
// snapshots, by member, and the total in cores over the wall time.
func formatComponentCPU(members []*playground.Member, before, after map[string]time.Duration, wall time.Duration) string {
	var parts []string
	var total time.Duration
	for _, m := range members {
		var comps []string
		for _, p := range m.Processes() {
			d := after[m.Name+"/"+p.Name] - before[m.Name+"/"+p.Name]
			total += d
			comps = append(comps, fmt.Sprintf("%s %.1f", p.Name, d.Seconds()))
		}
		parts = append(parts, m.Name+" {"+strings.Join(comps, ", ")+"}")
	}
	return fmt.Sprintf("%s; total %.1f s = %.2f cores over %s", strings.Join(parts, "; "), total.Seconds(), total.Seconds()/wall.Seconds(), wall.Round(10*time.Millisecond))
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

// apiWrites reads, from each member's API server, how many write requests
// it served so far, by "member" and "VERB resource[/subresource]".
func apiWrites(b *testing.B, members []*playground.Member) map[string]map[string]float64 {
	b.Helper()
	return apiRequests(b, members, func(verb string) bool {
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
			return true
		}
		return false
	})
}

// apiRequests reads, from each member's API server, how many requests
// with a verb counted served so far, by "member" and "VERB
// resource[/subresource]".
func apiRequests(b *testing.B, members []*playground.Member, counted func(verb string) bool) map[string]map[string]float64 {
	b.Helper()
	return apiRequestsWhere(b, members, func(l map[string]string) bool { return counted(l["verb"]) })
}

// rejectedEventWrites is how many event writes each member's API server
// refused so far (a code of 400 or more: among them, events into a
// namespace that is terminating or gone), summed over the members.
func rejectedEventWrites(b *testing.B, members []*playground.Member) float64 {
	b.Helper()
	total := 0.0
	for _, counts := range apiRequestsWhere(b, members, func(l map[string]string) bool {
		code, _ := strconv.Atoi(l["code"])
		return l["resource"] == "events" && l["verb"] != "GET" && l["verb"] != "LIST" && l["verb"] != "WATCH" && code >= 400
	}) {
		for _, v := range counts {
			total += v
		}
	}
	return total
}

// apiRequestsWhere reads, from each member's API server, how many
// requests whose labels counted accepts it served so far, by "member" and
// "VERB resource[/subresource]".
func apiRequestsWhere(b *testing.B, members []*playground.Member, counted func(labels map[string]string) bool) map[string]map[string]float64 {
	b.Helper()
	out := map[string]map[string]float64{}
	for _, m := range members {
		cs, err := kubernetes.NewForConfig(m.RESTConfig)
		if err != nil {
			b.Fatal(err)
		}
		raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
		if err != nil {
			b.Fatalf("reading the API server metrics of %s: %v", m.Name, err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
		if err != nil {
			b.Fatalf("parsing the API server metrics of %s: %v", m.Name, err)
		}
		counts := map[string]float64{}
		for _, metric := range families["apiserver_request_total"].GetMetric() {
			l := map[string]string{}
			for _, p := range metric.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if !counted(l) {
				continue
			}
			res := l["resource"]
			if l["subresource"] != "" {
				res += "/" + l["subresource"]
			}
			counts[l["verb"]+" "+res] += metric.GetCounter().GetValue()
		}
		out[m.Name] = counts
	}
	return out
}

// formatAPIWrites prints the writes per pod each API server served between
// two snapshots, leaving out those below 0.05 per pod.
func formatAPIWrites(members []*playground.Member, before, after map[string]map[string]float64, n int) string {
	var parts []string
	for _, m := range members {
		var kinds []string
		total := 0.0
		for k, v := range after[m.Name] {
			d := (v - before[m.Name][k]) / float64(n)
			total += d
			if d >= 0.05 {
				kinds = append(kinds, fmt.Sprintf("%s %.2f", k, d))
			}
		}
		slices.Sort(kinds)
		parts = append(parts, fmt.Sprintf("%s %.2f {%s}", m.Name, total, strings.Join(kinds, ", ")))
	}
	return strings.Join(parts, "; ")
}

// singleRepetitions is how many single pods the N=1 case starts, each
// way.
const singleRepetitions = 20

// singlePods times one pod from its creation to Ready, as its cluster's API
// server shows it, singleRepetitions times in an offloaded namespace of the
// consumer and as many times directly in the provider, one after the
// other (each pod deleted and gone before the next), and prints p50, p99
// and the worst of both. prepare offloads the consumer's namespace.
func singlePods(b *testing.B, consumer, provider *playground.Member, ns string, prepare func(ns string)) {
	b.Helper()
	ctx := context.Background()
	cc, pc := framework.Client(b, consumer), framework.Client(b, provider)
	for _, c := range []client.Client{cc, pc} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}
	prepare(ns)
	ccs, pcs := framework.Clientset(b, consumer), framework.Clientset(b, provider)
	var offloaded, direct []time.Duration
	for i := range singleRepetitions {
		offloaded = append(offloaded, timeOnePod(b, ccs, ns, fmt.Sprintf("pod-%d", i)))
		direct = append(direct, timeOnePod(b, pcs, ns, fmt.Sprintf("pod-%d", i)))
	}
	for _, c := range []client.Client{cc, pc} {
		if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}
	p99o, p99d := percentile(offloaded, 0.99), percentile(direct, 0.99)
	b.ReportMetric(float64(percentile(offloaded, 0.5).Milliseconds()), "ms-p50-offloaded")
	b.ReportMetric(float64(p99o.Milliseconds()), "ms-p99-offloaded")
	b.ReportMetric(float64(percentile(direct, 0.5).Milliseconds()), "ms-p50-direct")
	b.ReportMetric(float64(p99d.Milliseconds()), "ms-p99-direct")
	b.ReportMetric(float64((p99o - p99d).Milliseconds()), "ms-p99-over-direct")
	b.Logf("N=1, %d pods each way, create -> Ready: offloaded p50 %s, p99 %s, worst %s; direct in the provider p50 %s, p99 %s, worst %s; p99 offloaded - direct %s",
		singleRepetitions, percentile(offloaded, 0.5).Round(time.Millisecond), p99o.Round(time.Millisecond), worst(offloaded),
		percentile(direct, 0.5).Round(time.Millisecond), p99d.Round(time.Millisecond), worst(direct), (p99o - p99d).Round(time.Millisecond))
}

// timeOnePod creates pod name in ns and returns the time from just before
// the create to the watch showing it Ready; then deletes it and waits until
// it is gone.
func timeOnePod(b *testing.B, cs kubernetes.Interface, ns, name string) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience(1))
	defer cancel()
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
		},
	}
	start := time.Now()
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	took := time.Duration(0)
	for took == 0 {
		ev, ok := <-w.ResultChan()
		if !ok {
			b.Fatalf("pod %s/%s: the watch ended before it was Ready", ns, name)
		}
		p, isPod := ev.Object.(*corev1.Pod)
		if !isPod {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				took = time.Since(start)
			}
		}
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		b.Fatal(err)
	}
	for {
		ev, ok := <-w.ResultChan()
		if !ok {
			b.Fatalf("pod %s/%s: the watch ended before it was gone", ns, name)
		}
		if ev.Type == watch.Deleted {
			return took
		}
	}
}

// patience bounds a wait on n pods: 3 minutes, and a second per 20 pods.
func patience(n int) time.Duration { return 3*time.Minute + time.Duration(n/20)*time.Second }

// benchSizes reads LIQO_BENCH_OFFLOADING_PODS: 1, 100 and 1000 by
// default (1 is the single-pod latency case).
func benchSizes(b *testing.B) []int {
	b.Helper()
	env := os.Getenv("LIQO_BENCH_OFFLOADING_PODS")
	if env == "" {
		return []int{1, 100, 1000}
	}
	var sizes []int
	for f := range strings.SplitSeq(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("LIQO_BENCH_OFFLOADING_PODS=%q: %q is not a pod count", env, f)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// clusterCPUs gives cluster-1 the first CPU and cluster-2 the second,
// unless LIQO_BENCH_SHARED_CPUS=1 or the machine has fewer than two.
func clusterCPUs(b *testing.B) map[string][]int {
	b.Helper()
	if os.Getenv("LIQO_BENCH_SHARED_CPUS") == "1" {
		return nil
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		b.Fatal(err)
	}
	var cpus []int
	for c := 0; c < 1024 && len(cpus) < 2; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		return nil
	}
	return map[string][]int{playground.ClusterName(1): {cpus[0]}, playground.ClusterName(2): {cpus[1]}}
}

func describeCPUs(cpus map[string][]int) string {
	if cpus == nil {
		return "both clusters share every core"
	}
	names := slices.Sorted(maps.Keys(cpus))
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s on CPU %v", n, cpus[n]))
	}
	return "each cluster on a core of its own: " + strings.Join(parts, ", ")
}

// profiler saves CPU profiles of the controller managers, when dir is set.
type profiler struct {
	b     *testing.B
	dir   string
	ports map[string]int
	wg    sync.WaitGroup
}

func newProfiler(b *testing.B, dir string) *profiler {
	b.Helper()
	p := &profiler{b: b, dir: dir, ports: map[string]int{}}
	b.Cleanup(p.wg.Wait)
	return p
}

// args gives each controller manager a pprof endpoint.
func (p *profiler) args(name string) []string {
	if p.dir == "" {
		return nil
	}
	port, err := localcluster.FreePort()
	if err != nil {
		p.b.Fatal(err)
	}
	p.ports[name] = port
	return []string{"--pprof-bind-address=127.0.0.1:" + strconv.Itoa(port)}
}

// start saves, in the background, a 10-second CPU profile of each
// controller manager as <dir>/<label>-<cluster>.pprof.
func (p *profiler) start(label string) {
	for name, port := range p.ports {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			hc := &http.Client{Timeout: 30 * time.Second}
			req, err := http.NewRequestWithContext(p.b.Context(), http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=10", port), nil)
			if err != nil {
				p.b.Logf("profiling %s: %v", name, err)
				return
			}
			resp, err := hc.Do(req)
			if err != nil {
				p.b.Logf("profiling %s: %v", name, err)
				return
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s: %s", resp.Status, data)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(p.dir, label+"-"+name+".pprof"), data, 0o600)
			}
			if err != nil {
				p.b.Logf("profiling %s: %v", name, err)
			}
		}()
	}
}

// apiServers saves, in the background, a CPU profile of seconds of each
// member's API server (started with Profiling) as
// <dir>/<label>-apiserver-<cluster>.pprof.
func (p *profiler) apiServers(label string, members []*playground.Member, seconds int) {
	if p.dir == "" {
		return
	}
	for _, m := range members {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			cfg := rest.CopyConfig(m.RESTConfig)
			cfg.Timeout = time.Duration(seconds+30) * time.Second
			cs, err := kubernetes.NewForConfig(cfg)
			if err == nil {
				var data []byte
				data, err = cs.RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(seconds)).DoRaw(context.Background())
				if err == nil {
					err = os.WriteFile(filepath.Join(p.dir, label+"-apiserver-"+m.Name+".pprof"), data, 0o600)
				}
			}
			if err != nil {
				p.b.Logf("profiling the API server of %s: %v", m.Name, err)
			}
		}()
	}
}
