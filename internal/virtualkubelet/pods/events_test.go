// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package pods

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// recorded keeps the reasons of the events it is given.
type recorded struct{ reasons []string }

func (r *recorded) Eventf(_, _ runtime.Object, _, reason, _, _ string, _ ...any) {
	r.reasons = append(r.reasons, reason)
}

// TestLiveNamespacesDropsEventsOfEndingNamespaces: against a real API
// server (which finalizes no namespace, so a deleted one stays
// terminating), an event about a pod of a live namespace, or about a
// node, is recorded; one about a pod of a terminating namespace, or of a
// namespace that is gone, is not.
func TestLiveNamespacesDropsEventsOfEndingNamespaces(t *testing.T) {
	c, err := client.New(envtest.Start(t, "events"), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, name := range []string{"alive", "ending"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ending"}}); err != nil {
		t.Fatal(err)
	}
	inner := &recorded{}
	r := LiveNamespaces{EventRecorder: inner, Reader: c}
	pod := func(ns string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}}
	}
	r.Eventf(pod("alive"), nil, corev1.EventTypeWarning, "InAlive", "Offload", "")
	r.Eventf(pod("ending"), nil, corev1.EventTypeWarning, "InEnding", "Offload", "")
	r.Eventf(pod("gone"), nil, corev1.EventTypeWarning, "InGone", "Offload", "")
	r.Eventf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, nil, corev1.EventTypeNormal, "OnNode", "Ready", "")
	if want := []string{"InAlive", "OnNode"}; !slices.Equal(inner.reasons, want) {
		t.Fatalf("recorded %v, want %v", inner.reasons, want)
	}
}
