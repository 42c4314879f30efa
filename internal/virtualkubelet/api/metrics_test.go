// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package api

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// parseProm parses a Prometheus text page, failing the test on any
// error.
func parseProm(t *testing.T, page string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(page))
	if err != nil {
		t.Fatalf("%v in:\n%s", err, page)
	}
	return families
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestKubeletMetrics: /metrics names the node and counts the pods
// running on it and their running containers; a pod pending, finished
// or being deleted is not running.
func TestKubeletMetrics(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}
	pod := func(phase corev1.PodPhase, deleted bool, states ...corev1.ContainerState) corev1.Pod {
		p := corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
		if deleted {
			p.DeletionTimestamp = ptr.To(metav1.Now())
		}
		for _, s := range states {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{State: s})
		}
		return p
	}
	pods := []corev1.Pod{
		pod(corev1.PodRunning, false, running, running),
		pod(corev1.PodRunning, false, running, waiting),
		pod(corev1.PodPending, false, waiting),
		pod(corev1.PodSucceeded, false),
		pod(corev1.PodRunning, true, running),
	}
	var b strings.Builder
	if err := writeKubeletMetrics(&b, "liqo-b", pods); err != nil {
		t.Fatal(err)
	}
	families := parseProm(t, b.String())
	for name, want := range map[string]float64{"kubelet_node_name": 1, "kubelet_running_pods": 2, "kubelet_running_containers": 3} {
		f, ok := families[name]
		if !ok || len(f.Metric) != 1 || f.Metric[0].GetGauge().GetValue() != want {
			t.Errorf("%s: %v, want one sample of %v in:\n%s", name, f, want, b.String())
		}
	}
	if l := labelsOf(families["kubelet_node_name"].Metric[0]); l["node"] != "liqo-b" {
		t.Errorf("kubelet_node_name labels %v, want node liqo-b", l)
	}
	if l := labelsOf(families["kubelet_running_containers"].Metric[0]); l["container_state"] != "running" {
		t.Errorf("kubelet_running_containers labels %v, want container_state running", l)
	}
}

// TestCadvisorMetrics: /metrics/cadvisor shows each measured container
// with the labels monitoring selects containers by (its image among
// them, which dashboards require) and what /metrics/resource shows of
// it (a label value escaped as the format has it); a pod no longer on
// the node is left out.
func TestCadvisorMetrics(t *testing.T) {
	at := metav1.NewTime(time.UnixMilli(1_700_000_000_123))
	c := statsv1alpha1.ContainerStats{
		Name: "app", StartTime: metav1.NewTime(time.Unix(1_699_999_000, 0)),
		CPU:    &statsv1alpha1.CPUStats{Time: at, UsageCoreNanoSeconds: ptr.To[uint64](75e8)},
		Memory: &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: ptr.To[uint64](64 << 20), UsageBytes: ptr.To[uint64](64 << 20)},
	}
	sum := &statsv1alpha1.Summary{Pods: []statsv1alpha1.PodStats{
		{PodRef: statsv1alpha1.PodReference{Namespace: "ns", Name: "web", UID: "uid-web"}, Containers: []statsv1alpha1.ContainerStats{c}},
		{PodRef: statsv1alpha1.PodReference{Namespace: "ns", Name: "gone", UID: "uid-gone"}, Containers: []statsv1alpha1.ContainerStats{c}},
	}}
	web := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1\"x\\y\tz"}}},
		Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app", ContainerID: "containerd://abc123"}}},
	}
	var b strings.Builder
	if err := writeCadvisorMetrics(&b, sum, map[string]*corev1.Pod{"uid-web": web}); err != nil {
		t.Fatal(err)
	}
	families := parseProm(t, b.String())
	for name, want := range map[string]float64{
		"container_cpu_usage_seconds_total": 7.5, "container_memory_working_set_bytes": 64 << 20,
		"container_memory_usage_bytes": 64 << 20, "container_start_time_seconds": 1_699_999_000,
	} {
		f, ok := families[name]
		if !ok || len(f.Metric) != 1 {
			t.Fatalf("%s: %v, want one sample in:\n%s", name, f, b.String())
		}
		m := f.Metric[0]
		if v := m.GetCounter().GetValue() + m.GetGauge().GetValue(); v != want {
			t.Errorf("%s: %v, want %v", name, v, want)
		}
		l := labelsOf(m)
		if l["container"] != "app" || l["pod"] != "web" || l["namespace"] != "ns" || l["image"] != "registry.example/app:1\"x\\y\tz" ||
			l["id"] != "containerd://abc123" || l["name"] != "abc123" {
			t.Errorf("%s labels %v", name, l)
		}
	}
	if l := labelsOf(families["container_cpu_usage_seconds_total"].Metric[0]); l["cpu"] != "total" {
		t.Errorf("container_cpu_usage_seconds_total labels %v, want cpu total", l)
	}
}
