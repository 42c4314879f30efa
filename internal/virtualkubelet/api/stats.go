// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
)

// cpuBook keeps, for each container of the virtual nodes' pods and for
// each node, the CPU time used so far: the counter a kubelet reports
// (metrics-server takes the rate between two scrapes), summed here from
// the provider's averages, each over the time since the one before.
type cpuBook struct {
	mu         sync.Mutex
	containers map[containerKey]*cpuCounter
	nodes      map[string]*cpuCounter
}

type containerKey struct {
	pod       string // UID
	container string
}

type cpuCounter struct {
	node string
	// nanoSeconds is the CPU time used, in core-nanoseconds; last the
	// end of the last sample added.
	nanoSeconds uint64
	last        time.Time
}

// add adds to the counter of key (on node) the average nanoCores over the
// sample ending at ts, of window (its first sample) or since the last one,
// and returns the counter and the time it stands at (a sample no newer
// than the last adds nothing), and what it added. Amounts a provider
// states beyond what any machine uses are cut to that (maxNanoCores,
// maxWindow), and the counter saturates rather than wrap: it never goes
// backwards.
func (b *cpuBook) add(key containerKey, node string, ts time.Time, window time.Duration, nanoCores uint64) (uint64, time.Time, uint64) {
	c, ok := b.containers[key]
	if !ok {
		c = &cpuCounter{node: node}
		b.containers[key] = c
	}
	nanoCores = min(nanoCores, maxNanoCores)
	var added uint64
	switch {
	case !ok:
		added = uint64(float64(nanoCores) * min(max(window, 0), maxWindow).Seconds())
	case ts.After(c.last):
		added = uint64(float64(nanoCores) * min(ts.Sub(c.last), maxWindow).Seconds())
	default:
		return c.nanoSeconds, c.last, 0
	}
	added = min(added, math.MaxUint64-c.nanoSeconds)
	c.nanoSeconds += added
	c.last = ts
	return c.nanoSeconds, c.last, added
}

// The most a sample counts: a million cores, for an hour.
const (
	maxNanoCores = 1_000_000 * 1_000_000_000
	maxWindow    = time.Hour
)

// measured is a pod and what its provider measured of it.
type measured struct {
	pod   *corev1.Pod
	usage provider.PodUsage
}

// measure reads, from providerID, the provider behind virtual node node,
// what the node's running pods use: those it measured, the UIDs of every
// running pod (whose counters are kept), and how many namespaces could
// not be read.
func (s *Server) measure(ctx context.Context, node, providerID string) ([]measured, map[string]bool, int, error) {
	var pods corev1.PodList
	if err := s.Client.List(ctx, &pods, client.MatchingFields{podsByNodeField: node}); err != nil {
		return nil, nil, 0, err
	}
	byNS := map[string][]*corev1.Pod{}
	running := map[string]bool{}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			byNS[p.Namespace] = append(byNS[p.Namespace], p)
			running[string(p.UID)] = true
		}
	}
	namespaces := make([]string, 0, len(byNS))
	for ns := range byNS {
		namespaces = append(namespaces, ns)
	}
	slices.Sort(namespaces)
	remotes := make([]string, len(namespaces))
	for i, ns := range namespaces {
		remote, ok, err := s.remoteNamespace(ctx, ns, providerID)
		if err != nil {
			return nil, nil, 0, err
		}
		if ok && s.Usage != nil {
			remotes[i] = remote
		}
	}
	// One request per namespace, a few at once: a scrape of a node with
	// many namespaces must end within metrics-server's timeout. The bound
	// is the server's, across scrapes and nodes: each answer a provider
	// sends may fill its whole size limit in memory.
	usages := make([]map[string]provider.PodUsage, len(namespaces))
	errs := make([]error, len(namespaces))
	slots := s.usageSlots()
	var g errgroup.Group
	g.SetLimit(usageRequests) // this scrape's goroutines; slots bound the requests of all
	for i, remote := range remotes {
		if remote == "" {
			continue
		}
		g.Go(func() error {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return nil
			}
			usages[i], errs[i] = s.Usage.PodUsage(ctx, providerID, remote)
			return nil
		})
	}
	_ = g.Wait()
	var all []measured
	var failed int
	for i, ns := range namespaces {
		switch err := errs[i]; {
		case errors.Is(err, provider.ErrNoUsage):
			continue
		case err != nil:
			ctrl.LoggerFrom(ctx).V(1).Info("Reading the provider's metrics failed", "node", node, "namespace", ns, "error", err.Error())
			failed++
			continue
		}
		for _, p := range byNS[ns] {
			if u, ok := usages[i][p.Name]; ok {
				all = append(all, measured{p, u})
			}
		}
	}
	return all, running, failed, nil
}

