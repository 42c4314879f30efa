// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package peering_test checks authentication and the peering protocol
// against three real clusters: the manual path with a token, the LAN path
// with trust on first use, the security of every identity issued, the
// webhook's policy, drift repair, and teardown (also with the provider's
// API server stopped).
package peering_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

var suite *framework.Suite

// reconcilePeriod is the suite's peering reconcile period: drift must be
// repaired within it.
const reconcilePeriod = 3 * time.Second

// exchangeTTL is how long a token exchange may wait for its PeeringRequest.
const exchangeTTL = 5 * time.Second

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, framework.Options{
		Clusters: 3,
		// Unfinished token exchanges are swept quickly, so that a test can
		// watch it happen.
		ControllerManagerArgs: []string{"--peering-exchange-ttl=" + exchangeTTL.String()},
		ClusterConfig: func(_ string, spec *configv1alpha1.ClusterConfigSpec) {
			// The manual path first: nothing is discovered until the LAN
			// test turns discovery on.
			spec.DiscoveryConfig.EnableDiscovery = ptr.To(false)
			spec.DiscoveryConfig.EnableAdvertisement = ptr.To(false)
			spec.DiscoveryConfig.QueryIntervalSeconds = 1
			spec.DiscoveryConfig.HealthCheckIntervalSeconds = 2
			spec.PeeringConfig.ReconcilePeriodSeconds = int32(reconcilePeriod / time.Second)
		},
	}, &suite))
}

func members() (a, b, c *playground.Member) {
	return suite.Members[0], suite.Members[1], suite.Members[2]
}

// peer adds provider to consumer with a token, waits until the consumer's
// ForeignCluster shows the PeeringRequest accepted, and registers the
// unpeering (checked complete on both sides) as cleanup.
func peer(t *testing.T, consumer, provider *playground.Member) {
	t.Helper()
	framework.AddWithToken(t, consumer, provider)
	// A provider whose API server a test before restarted (in any order)
	// has its controller manager's watches backing off for up to a
	// minute: in a CI run, its PeeringRequest was not accepted 30 s on.
	waitCondition(t, consumer, provider.ClusterID, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionTrue, discoveryv1alpha1.ReasonAccepted, 90*time.Second)
	t.Cleanup(func() { unpeer(t, consumer, provider) })
}

// unpeer sets join=false, waits for the teardown on both sides, and
// deletes the consumer's ForeignCluster.
func unpeer(t *testing.T, consumer, provider *playground.Member) {
	t.Helper()
	ctx := context.Background()
	c := framework.Client(t, consumer)
	fc, err := foreigncluster.Find(ctx, c, provider.ClusterID)
	if err != nil || fc == nil {
		return
	}
	patch := client.MergeFrom(fc.DeepCopy())
	fc.Spec.Join = false
	if err := c.Patch(ctx, fc, patch); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("unpeering: %v", err)
		return
	}
	waitNoPeeringObjects(t, consumer, provider, 60*time.Second)
	_ = c.Delete(ctx, fc)
	framework.Eventually(t, 30*time.Second, func() error {
		if fc, err := foreigncluster.Find(ctx, c, provider.ClusterID); err != nil || fc != nil {
			return fmt.Errorf("ForeignCluster for %s still there (%w)", provider.Name, err)
		}
		return nil
	})
}

func getFC(t *testing.T, m *playground.Member, clusterID string) *discoveryv1alpha1.ForeignCluster {
	t.Helper()
	fc, err := foreigncluster.Find(context.Background(), framework.Client(t, m), clusterID)
	if err != nil {
		t.Fatal(err)
	}
	return fc
}

// waitCondition waits until m's ForeignCluster for clusterID has the
// condition with status and reason.
func waitCondition(t *testing.T, m *playground.Member, clusterID, condType string, status metav1.ConditionStatus, reason string, timeout time.Duration) *discoveryv1alpha1.ForeignCluster {
	t.Helper()
	var fc *discoveryv1alpha1.ForeignCluster
	framework.Eventually(t, timeout, func() error {
		fc = getFC(t, m, clusterID)
		if fc == nil {
			return fmt.Errorf("%s has no ForeignCluster for %s", m.Name, clusterID)
		}
		c := meta.FindStatusCondition(fc.Status.Conditions, condType)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("%s: ForeignCluster %s condition %s = %+v, want %s/%s; all conditions: %+v", m.Name, fc.Name, condType, c, status, reason, fc.Status.Conditions)
		}
		return nil
	})
	return fc
}

// peeringObjects lists what a peering between consumer and provider
// leaves: on each side, everything labelled with the other's ClusterID
// that the peering creates.
func peeringObjects(t *testing.T, consumer, provider *playground.Member) []string {
	t.Helper()
	ctx := context.Background()
	var left []string
	check := func(m *playground.Member, peerID string) {
		c := framework.Client(t, m)
		sel := client.MatchingLabels{discoveryv1alpha1.ClusterIDLabel: peerID, discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue}
		lists := map[string]client.ObjectList{
			"Namespace": &corev1.NamespaceList{}, "Secret": &corev1.SecretList{}, "ClusterRole": &rbacv1.ClusterRoleList{},
			"ClusterRoleBinding": &rbacv1.ClusterRoleBindingList{}, "Role": &rbacv1.RoleList{}, "RoleBinding": &rbacv1.RoleBindingList{},
		}
		for kind, list := range lists {
			if err := c.List(ctx, list, sel); err != nil {
				t.Fatal(err)
			}
			items, _ := meta.ExtractList(list)
			for _, it := range items {
				o := it.(client.Object)
				left = append(left, fmt.Sprintf("%s: %s %s/%s", m.Name, kind, o.GetNamespace(), o.GetName()))
			}
		}
		var ns corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: discoveryv1alpha1.TenantNamespace(peerID)}, &ns); err == nil {
			left = append(left, fmt.Sprintf("%s: Namespace %s (%s)", m.Name, ns.Name, ns.Status.Phase))
		}
		var pr discoveryv1alpha1.PeeringRequest
		if err := c.Get(ctx, client.ObjectKey{Name: peerID}, &pr); err == nil {
			left = append(left, fmt.Sprintf("%s: PeeringRequest %s", m.Name, pr.Name))
		}
		if fc := getFC(t, m, peerID); fc != nil && (fc.Status.IncomingPeering || len(fc.Finalizers) > 0 ||
			fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] == string(discoveryv1alpha1.IncomingPeeringDiscovery)) {
			left = append(left, fmt.Sprintf("%s: ForeignCluster %s (incoming=%v finalizers=%v type=%s)", m.Name, fc.Name,
				fc.Status.IncomingPeering, fc.Finalizers, fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel]))
		}
	}
	check(consumer, provider.ClusterID)
	check(provider, consumer.ClusterID)
	return left
}

func waitNoPeeringObjects(t *testing.T, consumer, provider *playground.Member, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, func() error {
		if left := peeringObjects(t, consumer, provider); len(left) > 0 {
			return fmt.Errorf("left after unpeering: %v", left)
		}
		return nil
	})
}
