// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package api

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// TestCPUBookSumsAverages: the counter of a container starts at its
// first average times the window, then adds each average times the time
// since the sample before; a sample no newer than the last adds nothing.
func TestCPUBookSumsAverages(t *testing.T) {
	b := cpuBook{containers: map[containerKey]*cpuCounter{}, nodes: map[string]*cpuCounter{}}
	k := containerKey{"uid", "app"}
	t0 := time.Unix(1_700_000_000, 0)
	// 0.5 cores over a 10 s window: 5 core-seconds.
	if got, at, added := b.add(k, "n", t0, 10*time.Second, 500_000_000); got != 5e9 || added != 5e9 || !at.Equal(t0) {
		t.Fatalf("first sample: %d at %s (added %d), want 5e9 at %s", got, at, added, t0)
	}
	// 0.2 cores for the 15 s since: 3 more.
	t1 := t0.Add(15 * time.Second)
	if got, at, added := b.add(k, "n", t1, 10*time.Second, 200_000_000); got != 8e9 || added != 3e9 || !at.Equal(t1) {
		t.Fatalf("second sample: %d at %s (added %d), want 8e9 at %s", got, at, added, t1)
	}
	// An older sample adds nothing, and the counter keeps its time.
	if got, at, added := b.add(k, "n", t0.Add(5*time.Second), 10*time.Second, 900_000_000); got != 8e9 || added != 0 || !at.Equal(t1) {
		t.Fatalf("an older sample: %d at %s (added %d), want 8e9 at %s and nothing added", got, at, added, t1)
	}
	// A provider stating more than any machine runs, for longer than an
	// hour, counts as a million cores for an hour; the counter never wraps.
	for range 3 {
		t1 = t1.Add(1000 * time.Hour)
		if got, _, _ := b.add(k, "n", t1, 0, 1<<63); got < 8e9 {
			t.Fatalf("a huge sample wrapped the counter to %d", got)
		}
	}
	b.forgetNode("n")
	if len(b.containers) != 0 {
		t.Fatalf("counters of a released node kept: %v", b.containers)
	}
}

// TestResourceMetricsParse: /metrics/resource is the Prometheus text
// format metrics-server reads: each container's counter in seconds and
// working set, with the sample's time; the pods' and the node's sums.
func TestResourceMetricsParse(t *testing.T) {
	at := metav1.NewTime(time.UnixMilli(1_700_000_000_123))
	started := metav1.NewTime(time.Unix(1_699_999_000, 0))
	c := statsv1alpha1.ContainerStats{
		Name: "app", StartTime: started,
		CPU:    &statsv1alpha1.CPUStats{Time: at, UsageNanoCores: ptr.To[uint64](2e8), UsageCoreNanoSeconds: ptr.To[uint64](75e8)},
		Memory: &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: ptr.To[uint64](64 << 20)},
	}
	sum := &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{
			NodeName: "liqo-b",
			CPU:      &statsv1alpha1.CPUStats{Time: at, UsageCoreNanoSeconds: ptr.To[uint64](9e9)},
			Memory:   &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: ptr.To[uint64](64 << 20)},
		},
		Pods: []statsv1alpha1.PodStats{{
			PodRef:     statsv1alpha1.PodReference{Namespace: "ns", Name: "web"},
			Containers: []statsv1alpha1.ContainerStats{c},
			CPU:        c.CPU, Memory: c.Memory,
		}},
	}
	var b strings.Builder
	if err := writeResourceMetrics(&b, sum, false); err != nil {
		t.Fatal(err)
	}
	families := parseProm(t, b.String())
	one := func(name string) *dto.Metric {
		t.Helper()
		f, ok := families[name]
		if !ok || len(f.Metric) != 1 {
			t.Fatalf("%s: %v, want one sample in:\n%s", name, f, b.String())
		}
		return f.Metric[0]
	}
	m := one("container_cpu_usage_seconds_total")
	if m.GetCounter().GetValue() != 7.5 || m.GetTimestampMs() != at.UnixMilli() {
		t.Errorf("container CPU: %v at %d, want 7.5 at %d", m.GetCounter().GetValue(), m.GetTimestampMs(), at.UnixMilli())
	}
	if labels := labelsOf(m); labels["container"] != "app" || labels["pod"] != "web" || labels["namespace"] != "ns" {
		t.Errorf("container CPU labels: %v", labels)
	}
	if v := one("container_memory_working_set_bytes").GetGauge().GetValue(); v != 64<<20 {
		t.Errorf("container memory: %v", v)
	}
	if v := one("container_start_time_seconds").GetGauge().GetValue(); v != float64(started.Unix()) {
		t.Errorf("container start: %v, want %d", v, started.Unix())
	}
	if v := one("node_cpu_usage_seconds_total").GetCounter().GetValue(); v != 9 {
		t.Errorf("node CPU: %v, want 9", v)
	}
	if v := one("pod_memory_working_set_bytes").GetGauge().GetValue(); v != 64<<20 {
		t.Errorf("pod memory: %v", v)
	}
	if v := one("resource_scrape_error").GetGauge().GetValue(); v != 0 {
		t.Errorf("resource_scrape_error: %v, want 0", v)
	}
}