// usageRequests bounds the requests for usage the server makes at once.
const usageRequests = 8

// usageSlots is the server's semaphore of usage requests.
func (s *Server) usageSlots() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slots == nil {
		s.slots = make(chan struct{}, usageRequests)
	}
	return s.slots
}

// summary is the kubelet's stats summary of node, made from the
// provider's metrics API: CPU (a usage rate and the counter this book
// keeps) and memory (working set) for every container of the node's
// running pods that the provider measured, their pods' sums, and the
// node's. It returns too the pods measured, by UID, and says how many
// namespaces could not be read.
func (s *Server) summary(ctx context.Context, node string) (*statsv1alpha1.Summary, map[string]*corev1.Pod, int, error) {
	n, providerID, err := s.providerOf(ctx, node)
	if err != nil {
		return nil, nil, 0, err
	}
	all, running, failed, err := s.measure(ctx, node, providerID)
	if err != nil {
		return nil, nil, 0, err
	}
	pods := make(map[string]*corev1.Pod, len(all))
	for _, m := range all {
		pods[string(m.pod.UID)] = m.pod
	}
	now := time.Now()
	out := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: node, StartTime: n.CreationTimestamp}}
	s.cpu.mu.Lock()
	defer s.cpu.mu.Unlock()
	// A node released meanwhile keeps no counters (forgetNode waits for
	// this lock, after the node left s.nodes).
	s.mu.Lock()
	_, open := s.nodes[node]
	s.mu.Unlock()
	if !open {
		return nil, nil, 0, notFound("the kubelet API of node %s is closed", node)
	}
	if s.cpu.containers == nil {
		s.cpu.containers, s.cpu.nodes = map[containerKey]*cpuCounter{}, map[string]*cpuCounter{}
	}
	var nodeAdded, nodeCores, nodeMemory uint64
	var nodeTime time.Time
	for _, m := range all {
		ts := m.usage.Timestamp
		if ts.IsZero() || ts.After(now) {
			ts = now // a provider's clock is its own
		}
		ps := statsv1alpha1.PodStats{
			PodRef:    statsv1alpha1.PodReference{Name: m.pod.Name, Namespace: m.pod.Namespace, UID: string(m.pod.UID)},
			StartTime: ptr.Deref(m.pod.Status.StartTime, m.pod.CreationTimestamp),
		}
		var podSeconds, podCores, podMemory uint64
		started := map[string]metav1.Time{}
		for _, cs := range m.pod.Status.ContainerStatuses {
			if cs.State.Running != nil {
				started[cs.Name] = cs.State.Running.StartedAt
			}
		}
		for _, c := range m.pod.Spec.Containers {
			u, ok := m.usage.Containers[c.Name]
			if !ok {
				continue
			}
			cpu, mem := u[corev1.ResourceCPU], u[corev1.ResourceMemory]
			cores := uint64(max(cpu.ScaledValue(-9), 0))
			bytes := uint64(max(mem.Value(), 0))
			seconds, last, added := s.cpu.add(containerKey{string(m.pod.UID), c.Name}, node, ts, m.usage.Window, cores)
			nodeAdded = saturating(nodeAdded, added)
			at := metav1.NewTime(last)
			ps.Containers = append(ps.Containers, statsv1alpha1.ContainerStats{
				Name: c.Name, StartTime: started[c.Name],
				CPU:    &statsv1alpha1.CPUStats{Time: at, UsageNanoCores: ptr.To(cores), UsageCoreNanoSeconds: ptr.To(seconds)},
				Memory: &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: ptr.To(bytes), UsageBytes: ptr.To(bytes)},
			})
			podSeconds = saturating(podSeconds, seconds)
			podCores = saturating(podCores, cores)
			podMemory = saturating(podMemory, bytes)
		}
		if len(ps.Containers) == 0 {
			continue
		}
		at := metav1.NewTime(ts)
		ps.CPU = &statsv1alpha1.CPUStats{Time: at, UsageNanoCores: ptr.To(podCores), UsageCoreNanoSeconds: ptr.To(podSeconds)}
		ps.Memory = &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: ptr.To(podMemory), UsageBytes: ptr.To(podMemory)}
		out.Pods = append(out.Pods, ps)
		nodeCores = saturating(nodeCores, podCores)
		nodeMemory = saturating(nodeMemory, podMemory)
		if ts.After(nodeTime) {
			nodeTime = ts
		}
	}
	// The containers of pods no longer running here are forgotten; those
	// of a running pod the provider did not measure this time keep their
	// counter, which must never go backwards.
	for key, c := range s.cpu.containers {
		if c.node == node && !running[key.pod] {
			delete(s.cpu.containers, key)
		}
	}
	if nodeTime.IsZero() {
		nodeTime = now
	}
	nc, ok := s.cpu.nodes[node]
	if !ok {
		nc = &cpuCounter{node: node}
		s.cpu.nodes[node] = nc
	}
	nc.nanoSeconds = saturating(nc.nanoSeconds, nodeAdded)
	nc.last = nodeTime
	at := metav1.NewTime(nodeTime)
	out.Node.CPU = &statsv1alpha1.CPUStats{Time: at, UsageNanoCores: ptr.To(nodeCores), UsageCoreNanoSeconds: ptr.To(nc.nanoSeconds)}
	out.Node.Memory = &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: ptr.To(nodeMemory), UsageBytes: ptr.To(nodeMemory)}
	return out, pods, failed, nil
}

