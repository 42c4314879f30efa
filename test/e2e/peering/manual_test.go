// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestManualPeering: A runs the command B's generate-add-command printed;
// A's ForeignCluster for B reaches PeeringRequested (the webhook admitted
// the request and B accepted it), and A's metrics time both steps; B,
// which never heard of A before, shows an incoming peering from A on a
// ForeignCluster it created for it.
func TestManualPeering(t *testing.T) {
	a, b, _ := members()
	framework.LogOnFailure(t, a, b)
	if fc := getFC(t, b, a.ClusterID); fc != nil {
		t.Fatalf("%s already knows %s before the peering", b.Name, a.Name)
	}
	peer(t, a, b)

	fc := getFC(t, a, b.ClusterID)
	if c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionAuthenticated); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Authenticated condition %+v, want True", c)
	}
	var pr discoveryv1alpha1.PeeringRequest
	if err := framework.Client(t, b).Get(t.Context(), client.ObjectKey{Name: a.ClusterID}, &pr); err != nil {
		t.Fatalf("no PeeringRequest of %s in %s: %v", a.Name, b.Name, err)
	}
	if !meta.IsStatusConditionTrue(pr.Status.Conditions, discoveryv1alpha1.PeeringRequestAccepted) ||
		pr.Status.TenantNamespace != discoveryv1alpha1.TenantNamespace(a.ClusterID) || pr.Status.VirtualKubeletCertificate == "" {
		t.Fatalf("PeeringRequest status %+v: want Accepted, tenant namespace and the virtual kubelet's certificate", pr.Status)
	}
	for _, phase := range []string{"requested", "accepted"} {
		if n := framework.Metric(t, a, "liqo_peering_duration_seconds", map[string]string{"phase": phase}); n < 1 {
			t.Errorf("%s timed %v peerings to %s, want at least this one", a.Name, n, phase)
		}
	}
	framework.Eventually(t, 10*time.Second, func() error {
		in := getFC(t, b, a.ClusterID)
		if in == nil || !in.Status.IncomingPeering || in.Labels[discoveryv1alpha1.DiscoveryTypeLabel] != string(discoveryv1alpha1.IncomingPeeringDiscovery) {
			return errorf("%s's ForeignCluster for %s: %+v; want an IncomingPeering one with incomingPeering=true", b.Name, a.Name, in)
		}
		return nil
	})
}
