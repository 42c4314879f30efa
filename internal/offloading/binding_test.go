// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/liqo-go/liqo/api"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/sharing"
)

func requesting(name, cpu, mem string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}},
	}}}}
}

func bindingRequest(t *testing.T, pod, node string) admission.Request {
	t.Helper()
	raw, err := json.Marshal(corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: pod}, Target: corev1.ObjectReference{Kind: "Node", Name: node}})
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: "ns", Name: pod, SubResource: "binding",
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Object: runtime.RawExtension{Raw: raw},
	}}
}

// TestBindingValidator: a pod binds to a virtual node only when one of
// the node's largest pods holds it; real nodes, and virtual nodes that
// say no bound, are left alone.
func TestBindingValidator(t *testing.T) {
	virtual := map[string]string{offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue}
	two := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	bounded := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "liqo-broker", Labels: virtual, Annotations: map[string]string{
		offloadingv1alpha1.LargestPodsAnnotation: sharing.FormatLargestPods([]corev1.ResourceList{two("4", "2Gi"), two("1", "16Gi")}),
	}}}
	unbounded := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "liqo-plain", Labels: virtual}}
	broken := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "liqo-broken", Labels: virtual, Annotations: map[string]string{offloadingv1alpha1.LargestPodsAnnotation: "["}}}
	own := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker", Annotations: bounded.Annotations}}
	small, big, wide := requesting("small", "2", "1Gi"), requesting("big", "8", "1Gi"), requesting("wide", "2", "8Gi")
	cached := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(bounded, unbounded, broken, own, small, big).Build()
	// wide was just created: the cache does not hold it yet.
	live := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(wide).Build()
	v := &BindingValidator{Reader: cached, APIReader: live}
	for _, tc := range []struct {
		pod, node string
		allowed   bool
		message   []string
	}{
		{"small", "liqo-broker", true, nil},
		{"big", "liqo-broker", false, []string{"the pod requests cpu 8, memory 1Gi", "virtual node liqo-broker", "the largest pod it can take is cpu 4, memory 2Gi; or cpu 1, memory 16Gi"}},
		{"wide", "liqo-broker", false, []string{"cpu 2, memory 8Gi"}},
		{"big", "liqo-plain", true, nil},
		{"big", "liqo-broken", true, nil},
		{"big", "worker", true, nil},
		{"big", "gone", true, nil},
	} {
		resp := v.Handle(context.Background(), bindingRequest(t, tc.pod, tc.node))
		if resp.Allowed != tc.allowed {
			t.Errorf("%s to %s: allowed %v (%s), want %v", tc.pod, tc.node, resp.Allowed, resp.Result.Message, tc.allowed)
			continue
		}
		for _, m := range tc.message {
			if !strings.Contains(resp.Result.Message, m) {
				t.Errorf("%s to %s: message %q does not say %q", tc.pod, tc.node, resp.Result.Message, m)
			}
		}
	}
}