// saturating is a+b, or the largest uint64 where that would wrap.
func saturating(a, b uint64) uint64 { return a + min(b, math.MaxUint64-a) }

// forgetNode drops the counters of node (its endpoint closed).
func (b *cpuBook) forgetNode(node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for key, c := range b.containers {
		if c.node == node {
			delete(b.containers, key)
		}
	}
	delete(b.nodes, node)
}

// serveStats answers /stats/summary, /metrics/resource and
// /metrics/cadvisor, and says whether the path was one of them.
func (s *Server) serveStats(ctx context.Context, w http.ResponseWriter, r *http.Request, node string) bool {
	p := path.Clean("/" + r.URL.Path)
	if (p != "/stats/summary" && p != "/metrics/resource" && p != "/metrics/cadvisor") || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false
	}
	sum, pods, failed, err := s.summary(ctx, node)
	if err != nil {
		status := http.StatusInternalServerError
		var se *statusError
		if errors.As(err, &se) {
			status = se.code
		}
		http.Error(w, err.Error(), status)
		return true
	}
	if p == "/stats/summary" {
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(sum); err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Writing a stats summary failed", "error", err.Error())
		}
		return true
	}
	if p == "/metrics/cadvisor" {
		w.Header().Set("Content-Type", promContentType)
		_ = writeCadvisorMetrics(w, sum, pods)
		return true
	}
	w.Header().Set("Content-Type", promContentType)
	_ = writeResourceMetrics(w, sum, failed > 0)
	return true
}

// promText is a page in the Prometheus text format.
type promText struct{ b strings.Builder }

