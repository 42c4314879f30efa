// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package pods

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// recorded keeps the reasons and notes of the events it is given.
type recorded struct{ reasons, notes []string }

func (r *recorded) Eventf(_, _ runtime.Object, _, reason, _, note string, args ...any) {
	r.reasons = append(r.reasons, reason)
	r.notes = append(r.notes, fmt.Sprintf(note, args...))
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

	// A namespace the cache does not hold yet is confirmed with the API
	// server before its event is dropped.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new"}}); err != nil {
		t.Fatal(err)
	}
	stale := LiveNamespaces{EventRecorder: inner, Reader: noNamespaces{}, Live: c}
	stale.Eventf(pod("new"), nil, corev1.EventTypeWarning, "InNew", "Offload", "")
	stale.Eventf(pod("gone"), nil, corev1.EventTypeWarning, "InGone", "Offload", "")
	if want := []string{"InAlive", "OnNode", "InNew"}; !slices.Equal(inner.reasons, want) {
		t.Fatalf("with a cache behind: recorded %v, want %v", inner.reasons, want)
	}

	// A note that quotes a peer at length is cut to what the API server
	// takes.
	r.Eventf(pod("alive"), nil, corev1.EventTypeWarning, strings.Repeat("r", 200), "Offload", "refused: %s", strings.Repeat("é", 2000))
	last := inner.notes[len(inner.notes)-1]
	if len(last) > maxNote || !utf8.ValidString(last) || !strings.HasPrefix(last, "refused: é") || len(inner.reasons[len(inner.reasons)-1]) > maxReason {
		t.Fatalf("a long note became %d bytes (valid UTF-8: %v), its reason %d", len(last), utf8.ValidString(last), len(inner.reasons[len(inner.reasons)-1]))
	}
}

// noNamespaces is a cache that holds no namespace yet.
type noNamespaces struct{ client.Reader }

func (noNamespaces) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(corev1.Resource("namespaces"), key.Name)
}
