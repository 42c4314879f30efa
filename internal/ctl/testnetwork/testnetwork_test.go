// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package testnetwork

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/liqo-go/liqo/api"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
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

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestOffloadWaitsForAnEarlierTestsNamespace: a test namespace an earlier
// test left terminating is waited for, then made anew and offloaded; one
// that stays is refused as a test running or kept.
func TestOffloadWaitsForAnEarlierTestsNamespace(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	o := &Options{TestNamespace: "test-liqo-network"}
	now := metav1.Now()
	old := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.TestNamespace, Finalizers: []string{"example.com/hold"}, DeletionTimestamp: &now}}
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(old).WithStatusSubresource(&offloadingv1alpha1.NamespaceOffloading{}).Build()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- o.offload(ctx, c, out) }()
	// Waiting, it says so; the earlier namespace goes.
	if err := poll(ctx, func() (bool, error) {
		return strings.Contains(out.String(), "Waiting for namespace test-liqo-network"), nil
	}, "the wait to be said"); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), old); err != nil {
		t.Fatal(err)
	}
	old.Finalizers = nil
	if err := c.Update(ctx, old); err != nil {
		t.Fatal(err)
	}
	// Made anew and offloaded: once Ready, offload returns.
	var no offloadingv1alpha1.NamespaceOffloading
	if err := poll(ctx, func() (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: o.TestNamespace, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no)
		return err == nil, client.IgnoreNotFound(err)
	}, "the NamespaceOffloading"); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&no.Status.Conditions, metav1.Condition{Type: offloadingv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready"})
	if err := c.Status().Update(ctx, &no); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("offload after the earlier namespace went: %v", err)
	}
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: o.TestNamespace}, &ns); err != nil || ns.DeletionTimestamp != nil {
		t.Fatalf("the test namespace after offload: %v, deletion %v", err, ns.DeletionTimestamp)
	}

	// One that stays: refused.
	err := o.offload(ctx, c, out)
	if err == nil || !strings.Contains(err.Error(), "a test is running, or one was kept") {
		t.Fatalf("offload with the namespace there: %v, want refused", err)
	}
}
