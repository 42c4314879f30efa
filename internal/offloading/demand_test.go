// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestAddPodDemand: a pod counts as the provider's quota will count it: a
// limit not named is the request (as the pod reflector sends it), a
// container naming neither gets the LimitRange's defaults, an init
// container counts when it asks for more than the containers together,
// and each pod counts one toward pods.
func TestAddPodDemand(t *testing.T) {
	q := resource.MustParse
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: q("1Gi")},
		}}},
		Containers: []corev1.Container{
			{Name: "requests-only", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("250m")}}},
			{Name: "limits-above", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: q("250m")}, Limits: corev1.ResourceList{corev1.ResourceCPU: q("1250m")},
			}},
			{Name: "nothing"},
		},
	}}
	demand := corev1.ResourceList{}
	addPodDemand(demand, pod)
	addPodDemand(demand, &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "small"}}}})
	want := map[corev1.ResourceName]string{
		corev1.ResourcePods: "2",
		// 250m + 250m + 10m, and the second pod's 10m.
		corev1.ResourceRequestsCPU: "520m",
		// 250m + 1250m + 10m + 10m.
		corev1.ResourceLimitsCPU: "1520m",
		// The init container's 1Gi over the containers' 3 × 32Mi; 32Mi.
		corev1.ResourceRequestsMemory: "1056Mi",
		corev1.ResourceLimitsMemory:   "1056Mi",
	}
	for name, w := range want {
		if got := demand[name]; got.Cmp(q(w)) != 0 {
			t.Errorf("%s: %s, want %s", name, got.String(), w)
		}
	}
	if len(demand) != len(want) {
		t.Errorf("demand %v names more than %v", demand, want)
	}
}
