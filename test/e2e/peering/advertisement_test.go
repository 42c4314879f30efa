// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// allocatable sums the allocatable resource of m's nodes.
func allocatable(t *testing.T, m *playground.Member, name corev1.ResourceName) resource.Quantity {
	t.Helper()
	var nodes corev1.NodeList
	if err := framework.Client(t, m).List(context.Background(), &nodes); err != nil {
		t.Fatal(err)
	}
	var sum resource.Quantity
	for _, n := range nodes.Items {
		q := n.Status.Allocatable[name]
		sum.Add(q)
	}
	return sum
}

// TestAdvertisement: once A peers with B, B offers A its share of B's
// free resources in an Advertisement in A's tenant namespace for B; A
// accepts it by policy; a new share percentage changes the offer within
// seconds; a cap on A refuses it, saying why; unpeering withdraws it.
func TestAdvertisement(t *testing.T) {
	a, b, _ := members()
	framework.LogOnFailure(t, a, b)
	peer(t, a, b)
	ctx := t.Context()
	inA := framework.Client(t, a)
	key := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(b.ClusterID), Name: sharingv1alpha1.AdvertisementName(b.ClusterID)}
	cpu := allocatable(t, b, corev1.ResourceCPU)
	if cpu.IsZero() {
		t.Fatalf("%s has no allocatable CPU: the test would prove nothing", b.Name)
	}
	// B runs no pods: its offer is exactly the share of its allocatable.
	offerOf := func(pct int64) resource.Quantity {
		return *resource.NewMilliQuantity(cpu.MilliValue()*pct/100, resource.DecimalSI)
	}
	waitOffer := func(pct int64, phase sharingv1alpha1.AdvertisementPhase, reason string) {
		t.Helper()
		want := offerOf(pct)
		framework.Eventually(t, 15*time.Second, func() error {
			var adv sharingv1alpha1.Advertisement
			if err := inA.Get(ctx, key, &adv); err != nil {
				return err
			}
			got := adv.Spec.Resources[corev1.ResourceCPU]
			if got.Cmp(want) != 0 || adv.Status.Phase != phase || adv.Status.Reason != reason {
				return errorf("Advertisement cpu %s phase %s/%s (%s), want cpu %s phase %s/%s", got.String(), adv.Status.Phase, adv.Status.Reason, adv.Status.Message, want.String(), phase, reason)
			}
			// One node: the largest pod is the whole offer.
			if len(adv.Spec.LargestPods) != 1 || adv.Spec.LargestPods[0].Cpu().Cmp(want) != 0 {
				return errorf("Advertisement largest pods %v, want one of cpu %s (B's one node, within the offer)", adv.Spec.LargestPods, want.String())
			}
			if adv.Spec.ClusterIdentity.ClusterID != b.ClusterID || !adv.Spec.TimeToLive.After(adv.Spec.Timestamp.Time) {
				return errorf("Advertisement spec %+v: want B's identity and a time-to-live", adv.Spec)
			}
			return nil
		})
	}
	waitOffer(50, sharingv1alpha1.AdvertisementAccepted, sharingv1alpha1.ReasonAccepted)
	waitCondition(t, a, b.ClusterID, discoveryv1alpha1.ConditionAdvertisementAccepted, metav1.ConditionTrue, sharingv1alpha1.ReasonAccepted, 5*time.Second)

	// The Advertisement names no Secret (the consumer would not read it);
	// the virtual kubelet's identity the consumer stored works in B's
	// tenant namespace for A.
	var adv sharingv1alpha1.Advertisement
	if err := inA.Get(ctx, key, &adv); err != nil {
		t.Fatal(err)
	}
	if ref := adv.Spec.KubeconfigSecretRef; ref != nil { //nolint:staticcheck // checking that the deprecated field stays empty
		t.Fatalf("the Advertisement names Secret %s/%s, want none", ref.Namespace, ref.Name)
	}
	framework.Eventually(t, 10*time.Second, func() error {
		var secret corev1.Secret
		if err := inA.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: identity.RemoteSecretName(b.ClusterID)}, &secret); err != nil {
			return err
		}
		creds, err := identity.VirtualKubeletCredentials(&secret)
		if err != nil {
			return err
		}
		framework.Allowed(t, "the virtual kubelet lists NamespaceMaps in its tenant namespace",
			framework.ClientFor(t, creds.RESTConfig()).List(ctx, &offloadingv1alpha1.NamespaceMapList{}, client.InNamespace(discoveryv1alpha1.TenantNamespace(a.ClusterID))))
		return nil
	})

	framework.SetClusterConfig(t, b, func(s *configv1alpha1.ClusterConfigSpec) { s.SharingConfig.SharePercentage = 20 })
	t.Cleanup(func() {
		framework.SetClusterConfig(t, b, func(s *configv1alpha1.ClusterConfigSpec) { s.SharingConfig.SharePercentage = 50 })
	})
	start := time.Now()
	waitOffer(20, sharingv1alpha1.AdvertisementAccepted, sharingv1alpha1.ReasonAccepted)
	t.Logf("a new share percentage reached the consumer in %s", time.Since(start).Round(time.Millisecond))

	// The provider's price reaches its offer.
	framework.SetClusterConfig(t, b, func(s *configv1alpha1.ClusterConfigSpec) {
		s.SharingConfig.Price = &configv1alpha1.Price{Currency: "EUR", Period: "Month", PerUnit: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("12.5")}}
	})
	t.Cleanup(func() {
		framework.SetClusterConfig(t, b, func(s *configv1alpha1.ClusterConfigSpec) { s.SharingConfig.Price = nil })
	})
	framework.Eventually(t, 20*time.Second, func() error {
		var adv sharingv1alpha1.Advertisement
		if err := inA.Get(ctx, key, &adv); err != nil {
			return err
		}
		if p := adv.Spec.Prices[corev1.ResourceCPU]; p.String() != "12500m" || adv.Spec.Currency != "EUR" || adv.Spec.PricePeriod != "Month" {
			return fmt.Errorf("offer priced %v %q per %q, want cpu 12.5 EUR per Month", adv.Spec.Prices, adv.Spec.Currency, adv.Spec.PricePeriod)
		}
		return nil
	})

	limit := offerOf(10)
	framework.SetClusterConfig(t, a, func(s *configv1alpha1.ClusterConfigSpec) {
		s.SharingConfig.MaxAcceptedResources = corev1.ResourceList{corev1.ResourceCPU: limit}
	})
	t.Cleanup(func() {
		framework.SetClusterConfig(t, a, func(s *configv1alpha1.ClusterConfigSpec) { s.SharingConfig.MaxAcceptedResources = nil })
	})
	waitOffer(20, sharingv1alpha1.AdvertisementRefused, sharingv1alpha1.ReasonOverCap)
	waitCondition(t, a, b.ClusterID, discoveryv1alpha1.ConditionAdvertisementAccepted, metav1.ConditionFalse, sharingv1alpha1.ReasonOverCap, 5*time.Second)

	unpeer(t, a, b)
	if err := inA.Get(ctx, key, &sharingv1alpha1.Advertisement{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Advertisement outlived the peering (%v)", err)
	}
}
