// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package sharing

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestOperatorDecidesOffers runs the Advertisement operator alone against
// a real API server: a joined provider's offer is accepted and the
// ForeignCluster says so; a ClusterConfig change (a cap the offer exceeds)
// decides every offer again; a peering a broker introduced (network only)
// gets no offer accepted; an offer left to expire is deleted.
func TestOperatorDecidesOffers(t *testing.T) {
	cfg, c := envtest.StartInstalled(t, "consumer")
	ctx := t.Context()
	var config atomic.Pointer[configv1alpha1.ClusterConfig]
	config.Store(&configv1alpha1.ClusterConfig{})
	changes := make(chan struct{}, 1)
	envtest.StartManager(t, cfg, func(mgr ctrl.Manager) error {
		return (&Operator{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Changes: changes,
			Config: config.Load,
		}).SetupWithManager(mgr)
	})

	const provider = "provider-1"
	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: provider, Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: provider}},
		Spec:       discoveryv1alpha1.ForeignClusterSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: provider, ClusterName: provider}},
	}
	if err := c.Create(ctx, fc); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{
		Type: discoveryv1alpha1.ConditionPeeringRequested, Status: metav1.ConditionTrue, Reason: discoveryv1alpha1.ReasonAccepted, Message: "accepted",
	})
	if err := c.Status().Update(ctx, fc); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: discoveryv1alpha1.TenantNamespace(provider)}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	adv := &sharingv1alpha1.Advertisement{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: sharingv1alpha1.AdvertisementName(provider)},
		Spec: sharingv1alpha1.AdvertisementSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: provider, ClusterName: provider},
			Resources:       corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Timestamp:       metav1.Now(), TimeToLive: metav1.NewTime(time.Now().Add(time.Hour)),
		},
	}
	if err := c.Create(ctx, adv); err != nil {
		t.Fatal(err)
	}
	decided := func(phase sharingv1alpha1.AdvertisementPhase, reason string, fcStatus metav1.ConditionStatus) {
		t.Helper()
		envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(adv), adv); err != nil {
				return err
			}
			if adv.Status.Phase != phase || adv.Status.Reason != reason {
				return fmt.Errorf("offer %s (%s: %s), want %s (%s)", adv.Status.Phase, adv.Status.Reason, adv.Status.Message, phase, reason)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionAdvertisementAccepted)
			if cond == nil || cond.Status != fcStatus {
				return fmt.Errorf("ForeignCluster's AdvertisementAccepted %+v, want %s", cond, fcStatus)
			}
			return nil
		})
	}
	decided(sharingv1alpha1.AdvertisementAccepted, sharingv1alpha1.ReasonAccepted, metav1.ConditionTrue)

	config.Store(&configv1alpha1.ClusterConfig{Spec: configv1alpha1.ClusterConfigSpec{SharingConfig: configv1alpha1.SharingConfig{
		MaxAcceptedResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
	}}})
	changes <- struct{}{}
	decided(sharingv1alpha1.AdvertisementRefused, sharingv1alpha1.ReasonOverCap, metav1.ConditionFalse)

	// A peering a broker introduced is for the network only: its offer
	// is refused, whatever the cap; without the mark, it is used.
	mark := func(introducer string) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(fc.DeepCopy())
		if introducer == "" {
			delete(fc.Labels, discoveryv1alpha1.IntroducedByLabel)
		} else {
			fc.Labels[discoveryv1alpha1.IntroducedByLabel] = introducer
		}
		if err := c.Patch(ctx, fc, patch); err != nil {
			t.Fatal(err)
		}
	}
	// The cap goes first; the mark alone decides again.
	config.Store(&configv1alpha1.ClusterConfig{})
	changes <- struct{}{}
	decided(sharingv1alpha1.AdvertisementAccepted, sharingv1alpha1.ReasonAccepted, metav1.ConditionTrue)
	mark("broker-1")
	decided(sharingv1alpha1.AdvertisementRefused, sharingv1alpha1.ReasonNetworkOnly, metav1.ConditionFalse)
	mark("")
	decided(sharingv1alpha1.AdvertisementAccepted, sharingv1alpha1.ReasonAccepted, metav1.ConditionTrue)

	// The provider stops refreshing its offer: it expires and goes.
	patch := client.MergeFrom(adv.DeepCopy())
	adv.Spec.TimeToLive = metav1.NewTime(time.Now().Add(time.Second))
	if err := c.Patch(ctx, adv, patch); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		err := c.Get(ctx, client.ObjectKeyFromObject(adv), &sharingv1alpha1.Advertisement{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		return errors.New("the expired offer is still there")
	})
}
