// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/liqo-go/liqo/api"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
)

// TestTeardownKeepsTheOutcomeOfTheDecidingPass: a teardown pass wrote
// its outcome (forced: the provider was unreachable) and removed the
// identity, then failed to remove the finalizer because another writer
// changed the ForeignCluster. The next pass has no identity to judge by;
// it removes the finalizer and keeps the outcome. Before, it rewrote it
// as "no identity was held in the provider".
func TestTeardownKeepsTheOutcomeOfTheDecidingPass(t *testing.T) {
	ctx := context.Background()
	forcedMsg := "cluster-3 was unreachable; the local side was removed without it"
	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "provider", Finalizers: []string{discoveryv1alpha1.PeeringFinalizer}},
		Spec:       discoveryv1alpha1.ForeignClusterSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: "provider"}},
		Status: discoveryv1alpha1.ForeignClusterStatus{Conditions: []metav1.Condition{{
			Type: discoveryv1alpha1.ConditionPeeringRequested, Status: metav1.ConditionFalse, Reason: discoveryv1alpha1.ReasonForceUnpeered,
			Message: forcedMsg, LastTransitionTime: metav1.Now(),
		}}},
	}
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(fc).WithStatusSubresource(fc).Build()
	r := &Outgoing{Client: c, Namespace: "liqo", LocalClusterID: "consumer"}
	if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
		t.Fatal(err)
	}
	if _, err := r.teardown(ctx, fc); err != nil {
		t.Fatal(err)
	}
	var got discoveryv1alpha1.ForeignCluster
	if err := c.Get(ctx, client.ObjectKeyFromObject(fc), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Finalizers) != 0 {
		t.Errorf("finalizers %v left", got.Finalizers)
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
	if cond == nil || cond.Reason != discoveryv1alpha1.ReasonForceUnpeered || cond.Message != forcedMsg {
		t.Errorf("PeeringRequested %+v, want the forced outcome kept", cond)
	}
}
