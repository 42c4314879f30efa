// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package controllermanager

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/offloading"
)

// cacheOptions caches what a peer writes here only as far as this
// cluster needs it, so that no consumer makes the controller manager's
// memory grow with what it stores: the Secrets, ConfigMaps, Services and
// EndpointSlices of the namespaces made for consumers (labelled with
// their origin; the admission policy liqo-offloaded-objects makes sure
// they are) are not cached at all, nothing here reads them; a consumer's
// pods are cached as their placement, resources and addresses alone,
// which the Broadcaster counts and the network exposes. This cluster's own objects of those kinds are
// cached in every namespace: the virtual kubelet reflects those of
// offloaded namespaces. Managed fields are never read, and are most of an
// object's size.
func cacheOptions() cache.Options {
	notAConsumers, err := labels.NewRequirement(offloadingv1alpha1.OriginClusterLabel, selection.DoesNotExist, nil)
	if err != nil {
		panic(err) // a constant, valid key
	}
	own := cache.ByObject{Label: labels.NewSelector().Add(*notAConsumers)}
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:             own,
			&corev1.ConfigMap{}:          own,
			&corev1.Service{}:            own,
			&discoveryv1.EndpointSlice{}: own,
			// A consumer's claims are the provider's storage's business.
			&corev1.PersistentVolumeClaim{}: own,
			// A consumer's budgets bound the moves of its pods, which the
			// API server checks; nothing here reads them.
			&policyv1.PodDisruptionBudget{}: own,
			&corev1.Pod{}:                   {Transform: trimConsumerPod},
			// What a consumer asks to keep running, without the pod
			// itself (read whole when it is made).
			&offloadingv1alpha1.ShadowPod{}: {Transform: offloading.TrimShadowPod},
		},
	}
}

// trimConsumerPod keeps of a pod a consumer runs here its name, its
// placement, its containers' resources, its phase and its addresses (the
// gateway lets the consumer reach them); any other pod whole, without its
// managed fields, and so a consumer's pod this cluster, a broker,
// re-offloads to a provider (the virtual kubelet reflects it whole).
func trimConsumerPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.ManagedFields = nil
	consumer, ok := pod.Labels[offloadingv1alpha1.OriginClusterLabel]
	if !ok || reoffloaded(pod) {
		return pod, nil
	}
	trim := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, Resources: c.Resources}
		}
		return out
	}
	labels := map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}
	// What a broker runs here for one of its consumers: the exposure
	// lists it for that consumer by this label.
	if forCluster := pod.Labels[offloadingv1alpha1.ForClusterLabel]; forCluster != "" {
		labels[offloadingv1alpha1.ForClusterLabel] = forCluster
	}
	return &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
			Labels: labels, OwnerReferences: shadowOwner(pod),
		},
		Spec: corev1.PodSpec{
			NodeName: pod.Spec.NodeName, Containers: trim(pod.Spec.Containers), InitContainers: trim(pod.Spec.InitContainers),
			Overhead: pod.Spec.Overhead,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, PodIP: pod.Status.PodIP, PodIPs: pod.Status.PodIPs},
	}, nil
}

// shadowOwner is the ShadowPod that keeps pod, the only owner of a
// consumer's pod read here (offloading.ShadowPodReconciler).
func shadowOwner(pod *corev1.Pod) []metav1.OwnerReference {
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "ShadowPod" || owner.APIVersion != offloadingv1alpha1.GroupVersion.String() {
		return nil
	}
	return []metav1.OwnerReference{*owner}
}

// reoffloaded says whether a consumer's pod may go on to a virtual node:
// it tolerates their taint, which the admission policy
// liqo-offloaded-pods lets a consumer's pod do only in a namespace a
// broker orchestrates (the broker's pod webhook adds it).
func reoffloaded(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == offloadingv1alpha1.VirtualNodeTaint })
}
