// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/liqo-go/liqo/api"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
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

// TestEnsureQuotaStaleCache: a LimitRange made by the previous reconcile
// but not yet in the cache makes the create fail with AlreadyExists. That
// failure is shown and retried (errRetry), not left for the next resync;
// once the cache has it the namespace goes on to wait for the quota
// controller.
func TestEnsureQuotaStaleCache(t *testing.T) {
	ctx := t.Context()
	stale := true
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.LimitRange); ok && stale {
				return apierrors.NewNotFound(corev1.Resource("limitranges"), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).WithObjects(&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: DefaultsLimitRangeName}}).Build()
	r := &NamespaceMapReconciler{Client: c, Direct: c}
	offer := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}

	st, err := r.ensureQuota(ctx, "consumer", "demo", offer)
	if !errors.Is(err, errRetry) {
		t.Fatalf("stale cache: error %v, want errRetry", err)
	}
	if st.Phase != offloadingv1alpha1.RemoteNamespaceFailed || !strings.Contains(st.Message, "already exists") {
		t.Fatalf("stale cache: status %+v, want Failed naming the conflict", st)
	}

	stale = false
	st, err = r.ensureQuota(ctx, "consumer", "demo", offer)
	if err != nil {
		t.Fatalf("fresh cache: %v", err)
	}
	if st.Phase != offloadingv1alpha1.RemoteNamespacePending {
		t.Fatalf("fresh cache: status %+v, want Pending until the quota controller counts the namespace", st)
	}
	var lr corev1.LimitRange
	if err := c.Get(ctx, client.ObjectKey{Namespace: "demo", Name: DefaultsLimitRangeName}, &lr); err != nil {
		t.Fatal(err)
	}
	if len(lr.Spec.Limits) != 1 || lr.Spec.Limits[0].Type != corev1.LimitTypeContainer {
		t.Fatalf("LimitRange not repaired: %+v", lr.Spec)
	}
}
