// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package forge makes the metadata of the copies the virtual kubelet keeps
// in a provider, shared by the pod, token and object reflectors, and what
// they read of a pod alike.
package forge

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

const (
	// LastAppliedAnnotation is kubectl's; it describes the local object
	// and is not copied.
	LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
	// TokenForPodAnnotation marks a provider Secret holding the token of
	// the pod it names: the pod reflector owns it, the Secret reflector
	// leaves it alone.
	TokenForPodAnnotation = "offloading.liqo.io/token-for-pod"
	// TokenRefreshAnnotation is when the token is renewed.
	TokenRefreshAnnotation = "offloading.liqo.io/token-refresh-at"
	// AnnotationsAnnotation lists, comma-separated, the keys of the
	// annotations of a provider pod that are the consumer's: those the
	// virtual kubelet keeps as the local pod's change, and removes when
	// the local pod's go; the provider's own it leaves alone.
	AnnotationsAnnotation = "offloading.liqo.io/annotations"
	// RootCAConfigMap is the consumer's CA bundle in every namespace;
	// every provider namespace has its own.
	RootCAConfigMap = "kube-root-ca.crt"
)

// Meta is the metadata of the provider copy of a local object.
func Meta(local *metav1.ObjectMeta, remoteNS, consumerID string) metav1.ObjectMeta {
	labels := maps.Clone(local.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	// What a broker offloads in turn for a consumer names that consumer:
	// from this cluster's own origin label (which the admission policy
	// holds to the consumer's identity), never from the consumer's word.
	delete(labels, offloadingv1alpha1.ForClusterLabel)
	if origin := local.Labels[offloadingv1alpha1.OriginClusterLabel]; origin != "" && origin != consumerID {
		labels[offloadingv1alpha1.ForClusterLabel] = origin
	}
	labels[offloadingv1alpha1.OriginClusterLabel] = consumerID
	annotations := maps.Clone(local.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	// The markers of the virtual kubelet's own provider objects are never
	// taken from a consumer object.
	delete(annotations, LastAppliedAnnotation)
	delete(annotations, TokenForPodAnnotation)
	delete(annotations, TokenRefreshAnnotation)
	delete(annotations, AnnotationsAnnotation)
	annotations[offloadingv1alpha1.OriginUIDAnnotation] = string(local.UID)
	annotations[offloadingv1alpha1.OriginNamespaceAnnotation] = local.Namespace
	return metav1.ObjectMeta{Namespace: remoteNS, Name: local.Name, Labels: labels, Annotations: annotations}
}

// PodReady says whether pod's Ready condition is True.
func PodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ShadowPod is the ShadowPod that keeps pod in its provider (the provider
// makes the pod again from it while this cluster cannot): of the same
// name and namespace, labelled as the pod (its origin among them, which
// the provider's admission checks), its template the pod's labels,
// annotations and spec, but what only the pod made first may have: a
// node (the provider's scheduler chooses one each time) and ephemeral
// containers (added to a running pod, never to a new one).
func ShadowPod(pod *corev1.Pod) (*offloadingv1alpha1.ShadowPod, error) {
	spec := pod.Spec.DeepCopy()
	spec.NodeName, spec.EphemeralContainers = "", nil
	template, err := offloadingv1alpha1.NewShadowPodTemplate(maps.Clone(pod.Labels), maps.Clone(pod.Annotations), spec)
	if err != nil {
		return nil, err
	}
	return &offloadingv1alpha1.ShadowPod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, Labels: maps.Clone(pod.Labels)},
		Spec:       offloadingv1alpha1.ShadowPodSpec{Template: template},
	}, nil
}

// ShadowOwner is the ShadowPod that keeps pod, as its controller owner
// reference says, or nil.
func ShadowOwner(pod metav1.Object) *metav1.OwnerReference {
	owner := metav1.GetControllerOfNoCopy(pod)
	if owner == nil || owner.Kind != "ShadowPod" || owner.APIVersion != offloadingv1alpha1.GroupVersion.String() {
		return nil
	}
	return owner
}
