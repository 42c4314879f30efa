// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// Demands returns, for each provider, what the pods of namespace bound to
// its virtual nodes ask for, under a ResourceQuota's names (pods,
// requests.* and limits.* of CPU, memory and ephemeral storage), as the
// provider's quota will count them: a limit a container does not name is
// its request (BoundLimits, as the pod reflector sends it), a container that names
// neither is counted at the defaults the provider's LimitRange gives it
// (DefaultRequests). Pods that ended are not counted.
func Demands(ctx context.Context, c client.Reader, namespace string) (map[string]corev1.ResourceList, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingLabels{offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue}); err != nil {
		return nil, err
	}
	providerOf := map[string]string{}
	for i := range nodes.Items {
		if p := nodes.Items[i].Labels[offloadingv1alpha1.RemoteClusterLabel]; p != "" {
			providerOf[nodes.Items[i].Name] = p
		}
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	out := map[string]corev1.ResourceList{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		p, ok := providerOf[pod.Spec.NodeName]
		if !ok || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if out[p] == nil {
			out[p] = corev1.ResourceList{}
		}
		addPodDemand(out[p], pod)
	}
	return out, nil
}

// addPodDemand adds what pod asks for to demand.
func addPodDemand(demand corev1.ResourceList, pod *corev1.Pod) {
	withDefaults := pod.DeepCopy()
	for _, cs := range [][]corev1.Container{withDefaults.Spec.InitContainers, withDefaults.Spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			BoundLimits(r)
			for name, def := range DefaultRequests {
				if _, ok := r.Limits[name]; !ok {
					if r.Limits == nil {
						r.Limits = corev1.ResourceList{}
					}
					r.Limits[name] = def.DeepCopy()
				}
				if _, ok := r.Requests[name]; !ok {
					if r.Requests == nil {
						r.Requests = corev1.ResourceList{}
					}
					r.Requests[name] = r.Limits[name].DeepCopy()
				}
			}
		}
	}
	add := func(name corev1.ResourceName, q resource.Quantity) {
		sum := demand[name]
		sum.Add(q)
		demand[name] = sum
	}
	add(corev1.ResourcePods, *resource.NewQuantity(1, resource.DecimalSI))
	requests := resourcehelper.PodRequests(withDefaults, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(withDefaults, resourcehelper.PodResourcesOptions{})
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if q, ok := requests[r]; ok {
			add("requests."+r, q)
		}
		if q, ok := limits[r]; ok {
			add("limits."+r, q)
		}
	}
}

// BoundLimits gives every resource a container requests a limit, the
// request itself where it names none: a provider bounds what a consumer
// uses by its limits as well as its requests (its quota counts both), and
// its defaults for a container that names no limit are small ones. The
// pod reflector sends pods so, and Demands counts them so.
func BoundLimits(r *corev1.ResourceRequirements) {
	for name, q := range r.Requests {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory && name != corev1.ResourceEphemeralStorage {
			continue
		}
		if _, ok := r.Limits[name]; !ok {
			if r.Limits == nil {
				r.Limits = corev1.ResourceList{}
			}
			r.Limits[name] = q.DeepCopy()
		}
	}
}
