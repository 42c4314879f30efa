// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering_test

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	virtualnode "github.com/liqo-go/liqo/internal/virtualkubelet/node"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestVirtualNode: an accepted Advertisement becomes one Ready virtual node
// with the advertised capacity, labelled and tainted, with a Lease renewed
// as a kubelet does; a new share percentage changes its capacity within
// seconds; the provider's API server stopped makes it NotReady; unpeering
// removes it.
func TestVirtualNode(t *testing.T) {
	a, _, c := members()
	framework.LogOnFailure(t, a, c)
	peer(t, a, c)
	inA := framework.Client(t, a)
	ctx := t.Context()
	advKey := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(c.ClusterID), Name: sharingv1alpha1.AdvertisementName(c.ClusterID)}
	sameAsOffer := func() (*corev1.Node, error) {
		n, err := framework.VirtualNode(inA, c.ClusterID)
		if err != nil {
			return nil, err
		}
		var adv sharingv1alpha1.Advertisement
		if err := inA.Get(ctx, advKey, &adv); err != nil {
			return nil, err
		}
		offer, got := adv.Spec.Resources[corev1.ResourceCPU], n.Status.Allocatable[corev1.ResourceCPU]
		if got.Cmp(offer) != 0 || virtualnode.Ready(n) != corev1.ConditionTrue {
			return nil, errorf("node %s: cpu %s ready %s; want the offer's cpu %s and Ready", n.Name, got.String(), virtualnode.Ready(n), offer.String())
		}
		return n, nil
	}
	var node *corev1.Node
	framework.Eventually(t, 20*time.Second, func() (err error) { node, err = sameAsOffer(); return err })
	if node.Labels[offloadingv1alpha1.VirtualNodeLabel] != offloadingv1alpha1.VirtualNodeValue || len(node.Spec.Taints) == 0 || node.Spec.Taints[0].Key != offloadingv1alpha1.VirtualNodeTaint {
		t.Fatalf("node %s labels %v taints %v: want offloading.liqo.io/type=virtual-node and the Liqo taint", node.Name, node.Labels, node.Spec.Taints)
	}
	waitCondition(t, a, c.ClusterID, discoveryv1alpha1.ConditionVirtualNodeReady, metav1.ConditionTrue, "NodeReady", 15*time.Second)
	var lease coordinationv1.Lease
	if err := inA.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node.Name}, &lease); err != nil {
		t.Fatalf("no Lease for the virtual node: %v", err)
	}
	first := lease.Spec.RenewTime.Time
	framework.Eventually(t, 20*time.Second, func() error {
		if err := inA.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node.Name}, &lease); err != nil {
			return err
		}
		if !lease.Spec.RenewTime.After(first) {
			return errorf("Lease not renewed since %s", first)
		}
		return nil
	})

	framework.SetClusterConfig(t, c, func(s *configv1alpha1.ClusterConfigSpec) { s.SharingConfig.SharePercentage = 25 })
	t.Cleanup(func() {
		framework.SetClusterConfig(t, c, func(s *configv1alpha1.ClusterConfigSpec) { s.SharingConfig.SharePercentage = 50 })
	})
	before := node.Status.Allocatable[corev1.ResourceCPU]
	start := time.Now()
	framework.Eventually(t, 10*time.Second, func() error {
		n, err := sameAsOffer()
		if err != nil {
			return err
		}
		if q := n.Status.Allocatable[corev1.ResourceCPU]; q.Cmp(before) == 0 {
			return errorf("node cpu still %s", q.String())
		}
		return nil
	})
	t.Logf("the virtual node's capacity followed the provider's share in %s", time.Since(start).Round(time.Millisecond))

	// The provider's API server stopped: NotReady; back: Ready again.
	restart := framework.StopAPIServer(t, c)
	framework.Eventually(t, 30*time.Second, func() error {
		n, err := framework.VirtualNode(inA, c.ClusterID)
		if err != nil {
			return err
		}
		if virtualnode.Ready(n) != corev1.ConditionFalse {
			return errorf("node %s Ready=%s with the provider down", n.Name, virtualnode.Ready(n))
		}
		return nil
	})
	waitCondition(t, a, c.ClusterID, discoveryv1alpha1.ConditionVirtualNodeReady, metav1.ConditionFalse, "ProviderUnreachable", 5*time.Second)
	restart()
	framework.Eventually(t, 90*time.Second, func() error { _, err := sameAsOffer(); return err })

	unpeer(t, a, c)
	if _, err := framework.VirtualNode(inA, c.ClusterID); err == nil {
		t.Fatal("the virtual node outlived the peering")
	}
}
