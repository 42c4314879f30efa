// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package controllermanager

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// TestTrimConsumerPod: a consumer's pod is cached as its placement and
// resources alone, unless this cluster (a broker) re-offloads it, which
// the virtual kubelet does from the cache: then it is kept whole.
func TestTrimConsumerPod(t *testing.T) {
	pod := func(tolerations ...corev1.Toleration) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: "consumer", "app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx", Env: []corev1.EnvVar{{Name: "A", Value: "1"}}}}, Tolerations: tolerations},
		}
	}
	got, err := trimConsumerPod(pod())
	if err != nil {
		t.Fatal(err)
	}
	if p := got.(*corev1.Pod); p.Spec.Containers[0].Image != "" || p.Labels["app"] != "" {
		t.Errorf("a consumer's pod cached with image %q and labels %v, want them trimmed", p.Spec.Containers[0].Image, p.Labels)
	}
	// A broker's pod run for one of its consumers keeps that mark: the
	// exposure lists it for that consumer by it.
	brokered := pod()
	brokered.Labels[offloadingv1alpha1.ForClusterLabel] = "its-consumer"
	got, err = trimConsumerPod(brokered)
	if err != nil {
		t.Fatal(err)
	}
	if p := got.(*corev1.Pod); p.Labels[offloadingv1alpha1.ForClusterLabel] != "its-consumer" || p.Labels[offloadingv1alpha1.OriginClusterLabel] != "consumer" {
		t.Errorf("a broker's pod for its consumer cached with labels %v, want its origin and for-cluster labels", p.Labels)
	}
	got, err = trimConsumerPod(pod(corev1.Toleration{Key: offloadingv1alpha1.VirtualNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}))
	if err != nil {
		t.Fatal(err)
	}
	if p := got.(*corev1.Pod); p.Spec.Containers[0].Image != "nginx" || len(p.Spec.Containers[0].Env) != 1 || p.Labels["app"] != "web" {
		t.Errorf("a re-offloaded consumer pod cached as %+v, want it whole", p)
	}
}

// TestTrimConsumerPodKeepsItsShadowPod: the ShadowPod that keeps a
// consumer's pod stays on its cached copy (the controller keeping it
// finds it by it), and no other owner does.
func TestTrimConsumerPodKeepsItsShadowPod(t *testing.T) {
	shadow := metav1.OwnerReference{APIVersion: offloadingv1alpha1.GroupVersion.String(), Kind: "ShadowPod", Name: "p", UID: "sp-1", Controller: ptr.To(true)}
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "any", UID: "cm-1"}
	for _, c := range []struct {
		name   string
		owners []metav1.OwnerReference
		want   int
	}{
		{"kept by a ShadowPod", []metav1.OwnerReference{other, shadow}, 1},
		{"owned otherwise", []metav1.OwnerReference{other}, 0},
		{"a ShadowPod, not its controller", []metav1.OwnerReference{{APIVersion: shadow.APIVersion, Kind: shadow.Kind, Name: "p", UID: "sp-2"}}, 0},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: "consumer"}, OwnerReferences: c.owners}}
		got, err := trimConsumerPod(pod)
		if err != nil {
			t.Fatal(err)
		}
		owners := got.(*corev1.Pod).OwnerReferences
		if len(owners) != c.want || (c.want == 1 && owners[0].UID != shadow.UID) {
			t.Errorf("%s: cached with owners %+v, want %d (the ShadowPod)", c.name, owners, c.want)
		}
	}
}
