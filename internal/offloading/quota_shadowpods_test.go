// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestShadowPodsCountedBeforeTheQuotaController, against a real API
// server: a quota that enforces a count of ShadowPods the quota
// controller has not counted yet (it learns a custom resource late)
// refuses every ShadowPod; counted here, the API server admits them up to
// the count, and not one more.
func TestShadowPodsCountedBeforeTheQuotaController(t *testing.T) {
	_, c := envtest.StartInstalled(t, "provider")
	ctx := t.Context()
	const ns = "web-consumer-1"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	template, err := offloadingv1alpha1.NewShadowPodTemplate(nil, nil, &corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/c:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	shadow := func(name string) *offloadingv1alpha1.ShadowPod {
		return &offloadingv1alpha1.ShadowPod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       offloadingv1alpha1.ShadowPodSpec{Template: template},
		}
	}
	for i := range 2 {
		if err := c.Create(ctx, shadow(fmt.Sprintf("before-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	three := resource.MustParse("3")
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: OfferQuotaName},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{QuotaShadowPods: three}},
	}
	if err := c.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	// As the quota controller writes it before it knows ShadowPods.
	q.Status = corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{QuotaShadowPods: three}, Used: corev1.ResourceList{}}
	if err := c.Status().Update(ctx, q); err != nil {
		t.Fatal(err)
	}
	// The API server's admission reads quotas from a cache: once it has
	// this one, ShadowPods are refused (tried without being made).
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		switch err := c.Create(ctx, shadow("refused"), client.DryRunAll); {
		case err == nil:
			return errors.New("a ShadowPod while the count is unknown was admitted")
		case !strings.Contains(err.Error(), "status unknown"):
			return fmt.Errorf("a ShadowPod while the count is unknown, want refused (status unknown): %w", err)
		}
		return nil
	})

	r := &NamespaceMapReconciler{Client: c, Direct: c}
	if !uncountedShadowPods(q) {
		t.Fatal("the quota is not seen as uncounted")
	}
	if err := r.countShadowPods(ctx, q); err != nil {
		t.Fatal(err)
	}
	if used := q.Status.Used[QuotaShadowPods]; used.Value() != 2 {
		t.Errorf("counted %s ShadowPods, want 2", used.String())
	}
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		if err := c.Create(ctx, shadow("third"), client.DryRunAll); err != nil {
			return fmt.Errorf("the third ShadowPod of 3 (dry run): %w", err)
		}
		return nil
	})
	if err := c.Create(ctx, shadow("third")); err != nil {
		t.Fatalf("the third ShadowPod of 3: %v", err)
	}
	if err := c.Create(ctx, shadow("fourth")); err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("a fourth ShadowPod of 3: %v, want refused for the quota", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
		t.Fatal(err)
	}
	if uncountedShadowPods(q) {
		t.Errorf("the quota's usage %v lost the count", q.Status.Used)
	}
}
