// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package api

import (
	"context"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// promContentType is the Prometheus text format's content type.
const promContentType = "text/plain; version=0.0.4; charset=utf-8"

// serveKubeletMetrics answers /metrics, a kubelet's own metrics, with
// those a virtual node has from this cluster's view of its pods (what
// monitoring alerts and dashboards read of every node: its name, its
// running pods and containers), and says whether the path was /metrics.
// Of a kubelet's internals (its operations, the runtime's latencies)
// nothing: a virtual node has none; its provider's nodes do, in the
// provider's own monitoring.
func (s *Server) serveKubeletMetrics(ctx context.Context, w http.ResponseWriter, r *http.Request, node string) bool {
	if path.Clean("/"+r.URL.Path) != "/metrics" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false
	}
	var pods corev1.PodList
	if err := s.Client.List(ctx, &pods, client.MatchingFields{podsByNodeField: node}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return true
	}
	w.Header().Set("Content-Type", promContentType)
	if err := writeKubeletMetrics(w, node, pods.Items); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Writing the kubelet metrics failed", "error", err.Error())
	}
	return true
}

// writeKubeletMetrics writes what /metrics shows of node and its pods.
func writeKubeletMetrics(w io.Writer, node string, pods []corev1.Pod) error {
	var runningPods, runningContainers int
	for i := range pods {
		pod := &pods[i]
		if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
			continue
		}
		runningPods++
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.State.Running != nil {
				runningContainers++
			}
		}
	}
	var t promText
	t.family("kubelet_node_name", "[ALPHA] The node's name. The count is always 1.", "gauge")
	t.sample("kubelet_node_name", []string{"node", node}, 1, metav1.Time{})
	t.family("kubelet_running_pods", "[ALPHA] Number of pods that have a running pod sandbox", "gauge")
	t.sample("kubelet_running_pods", nil, float64(runningPods), metav1.Time{})
	t.family("kubelet_running_containers", "[ALPHA] Number of containers currently running", "gauge")
	t.sample("kubelet_running_containers", []string{"container_state", "running"}, float64(runningContainers), metav1.Time{})
	_, err := io.WriteString(w, t.b.String())
	return err
}

// writeCadvisorMetrics writes sum as a kubelet's /metrics/cadvisor shows
// its containers, with the labels monitoring selects them by (a
// container's image and ID, from pods, the node's pods by UID): what the
// provider measured of them, as /metrics/resource.
func writeCadvisorMetrics(w io.Writer, sum *statsv1alpha1.Summary, pods map[string]*corev1.Pod) error {
	type labelled struct {
		labels []string
		stats  statsv1alpha1.ContainerStats
	}
	var containers []labelled
	for _, p := range sum.Pods {
		pod := pods[p.PodRef.UID]
		if pod == nil {
			continue
		}
		images, ids := map[string]string{}, map[string]string{}
		for _, c := range pod.Spec.Containers {
			images[c.Name] = c.Image
		}
		for _, cs := range pod.Status.ContainerStatuses {
			ids[cs.Name] = cs.ContainerID
		}
		for _, c := range p.Containers {
			if c.CPU == nil || c.CPU.UsageCoreNanoSeconds == nil || c.Memory == nil || c.Memory.WorkingSetBytes == nil || c.Memory.UsageBytes == nil {
				continue
			}
			id := ids[c.Name]
			_, name, _ := strings.Cut(id, "://")
			containers = append(containers, labelled{[]string{
				"container", c.Name, "id", id, "image", images[c.Name], "name", name, "namespace", p.PodRef.Namespace, "pod", p.PodRef.Name,
			}, c})
		}
	}
	var t promText
	t.family("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", "counter")
	for _, c := range containers {
		t.sample("container_cpu_usage_seconds_total", append(c.labels[:len(c.labels):len(c.labels)], "cpu", "total"),
			float64(*c.stats.CPU.UsageCoreNanoSeconds)/float64(time.Second), c.stats.CPU.Time)
	}
	t.family("container_memory_working_set_bytes", "Current working set in bytes.", "gauge")
	for _, c := range containers {
		t.sample("container_memory_working_set_bytes", c.labels, float64(*c.stats.Memory.WorkingSetBytes), c.stats.Memory.Time)
	}
	t.family("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed", "gauge")
	for _, c := range containers {
		t.sample("container_memory_usage_bytes", c.labels, float64(*c.stats.Memory.UsageBytes), c.stats.Memory.Time)
	}
	t.family("container_start_time_seconds", "Start time of the container since unix epoch in seconds.", "gauge")
	for _, c := range containers {
		if !c.stats.StartTime.IsZero() {
			t.sample("container_start_time_seconds", c.labels, float64(c.stats.StartTime.Unix()), metav1.Time{})
		}
	}
	_, err := io.WriteString(w, t.b.String())
	return err
}
