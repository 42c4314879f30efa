// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package testnetwork

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestDescribePod: a pod that never ended is described by its phase, its
// node, the conditions it misses, what its container waits for and its
// last three warnings, newest last; normal events and other pods' are left
// out.
func TestDescribePod(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "client-x"},
		Spec:       corev1.PodSpec{NodeName: "liqo-x"},
		Status: corev1.PodStatus{
			Phase:             corev1.PodPending,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "check"}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "check", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}},
		},
	}
	base := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	event := func(name, pod, typ, reason string, at int) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "t", Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "t", Name: pod},
			Type:           typ, Reason: reason, Message: reason + " said", Count: 2,
			LastTimestamp: metav1.NewTime(base.Add(time.Duration(at) * time.Second)),
		}
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(
		event("a", "client-x", corev1.EventTypeWarning, "First", 1),
		event("b", "client-x", corev1.EventTypeWarning, "Quota", 4),
		event("c", "client-x", corev1.EventTypeWarning, "Second", 2),
		event("d", "client-x", corev1.EventTypeWarning, "Third", 3),
		event("e", "client-x", corev1.EventTypeNormal, "Scheduled", 5),
		event("f", "other", corev1.EventTypeWarning, "Other", 6),
	).WithIndex(&corev1.Event{}, "involvedObject.name", func(o client.Object) []string {
		// The API server's field selector on events.
		return []string{o.(*corev1.Event).InvolvedObject.Name}
	}).Build()
	got := describePod(t.Context(), c, pod)
	want := "phase Pending; on node liqo-x; Ready False (ContainersNotReady: check); container check waiting (ContainerCreating: ); " +
		"warning Second (x2): Second said; warning Third (x2): Third said; warning Quota (x2): Quota said"
	if got != want {
		t.Errorf("describePod:\n got %s\nwant %s", got, want)
	}
	if strings.Contains(got, "PodScheduled") {
		t.Error("a condition met is listed")
	}
}
