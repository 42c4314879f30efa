// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestQuotaOf: the quota holds the offered pods, CPU and memory as
// requests, and zero for what was not offered (or offered below zero),
// never nothing: a quota without a resource would not bound it.
func TestQuotaOf(t *testing.T) {
	q := resource.MustParse
	got := QuotaOf(corev1.ResourceList{
		corev1.ResourcePods: q("110"), corev1.ResourceCPU: q("3500m"), corev1.ResourceEphemeralStorage: q("10Gi"),
		corev1.ResourceMemory: q("-1Gi"),
	})
	want := corev1.ResourceList{corev1.ResourcePods: q("110"), corev1.ResourceRequestsCPU: q("3500m"), corev1.ResourceRequestsMemory: q("0")}
	if len(got) != len(want) {
		t.Fatalf("QuotaOf = %v, want %v", got, want)
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g.Cmp(w) != 0 {
			t.Fatalf("QuotaOf[%s] = %v, want %v (all: %v)", name, g.String(), w.String(), got)
		}
	}
	for _, v := range QuotaOf(nil) {
		if !v.IsZero() {
			t.Fatalf("QuotaOf(nil) = %v, want all zero", QuotaOf(nil))
		}
	}
	if len(QuotaOf(nil)) != 3 {
		t.Fatalf("QuotaOf(nil) = %v, want the three resources at zero", QuotaOf(nil))
	}
}
