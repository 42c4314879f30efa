// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering_test

import (
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/peering"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestDriftRepair: what a peering needs, deleted by hand on either side,
// is back within one reconcile period (plus the time to do the work).
func TestDriftRepair(t *testing.T) {
	a, b, _ := members()
	framework.LogOnFailure(t, a, b)
	peer(t, a, b)
	ctx := t.Context()
	inA, inB := framework.Client(t, a), framework.Client(t, b)
	within := reconcilePeriod + 5*time.Second

	t.Run("PeeringRequest deleted in the provider", func(t *testing.T) {
		var pr discoveryv1alpha1.PeeringRequest
		if err := inB.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &pr); err != nil {
			t.Fatal(err)
		}
		oldUID := pr.UID
		if err := inB.Delete(ctx, &pr); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, within, func() error {
			var again discoveryv1alpha1.PeeringRequest
			if err := inB.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &again); err != nil {
				return err
			}
			if again.UID == oldUID || !meta.IsStatusConditionTrue(again.Status.Conditions, discoveryv1alpha1.PeeringRequestAccepted) {
				return errorf("PeeringRequest not recreated and accepted yet (uid %s, conditions %+v)", again.UID, again.Status.Conditions)
			}
			return nil
		})
	})

	for _, tc := range []struct {
		name   string
		c      client.Client
		ns     string
		role   string
		member string
	}{
		{"virtual kubelet Role in the provider's tenant namespace", inB, discoveryv1alpha1.TenantNamespace(a.ClusterID), peering.VirtualKubeletRole, b.Name},
		{"provider Role in the consumer's tenant namespace", inA, discoveryv1alpha1.TenantNamespace(b.ClusterID), peering.ProviderRole, a.Name},
	} {
		t.Run(tc.name, func(t *testing.T) {
			role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: tc.role}}
			if err := tc.c.Get(ctx, client.ObjectKeyFromObject(role), role); err != nil {
				t.Fatalf("%s: %v", tc.member, err)
			}
			oldUID := role.UID
			if err := tc.c.Delete(ctx, role); err != nil {
				t.Fatal(err)
			}
			framework.Eventually(t, within, func() error {
				var again rbacv1.Role
				if err := tc.c.Get(ctx, client.ObjectKeyFromObject(role), &again); err != nil {
					return err
				}
				if again.UID == oldUID || len(again.Rules) == 0 {
					return errorf("Role %s/%s not recreated yet", tc.ns, tc.role)
				}
				return nil
			})
		})
	}
	waitCondition(t, a, b.ClusterID, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionTrue, discoveryv1alpha1.ReasonAccepted, within)
}
