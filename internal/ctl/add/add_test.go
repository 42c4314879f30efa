// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package add

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/liqo-go/liqo/api"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
)

// A controller writing the ForeignCluster's status between liqoctl's read
// and its patch makes clearAuthenticated read again, not fail (project CI
// saw "the object has been modified" from liqoctl add).
func TestClearAuthenticatedRetriesOnConflict(t *testing.T) {
	const id = "c1"
	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: id, Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: id}},
		Status: discoveryv1alpha1.ForeignClusterStatus{Conditions: []metav1.Condition{
			{Type: discoveryv1alpha1.ConditionAuthenticated, Status: metav1.ConditionFalse, Reason: "Old", LastTransitionTime: metav1.Now()},
		}},
	}
	raced := 0
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(fc).WithStatusSubresource(fc).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if raced == 0 {
					// The peering controller writes another condition first.
					raced++
					var cur discoveryv1alpha1.ForeignCluster
					if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), &cur); err != nil {
						return err
					}
					meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: "Other", Status: metav1.ConditionTrue, Reason: "Controller"})
					if err := cl.Status().Update(ctx, &cur); err != nil {
						return err
					}
				}
				return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()

	if err := clearAuthenticated(context.Background(), c, id); err != nil {
		t.Fatalf("clearAuthenticated: %v", err)
	}
	if raced != 1 {
		t.Fatalf("the race was not staged (%d)", raced)
	}
	var got discoveryv1alpha1.ForeignCluster
	if err := c.Get(context.Background(), client.ObjectKey{Name: id}, &got); err != nil {
		t.Fatal(err)
	}
	if meta.FindStatusCondition(got.Status.Conditions, discoveryv1alpha1.ConditionAuthenticated) != nil {
		t.Errorf("Authenticated is still there: %+v", got.Status.Conditions)
	}
	if meta.FindStatusCondition(got.Status.Conditions, "Other") == nil {
		t.Errorf("the controller's condition was lost: %+v", got.Status.Conditions)
	}
}
