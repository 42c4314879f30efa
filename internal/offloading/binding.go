// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/sharing"
)

// ValidateBindingPath is where the binding webhook is served.
const ValidateBindingPath = "/validate-v1-pod-binding"

// BindingValidator keeps a pod off a virtual node whose offer cannot run
// it in one piece: a sum of providers (a broker's), or of nodes, may hold
// the pod while no one of them does, and the pod, accepted, would wait
// there for ever. The scheduler's binding of such a pod is refused, with
// the largest pod the node can take; the scheduler says so in the pod's
// FailedScheduling event and tries again later, so the pod binds once an
// offer grows to hold it. The API server calls it for the bindings of
// offloaded namespaces' pods alone.
type BindingValidator struct {
	// Reader reads nodes and pods (a cache).
	Reader client.Reader
	// APIReader reads a pod the cache does not hold yet (just created).
	APIReader client.Reader
}

// binding is the part of a Binding the webhook reads.
type binding struct {
	Target corev1.ObjectReference `json:"target"`
}

// Handle implements admission.Handler.
func (v *BindingValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.SubResource != "binding" {
		return admission.Allowed("not a binding")
	}
	var b binding
	if err := json.Unmarshal(req.Object.Raw, &b); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the binding: %w", err))
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		return admission.Allowed("not bound to a node")
	}
	var node corev1.Node
	switch err := v.Reader.Get(ctx, client.ObjectKey{Name: b.Target.Name}, &node); {
	case apierrors.IsNotFound(err):
		return admission.Allowed("no such node here: the API server says so")
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if !sharing.IsVirtual(&node) {
		return admission.Allowed("not a virtual node")
	}
	largest, err := sharing.ParseLargestPods(node.Annotations)
	if err != nil {
		// Ours, written by the virtual kubelet: a node an operator broke
		// binds as it did before the bound.
		logf.FromContext(ctx).Error(err, "A virtual node's largest pods cannot be read: not applied", "node", node.Name)
		return admission.Allowed("the node's largest pods cannot be read")
	}
	if len(largest) == 0 {
		return admission.Allowed("no bound")
	}
	var pod corev1.Pod
	key := client.ObjectKey{Namespace: req.Namespace, Name: req.Name}
	err = v.Reader.Get(ctx, key, &pod)
	if apierrors.IsNotFound(err) && v.APIReader != nil {
		err = v.APIReader.Get(ctx, key, &pod)
	}
	switch {
	case apierrors.IsNotFound(err):
		return admission.Allowed("no such pod: the API server says so")
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	}
	requests := sharing.PodRequests(&pod)
	if sharing.FitsOne(largest, requests) {
		return admission.Allowed("")
	}
	fits := make([]string, len(largest))
	for i, e := range largest {
		fits[i] = sharing.Describe(e)
	}
	return admission.Denied(fmt.Sprintf("the pod requests %s, more than virtual node %s can run in one piece: the largest pod it can take is %s (annotation %s)",
		sharing.Describe(requests), node.Name, strings.Join(fits, "; or "), offloadingv1alpha1.LargestPodsAnnotation))
}
