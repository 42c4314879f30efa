// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ShadowPodTemplate is the pod a ShadowPod keeps: what its pods are made
// of, but their name, namespace and owner.
type ShadowPodTemplate struct {
	// Labels of the pods made.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations of the pods made.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// Spec of the pods made: a PodSpec. Kept as it was written, without
	// a schema here: the consumer's virtual kubelet makes the first pod
	// from it, which the API server checks whole, and the admission
	// policies hold it to the rules of a consumer's pods
	// (liqo-offloaded-shadowpods); a schema of a whole PodSpec would
	// double the cost of every write. Read with PodSpec: what does not
	// decode as a PodSpec is this ShadowPod's error alone, never the
	// cache's of every ShadowPod.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Spec runtime.RawExtension `json:"spec"`
}

// NewShadowPodTemplate is the template of pods with labels, annotations
// and spec.
func NewShadowPodTemplate(labels, annotations map[string]string, spec *corev1.PodSpec) (ShadowPodTemplate, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return ShadowPodTemplate{}, err
	}
	return ShadowPodTemplate{Labels: labels, Annotations: annotations, Spec: runtime.RawExtension{Raw: raw}}, nil
}

// PodSpec decodes the template's spec.
func (t *ShadowPodTemplate) PodSpec() (*corev1.PodSpec, error) {
	var spec corev1.PodSpec
	if len(t.Spec.Raw) == 0 {
		return nil, fmt.Errorf("spec.template.spec: Required value")
	}
	if err := json.Unmarshal(t.Spec.Raw, &spec); err != nil {
		return nil, fmt.Errorf("spec.template.spec: Invalid value: not a PodSpec: %w", err)
	}
	return &spec, nil
}

// ShadowPodSpec is what a consumer's virtual kubelet asks the provider to
// keep running.
type ShadowPodSpec struct {
	// Template is the pod to keep: a pod of the ShadowPod's name, made
	// again whenever it is deleted or evicted.
	Template ShadowPodTemplate `json:"template"`
}

// ShadowPodStatus is what the provider did. Nothing is written while the
// pod the consumer's virtual kubelet made runs (a write per pod would
// cost every offloaded pod).
type ShadowPodStatus struct {
	// Ended is the phase the pod ended in (Succeeded or Failed): it is
	// not made again.
	// +optional
	Ended corev1.PodPhase `json:"ended,omitempty"`
	// Recreations counts the pods this cluster made from the template
	// (the consumer's virtual kubelet makes the first).
	// +optional
	Recreations int32 `json:"recreations,omitempty"`
	// Conditions: PodCreated (False with the provider's refusal: a quota,
	// an admission policy, an invalid spec).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ShadowPod lives in a namespace a provider made for a consumer's
// offloaded namespace: the consumer's virtual kubelet writes it, with its
// own identity, for each pod it offloads there, and the provider's
// controller manager keeps a pod of the same name, owned by it, made from
// spec.template. The pod outlives its consumer: deleted or evicted while
// the consumer cannot be reached, it is made again; it goes with the
// ShadowPod. A pod that ended (Succeeded, Failed) is not made again: the
// consumer decides what comes next, as for a pod of its own.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=spod
// +kubebuilder:printcolumn:name="Ended",type=string,JSONPath=`.status.ended`
// +kubebuilder:printcolumn:name="Recreations",type=integer,JSONPath=`.status.recreations`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ShadowPod struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ShadowPodSpec `json:"spec"`
	// +optional
	Status ShadowPodStatus `json:"status,omitempty"`
}

// ShadowPodList is a list of ShadowPod.
//
// +kubebuilder:object:root=true
type ShadowPodList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ShadowPod `json:"items"`
}

func init() {
	register(&ShadowPod{}, &ShadowPodList{})
}
