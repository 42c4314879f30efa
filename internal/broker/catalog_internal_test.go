// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodHealth: a provider's offloading health counts its running,
// pending and failed pods; a pod that completed is none of them (a Job's
// pods done would otherwise show as running); the start latency is the
// median over the pods Ready.
func TestPodHealth(t *testing.T) {
	created := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	pod := func(phase corev1.PodPhase, readyAfter time.Duration) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}, Status: corev1.PodStatus{Phase: phase}}
		if readyAfter > 0 {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(readyAfter))}}
		}
		return p
	}
	h := podHealth([]corev1.Pod{
		pod(corev1.PodRunning, time.Second),
		pod(corev1.PodRunning, 3*time.Second),
		pod(corev1.PodRunning, 2*time.Second),
		pod(corev1.PodPending, 0),
		pod(corev1.PodFailed, 0),
		pod(corev1.PodSucceeded, 0),
		pod(corev1.PodSucceeded, 0),
	})
	if h.Running != 3 || h.Pending != 1 || h.Failed != 1 {
		t.Errorf("podHealth: %d running, %d pending, %d failed; want 3, 1, 1 (the 2 completed in none)", h.Running, h.Pending, h.Failed)
	}
	if h.StartMillis == nil || *h.StartMillis != 2000 {
		t.Errorf("podHealth's start: %v ms, want the median 2000", h.StartMillis)
	}
}
