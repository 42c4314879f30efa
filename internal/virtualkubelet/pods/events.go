// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package pods

import (
	"context"

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
type LiveNamespaces struct {
	events.EventRecorder
	// Reader reads Namespaces, from the manager's cache.
	Reader client.Reader
}

// Eventf implements events.EventRecorder.
func (r LiveNamespaces) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if o, ok := regarding.(metav1.Object); ok && o.GetNamespace() != "" && !r.live(o.GetNamespace()) {
		return
	}
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// live is false for a namespace that is terminating or gone; an error
// reading it says nothing, and the event is recorded.
func (r LiveNamespaces) live(name string) bool {
	var ns corev1.Namespace
	err := r.Reader.Get(context.Background(), client.ObjectKey{Name: name}, &ns)
	if apierrors.IsNotFound(err) {
		return false
	}
	return err != nil || (ns.DeletionTimestamp.IsZero() && ns.Status.Phase != corev1.NamespaceTerminating)
}