// family starts the samples of a metric.
func (t *promText) family(name, help, typ string) {
	fmt.Fprintf(&t.b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// sample writes one sample; labels are name, value pairs; a zero at
// writes no timestamp.
func (t *promText) sample(name string, labels []string, v float64, at metav1.Time) {
	b := &t.b
	b.WriteString(name)
	if len(labels) > 0 {
		b.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(b, "%s=\"%s\"", labels[i], labelEscaper.Replace(labels[i+1]))
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	if !at.IsZero() {
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(at.UnixMilli(), 10))
	}
	b.WriteByte('\n')
}

// labelEscaper escapes a label value as the Prometheus text format does:
// a backslash, a double quote and a line feed, nothing else (Go's quoting
// would write escapes the format does not have).
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// writeResourceMetrics writes sum in the Prometheus text format, as a
// kubelet's /metrics/resource.
func writeResourceMetrics(w io.Writer, sum *statsv1alpha1.Summary, scrapeError bool) error {
	var t promText
	family, sample := t.family, t.sample
	seconds := func(ns uint64) float64 { return float64(ns) / float64(time.Second) }
	type labelled struct {
		labels []string
		stats  statsv1alpha1.ContainerStats
	}
	var containers []labelled
	for _, p := range sum.Pods {
		for _, c := range p.Containers {
			containers = append(containers, labelled{[]string{"container", c.Name, "namespace", p.PodRef.Namespace, "pod", p.PodRef.Name}, c})
		}
	}
	family("container_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the container in core-seconds", "counter")
	for _, c := range containers {
		sample("container_cpu_usage_seconds_total", c.labels, seconds(*c.stats.CPU.UsageCoreNanoSeconds), c.stats.CPU.Time)
	}
	family("container_memory_working_set_bytes", "[STABLE] Current working set of the container in bytes", "gauge")
	for _, c := range containers {
		sample("container_memory_working_set_bytes", c.labels, float64(*c.stats.Memory.WorkingSetBytes), c.stats.Memory.Time)
	}
	family("container_start_time_seconds", "[STABLE] Start time of the container since unix epoch in seconds", "gauge")
	for _, c := range containers {
		if !c.stats.StartTime.IsZero() {
			sample("container_start_time_seconds", c.labels, float64(c.stats.StartTime.UnixNano())/float64(time.Second), metav1.Time{})
		}
	}
	if sum.Node.CPU != nil {
		family("node_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the node in core-seconds", "counter")
		sample("node_cpu_usage_seconds_total", nil, seconds(*sum.Node.CPU.UsageCoreNanoSeconds), sum.Node.CPU.Time)
	}
	if sum.Node.Memory != nil {
		family("node_memory_working_set_bytes", "[STABLE] Current working set of the node in bytes", "gauge")
		sample("node_memory_working_set_bytes", nil, float64(*sum.Node.Memory.WorkingSetBytes), sum.Node.Memory.Time)
	}
	family("pod_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds", "counter")
	for _, p := range sum.Pods {
		sample("pod_cpu_usage_seconds_total", []string{"namespace", p.PodRef.Namespace, "pod", p.PodRef.Name}, seconds(*p.CPU.UsageCoreNanoSeconds), p.CPU.Time)
	}
	family("pod_memory_working_set_bytes", "[STABLE] Current working set of the pod in bytes", "gauge")
	for _, p := range sum.Pods {
		sample("pod_memory_working_set_bytes", []string{"namespace", p.PodRef.Namespace, "pod", p.PodRef.Name}, float64(*p.Memory.WorkingSetBytes), p.Memory.Time)
	}
	failed := 0.0
	if scrapeError {
		failed = 1
	}
	family("resource_scrape_error", "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", "gauge")
	sample("resource_scrape_error", nil, failed, metav1.Time{})
	family("scrape_error", "[ALPHA] 1 if there was an error while getting container metrics, 0 otherwise", "gauge")
	sample("scrape_error", nil, failed, metav1.Time{})
	_, err := io.WriteString(w, t.b.String())
	return err
}
