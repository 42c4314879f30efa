// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/sharing"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestProviderCannotDisturbOtherProviders: with the kubeconfig it holds
// for the consumer, a provider can neither create an Advertisement named
// for another provider (which would remove that provider's virtual node),
// nor accept its own offer, nor pass itself off as another provider; the
// labels it offers reach its virtual node only where they describe a
// place (a zone), never as a control-plane role, another provider's ID or
// another node's hostname; and pools it offers make virtual nodes the
// consumer names and labels, seventeen of them refused, and pools beyond
// its offer make the consumer refuse it.
func TestProviderCannotDisturbOtherProviders(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	inA := framework.Client(t, a)
	provider := framework.ClientFor(t, framework.ProviderConfig(t, b, a.ClusterID))
	tenant := discoveryv1alpha1.TenantNamespace(b.ClusterID)
	own := client.ObjectKey{Namespace: tenant, Name: sharingv1alpha1.AdvertisementName(b.ClusterID)}

	// update gets B's own Advertisement, changes it and writes it back as
	// B, again on a conflict (B's Broadcaster writes it too).
	update := func(change func(*sharingv1alpha1.Advertisement)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var adv sharingv1alpha1.Advertisement
			if err := provider.Get(ctx, own, &adv); err != nil {
				return err
			}
			change(&adv)
			return provider.Update(ctx, &adv)
		})
	}

	t.Run("an Advertisement named for another provider is refused", func(t *testing.T) {
		cNode, err := framework.VirtualNode(inA, c.ClusterID)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name     string
			identity string
		}{
			{"with the other provider's identity", c.ClusterID},
			{"with its own identity", b.ClusterID},
		} {
			t.Run(tc.name, func(t *testing.T) {
				now := time.Now()
				adv := &sharingv1alpha1.Advertisement{
					ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: sharingv1alpha1.AdvertisementName(c.ClusterID)},
					Spec: sharingv1alpha1.AdvertisementSpec{
						ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: tc.identity},
						Resources: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("10"),
						},
						Timestamp: metav1.NewTime(now), TimeToLive: metav1.NewTime(now.Add(time.Minute)),
					},
				}
				err := provider.Create(ctx, adv)
				if err == nil {
					framework.DeleteOnCleanup(t, inA, adv)
				}
				framework.Refused(t, "creating "+adv.Name+" "+tc.name, err)
			})
		}
		node := waitHeartbeats(t, a, c.ClusterID, 2)
		if node.UID != cNode.UID {
			t.Fatalf("the virtual node of %s was replaced (UID %s, was %s)", c.Name, node.UID, cNode.UID)
		}
		requireReady(t, node)
	})

	t.Run("a provider cannot accept its own offer", func(t *testing.T) {
		var adv sharingv1alpha1.Advertisement
		if err := provider.Get(ctx, own, &adv); err != nil {
			t.Fatal(err)
		}
		adv.Status.Phase = sharingv1alpha1.AdvertisementAccepted
		adv.Status.Reason, adv.Status.Message = sharingv1alpha1.ReasonAccepted, "accepted by the provider itself"
		framework.Denied(t, "updating the status of its Advertisement", provider.Status().Update(ctx, &adv))
		if err := inA.Get(ctx, own, &adv); err != nil {
			t.Fatal(err)
		}
		if adv.Status.Message == "accepted by the provider itself" {
			t.Fatalf("the provider's status stands: %+v", adv.Status)
		}
		// With auto-accept off, the annotation is the consumer's verdict.
		err := update(func(adv *sharingv1alpha1.Advertisement) {
			metav1.SetMetaDataAnnotation(&adv.ObjectMeta, sharingv1alpha1.AcceptAnnotation, "true")
		})
		if err == nil {
			t.Cleanup(func() {
				_ = update(func(adv *sharingv1alpha1.Advertisement) { delete(adv.Annotations, sharingv1alpha1.AcceptAnnotation) })
			})
		}
		framework.Refused(t, "setting the accept annotation on its Advertisement", err)
		// Once the consumer set it, the provider's refreshes carry it along.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var adv sharingv1alpha1.Advertisement
			if err := inA.Get(ctx, own, &adv); err != nil {
				return err
			}
			metav1.SetMetaDataAnnotation(&adv.ObjectMeta, sharingv1alpha1.AcceptAnnotation, "true")
			return inA.Update(ctx, &adv)
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var adv sharingv1alpha1.Advertisement
				if err := inA.Get(context.Background(), own, &adv); err != nil {
					return err
				}
				delete(adv.Annotations, sharingv1alpha1.AcceptAnnotation)
				return inA.Update(context.Background(), &adv)
			})
		})
		framework.Allowed(t, "refreshing its Advertisement with the consumer's annotation on it",
			update(func(adv *sharingv1alpha1.Advertisement) { adv.Spec.Properties = map[string]string{"refreshed": "yes"} }))
	})

	t.Run("a provider cannot pass itself off as another", func(t *testing.T) {
		err := update(func(adv *sharingv1alpha1.Advertisement) { adv.Spec.ClusterIdentity.ClusterID = c.ClusterID })
		if err == nil {
			t.Cleanup(func() {
				if err := update(func(adv *sharingv1alpha1.Advertisement) { adv.Spec.ClusterIdentity.ClusterID = b.ClusterID }); err != nil {
					t.Errorf("restoring the clusterIdentity: %v", err)
				}
			})
		}
		framework.Refused(t, "changing its Advertisement's clusterIdentity to "+c.ClusterID, err)
	})

	t.Run("only the labels that describe a place reach the virtual node", func(t *testing.T) {
		var before sharingv1alpha1.Advertisement
		if err := provider.Get(ctx, own, &before); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := update(func(adv *sharingv1alpha1.Advertisement) { adv.Spec.Labels = before.Spec.Labels }); err != nil {
				t.Errorf("restoring the Advertisement's labels: %v", err)
			}
		})
		const zoneLabel, controlPlaneLabel, hostnameLabel = "topology.kubernetes.io/zone", "node-role.kubernetes.io/control-plane", "kubernetes.io/hostname"
		evil := map[string]string{
			controlPlaneLabel:                     "",
			offloadingv1alpha1.RemoteClusterLabel: c.ClusterID,
			hostnameLabel:                         "evil",
			zoneLabel:                             "zone-b",
		}
		// B's Broadcaster may put its own labels back meanwhile: they are
		// written again until the node shows the zone.
		var node *corev1.Node
		framework.Eventually(t, 30*time.Second, func() error {
			var adv sharingv1alpha1.Advertisement
			if err := provider.Get(ctx, own, &adv); err != nil {
				return err
			}
			if !maps.Equal(adv.Spec.Labels, evil) {
				if err := update(func(adv *sharingv1alpha1.Advertisement) { adv.Spec.Labels = evil }); err != nil {
					t.Fatalf("setting the Advertisement's labels: %v", err)
				}
			}
			n, err := framework.VirtualNode(inA, b.ClusterID)
			if err != nil {
				return err
			}
			if n.Labels[zoneLabel] != "zone-b" {
				return fmt.Errorf("virtual node %s: %s=%q, want zone-b", n.Name, zoneLabel, n.Labels[zoneLabel])
			}
			node = n
			return nil
		})
		if v, ok := node.Labels[controlPlaneLabel]; ok {
			t.Errorf("virtual node %s has %s=%q", node.Name, controlPlaneLabel, v)
		}
		if got := node.Labels[offloadingv1alpha1.RemoteClusterLabel]; got != b.ClusterID {
			t.Errorf("virtual node %s: %s=%q, want %s", node.Name, offloadingv1alpha1.RemoteClusterLabel, got, b.ClusterID)
		}
		if got := node.Labels[hostnameLabel]; got != node.Name {
			t.Errorf("virtual node %s: %s=%q, want its own name", node.Name, hostnameLabel, got)
		}
	})

	t.Run("pools make nodes the consumer names, showing only the labels that describe a place", func(t *testing.T) {
		cNode, err := framework.VirtualNode(inA, c.ClusterID)
		if err != nil {
			t.Fatal(err)
		}
		const zoneLabel, hostnameLabel = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
		res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("10")}
		// More pools than the schema holds are refused.
		many := make([]sharingv1alpha1.AdvertisementPool, sharing.MaxPools+1)
		for i := range many {
			many[i] = sharingv1alpha1.AdvertisementPool{Labels: map[string]string{zoneLabel: fmt.Sprintf("z%d", i)}, Resources: res}
		}
		framework.Refused(t, fmt.Sprintf("an Advertisement of %d pools", len(many)), update(func(adv *sharingv1alpha1.Advertisement) { adv.Spec.Pools = many }))

		// Pools offering more than the offer: the consumer refuses it
		// (else they would get around maxAcceptedResources).
		framework.Eventually(t, 30*time.Second, func() error {
			var adv sharingv1alpha1.Advertisement
			if err := inA.Get(ctx, own, &adv); err != nil {
				return err
			}
			if adv.Status.Reason == sharingv1alpha1.ReasonPoolsOverOffer {
				return nil
			}
			if len(adv.Spec.Pools) != 1 {
				more := adv.Spec.Resources.Cpu().DeepCopy()
				more.Add(resource.MustParse("1"))
				over := sharingv1alpha1.AdvertisementPool{Labels: map[string]string{zoneLabel: "z0"}, Resources: corev1.ResourceList{corev1.ResourceCPU: more}}
				if err := update(func(adv *sharingv1alpha1.Advertisement) { adv.Spec.Pools = []sharingv1alpha1.AdvertisementPool{over} }); err != nil {
					t.Fatalf("setting pools beyond the offer: %v", err)
				}
			}
			return fmt.Errorf("the offer with pools beyond it: %s %s, want refused for %s", adv.Status.Phase, adv.Status.Reason, sharingv1alpha1.ReasonPoolsOverOffer)
		})

		evil := []sharingv1alpha1.AdvertisementPool{
			{Labels: map[string]string{zoneLabel: "z1", offloadingv1alpha1.RemoteClusterLabel: c.ClusterID, hostnameLabel: cNode.Name,
				offloadingv1alpha1.PoolLabel: "x", offloadingv1alpha1.VirtualNodeLabel: "no"}, Resources: res},
			{Labels: map[string]string{zoneLabel: "z2"}, Resources: res},
		}
		t.Cleanup(func() {
			if err := update(func(adv *sharingv1alpha1.Advertisement) { adv.Spec.Pools = nil }); err != nil {
				t.Errorf("removing the Advertisement's pools: %v", err)
			}
			framework.Eventually(t, 30*time.Second, func() error {
				_, err := framework.VirtualNode(inA, b.ClusterID)
				return err
			})
		})
		var nodes corev1.NodeList
		framework.Eventually(t, 30*time.Second, func() error {
			var adv sharingv1alpha1.Advertisement
			if err := provider.Get(ctx, own, &adv); err != nil {
				return err
			}
			if len(adv.Spec.Pools) != len(evil) {
				if err := update(func(adv *sharingv1alpha1.Advertisement) { adv.Spec.Pools = evil }); err != nil {
					t.Fatalf("setting the Advertisement's pools: %v", err)
				}
			}
			if err := inA.List(ctx, &nodes, client.MatchingLabels{offloadingv1alpha1.RemoteClusterLabel: b.ClusterID}); err != nil {
				return err
			}
			zones := map[string]bool{}
			for _, n := range nodes.Items {
				zones[n.Labels[zoneLabel]] = n.DeletionTimestamp == nil
			}
			if len(nodes.Items) != 2 || !zones["z1"] || !zones["z2"] {
				return fmt.Errorf("%d virtual nodes of %s in zones %v, want one in z1 and one in z2", len(nodes.Items), b.Name, zones)
			}
			return nil
		})
		for _, n := range nodes.Items {
			if got := n.Labels[hostnameLabel]; got != n.Name {
				t.Errorf("virtual node %s: %s=%q, want its own name", n.Name, hostnameLabel, got)
			}
			if !offloadingv1alpha1.IsVirtualNode(n.Labels) {
				t.Errorf("virtual node %s is not labelled virtual: %v", n.Name, n.Labels)
			}
			if key := n.Labels[offloadingv1alpha1.PoolLabel]; key == "x" || !strings.HasSuffix(n.Name, "-"+key) {
				t.Errorf("virtual node %s: pool %q, want the consumer's key, which its name ends with", n.Name, key)
			}
			if n.Name == cNode.Name {
				t.Errorf("a pool of %s took the name of %s's node", b.Name, c.Name)
			}
		}
		// The other provider's node stands.
		node := waitHeartbeats(t, a, c.ClusterID, 2)
		if node.UID != cNode.UID {
			t.Fatalf("the virtual node of %s was replaced (UID %s, was %s)", c.Name, node.UID, cNode.UID)
		}
		requireReady(t, node)
	})
}
