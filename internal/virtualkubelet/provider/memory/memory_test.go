// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package memory

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
)

// TestContract: the in-memory provider answers as the contract says a
// provider does, so that what the reflectors' tests show holds against a
// real one: API errors on stale writes, deletions by UID, graceful pod
// deletion, and an event for every change.
func TestContract(t *testing.T) {
	p := New()
	ctx := t.Context()
	ns, err := p.Namespace(ctx, "p1", "web", "consumer-web")
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "consumer-web", Name: "a"}}
	if err := ns.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := ns.Create(ctx, pod); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: %v, want AlreadyExists", err)
	}
	got := ns.Get(provider.Pods, "a").(*corev1.Pod)
	if got.UID == "" || got.ResourceVersion == "" {
		t.Fatalf("stored pod has no UID or resourceVersion: %+v", got.ObjectMeta)
	}
	stale := got.DeepCopy()
	fresh := got.DeepCopy()
	fresh.Labels = map[string]string{"x": "1"}
	if err := ns.Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if err := ns.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Errorf("update with a stale resourceVersion: %v, want Conflict", err)
	}
	if err := ns.Delete(ctx, provider.Pods, "a", "another-uid", nil); err != nil || ns.Get(provider.Pods, "a") == nil {
		t.Errorf("delete with another UID: %v, and the pod is gone; want it left alone", err)
	}
	if err := ns.Delete(ctx, provider.Pods, "a", got.UID, ptr.To[int64](5)); err != nil {
		t.Fatal(err)
	}
	terminating := ns.Get(provider.Pods, "a")
	if terminating == nil || terminating.GetDeletionTimestamp() == nil || ptr.Deref(terminating.(*corev1.Pod).DeletionGracePeriodSeconds, 0) != 5 {
		t.Fatalf("a pod deleted with 5 s of grace: %+v, want it terminating for 5 s", terminating)
	}
	p.Remove("p1", provider.Pods, "consumer-web", "a")
	if ns.Get(provider.Pods, "a") != nil {
		t.Error("the pod is still there once removed")
	}
	// create, update, delete, remove: four changes, four events.
	if n := len(p.channels[provider.Pods]); n != 4 {
		t.Errorf("%d events, want one per change (4)", n)
	}
	ev := <-p.channels[provider.Pods]
	if ev.Object.GetNamespace() != "web" || ev.Object.GetName() != "a" {
		t.Errorf("event for %s/%s, want the local object web/a", ev.Object.GetNamespace(), ev.Object.GetName())
	}
}
