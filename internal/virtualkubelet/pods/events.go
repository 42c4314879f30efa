// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package pods

import (
	"context"
	"fmt"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LiveNamespaces records an event only into a namespace that is neither
// terminating nor gone. The API server refuses every event into such a
// namespace; while an offloaded namespace of thousands of pods is torn
// down, each of its pods would otherwise send one or more (the offloading
// goes before its pods do), all refused, and the recorder's retries and
// error logs with them.
//
// It also bounds what an event carries to what the API server accepts (a
// note of 1 KiB, a reason and an action of 128 bytes): a note that quotes
// a peer's answer could otherwise be made long enough to have the event
// refused, and a warning about that peer lost.
type LiveNamespaces struct {
	events.EventRecorder
	// Reader reads Namespaces, from the manager's cache.
	Reader client.Reader
	// Live, when set, confirms a namespace the cache does not hold (it
	// may be newer than the cache) before its event is dropped.
	Live client.Reader
}

// The limits of events.k8s.io/v1.
const (
	maxNote   = 1024
	maxReason = 128
)

// Eventf implements events.EventRecorder.
func (r LiveNamespaces) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if o, ok := regarding.(metav1.Object); ok && o.GetNamespace() != "" && !r.live(o.GetNamespace()) {
		return
	}
	r.EventRecorder.Eventf(regarding, related, eventtype, truncate(reason, maxReason), truncate(action, maxReason), "%s",
		truncate(fmt.Sprintf(note, args...), maxNote))
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "..."
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// live is false for a namespace that is terminating or gone; an error
// reading it says nothing, and the event is recorded.
func (r LiveNamespaces) live(name string) bool {
	var ns corev1.Namespace
	err := r.Reader.Get(context.Background(), client.ObjectKey{Name: name}, &ns)
	if apierrors.IsNotFound(err) && r.Live != nil {
		err = r.Live.Get(context.Background(), client.ObjectKey{Name: name}, &ns)
	}
	if apierrors.IsNotFound(err) {
		return false
	}
	return err != nil || (ns.DeletionTimestamp.IsZero() && ns.Status.Phase != corev1.NamespaceTerminating)
}
