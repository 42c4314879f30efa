// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering_test

import (
	"context"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/peering"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestTeardown: join=false leaves no peering object for the peer on
// either side, and the ForeignCluster says so.
func TestTeardown(t *testing.T) {
	a, b, _ := members()
	framework.LogOnFailure(t, a, b)
	peer(t, a, b)
	if left := peeringObjects(t, a, b); len(left) == 0 {
		t.Fatal("a live peering shows no objects: the teardown check would prove nothing")
	}
	framework.SetJoin(t, a, b.ClusterID, false)
	waitNoPeeringObjects(t, a, b, 30*time.Second)
	waitCondition(t, a, b.ClusterID, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonUnpeered, 5*time.Second)
}

// TestProviderDisablesIncoming: the provider ends the peering from its
// side; the consumer's ForeignCluster becomes not joined, saying why.
func TestProviderDisablesIncoming(t *testing.T) {
	a, b, _ := members()
	framework.LogOnFailure(t, a, b)
	peer(t, a, b)
	inB := framework.Client(t, b)
	fc := getFC(t, b, a.ClusterID)
	patch := client.MergeFrom(fc.DeepCopy())
	fc.Spec.IncomingPeeringEnabled = discoveryv1alpha1.PeeringEnabledNo
	if err := inB.Patch(t.Context(), fc, patch); err != nil {
		t.Fatal(err)
	}
	framework.DeleteOnCleanup(t, inB, fc)
	waitCondition(t, a, b.ClusterID, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonRefusedByProvider, 2*reconcilePeriod+10*time.Second)
	framework.Eventually(t, 5*time.Second, func() error {
		if getFC(t, a, b.ClusterID).Spec.Join {
			return errorf("the consumer's ForeignCluster is still joined after the provider refused it")
		}
		return nil
	})
	framework.Eventually(t, 30*time.Second, func() error {
		if left := peeringObjects(t, a, b); len(left) > 0 {
			// the provider keeps its ForeignCluster (it carries the "No")
			for _, l := range left {
				if l != b.Name+": ForeignCluster "+a.ClusterID+" (incoming=false finalizers=[] type=IncomingPeering)" {
					return errorf("left: %v", left)
				}
			}
		}
		return nil
	})
	if err := inB.Delete(t.Context(), fc); err != nil {
		t.Fatal(err)
	}
}

// TestUnpeerWithProviderDown: with the provider's API server stopped, the
// local side of the teardown completes within 60 s and the condition says
// it was forced.
func TestUnpeerWithProviderDown(t *testing.T) {
	a, _, c := members()
	framework.LogOnFailure(t, a, c)
	peer(t, a, c)
	restart := framework.StopAPIServer(t, c)

	start := time.Now()
	framework.SetJoin(t, a, c.ClusterID, false)
	framework.Eventually(t, 60*time.Second, func() error {
		fc := getFC(t, a, c.ClusterID)
		if len(fc.Finalizers) > 0 {
			return errorf("finalizers %v still there", fc.Finalizers)
		}
		return nil
	})
	took := time.Since(start)
	waitCondition(t, a, c.ClusterID, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonForceUnpeered, time.Second)
	t.Logf("local teardown with the provider down took %s", took.Round(time.Millisecond))
	if took > 60*time.Second {
		t.Fatalf("local teardown took %s, want under 60 s", took)
	}

	// Back up, the provider still holds the stale request; its operator
	// removes it, which revokes what it issued.
	restart()
	inC := framework.Client(t, c)
	if err := inC.Delete(t.Context(), prFor(a.ClusterID)); err != nil {
		t.Fatalf("deleting the stale PeeringRequest in the provider: %v", err)
	}
	// kube-controller-manager reconnects with a back-off before its
	// namespace controller finishes the tenant namespace.
	waitNoPeeringObjects(t, a, c, 150*time.Second)
}

// TestTwoWayUnpeerOneDirection: A and B peer both ways and share one tenant
// namespace per side; unpeering A from B leaves B's peering with A whole.
func TestTwoWayUnpeerOneDirection(t *testing.T) {
	a, b, _ := members()
	framework.LogOnFailure(t, a, b)
	peer(t, a, b)
	peer(t, b, a)
	framework.SetJoin(t, a, b.ClusterID, false)
	waitCondition(t, a, b.ClusterID, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonUnpeered, 30*time.Second)

	roleIn := func(m *playground.Member, peerID, role string) bool {
		err := framework.Client(t, m).Get(context.Background(), client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(peerID), Name: role}, &rbacv1.Role{})
		return err == nil
	}
	framework.Eventually(t, 15*time.Second, func() error {
		switch {
		case roleIn(a, b.ClusterID, peering.ProviderRole):
			return errorf("%s still grants %s the provider Role", a.Name, b.Name)
		case roleIn(b, a.ClusterID, peering.VirtualKubeletRole):
			return errorf("%s still grants %s the virtual kubelet Role", b.Name, a.Name)
		}
		return nil
	})
	// The other direction is untouched, for longer than a reconcile period.
	framework.Consistently(t, 2*reconcilePeriod, func() error {
		if !roleIn(a, b.ClusterID, peering.VirtualKubeletRole) || !roleIn(b, a.ClusterID, peering.ProviderRole) {
			return errorf("unpeering %s from %s removed the Roles of %s's peering with %s", a.Name, b.Name, b.Name, a.Name)
		}
		waitCondition(t, b, a.ClusterID, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionTrue, discoveryv1alpha1.ReasonAccepted, time.Second)
		return nil
	})
}
