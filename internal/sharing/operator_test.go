// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package sharing

import (
	"context"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/liqo-go/liqo/api"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
)

// TestDecideKeepsAcceptedOfferThroughTransientFailure checks that a
// provider the consumer cannot ask for a moment keeps an accepted offer,
// while an offer not yet accepted, a peering really ended, or an offer over
// the cap is refused.
func TestDecideKeepsAcceptedOfferThroughTransientFailure(t *testing.T) {
	const provider = "provider-id"
	for _, tc := range []struct {
		name   string
		reason string
		phase  sharingv1alpha1.AdvertisementPhase
		cap    corev1.ResourceList
		want   sharingv1alpha1.AdvertisementPhase
	}{
		{"accepted, provider unreachable for a moment", discoveryv1alpha1.ReasonRequestFailed, sharingv1alpha1.AdvertisementAccepted, nil, sharingv1alpha1.AdvertisementAccepted},
		{"not yet judged, provider unreachable", discoveryv1alpha1.ReasonRequestFailed, "", nil, sharingv1alpha1.AdvertisementRefused},
		{"accepted, then unpeered", "Unpeered", sharingv1alpha1.AdvertisementAccepted, nil, sharingv1alpha1.AdvertisementRefused},
		{"accepted, provider unreachable, over the cap now", discoveryv1alpha1.ReasonRequestFailed, sharingv1alpha1.AdvertisementAccepted,
			corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, sharingv1alpha1.AdvertisementRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := &discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: provider, Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: provider}}}
			fc.Status.Conditions = []metav1.Condition{{Type: discoveryv1alpha1.ConditionPeeringRequested, Status: metav1.ConditionFalse, Reason: tc.reason}}
			cfg := &configv1alpha1.ClusterConfig{}
			cfg.Spec.SharingConfig.MaxAcceptedResources = tc.cap
			o := &Operator{
				Client: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(fc).Build(),
				Config: func() *configv1alpha1.ClusterConfig { return cfg },
			}
			adv := &sharingv1alpha1.Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: discoveryv1alpha1.TenantNamespace(provider), Name: sharingv1alpha1.AdvertisementName(provider)}}
			adv.Spec.ClusterIdentity.ClusterID = provider
			adv.Spec.Resources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
			adv.Status.Phase = tc.phase
			if got, reason, msg := o.decide(context.Background(), adv); got != tc.want {
				t.Errorf("decided %s (%s: %s), want %s", got, reason, msg, tc.want)
			}
		})
	}
}

// TestDecideRefusesAnOfferNotTheProviders checks that the namespace, not
// what the provider wrote, says whose offer it is: another provider's name
// or identity in a tenant namespace is refused.
func TestDecideRefusesAnOfferNotTheProviders(t *testing.T) {
	const provider, other = "provider-id", "other-id"
	for _, tc := range []struct {
		name, namespace, advName, clusterID string
		want                                sharingv1alpha1.AdvertisementPhase
	}{
		{"its own", discoveryv1alpha1.TenantNamespace(provider), sharingv1alpha1.AdvertisementName(provider), provider, sharingv1alpha1.AdvertisementAccepted},
		{"another provider's name", discoveryv1alpha1.TenantNamespace(provider), sharingv1alpha1.AdvertisementName(other), other, sharingv1alpha1.AdvertisementRefused},
		{"another provider's identity", discoveryv1alpha1.TenantNamespace(provider), sharingv1alpha1.AdvertisementName(provider), other, sharingv1alpha1.AdvertisementRefused},
		{"not a tenant namespace", "default", sharingv1alpha1.AdvertisementName(provider), provider, sharingv1alpha1.AdvertisementRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fcs []client.Object
			for _, id := range []string{provider, other} {
				fc := &discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: id, Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: id}}}
				fc.Status.Conditions = []metav1.Condition{{Type: discoveryv1alpha1.ConditionPeeringRequested, Status: metav1.ConditionTrue, Reason: "Accepted"}}
				fcs = append(fcs, fc)
			}
			o := &Operator{
				Client: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(fcs...).Build(),
				Config: func() *configv1alpha1.ClusterConfig { return &configv1alpha1.ClusterConfig{} },
			}
			adv := &sharingv1alpha1.Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: tc.namespace, Name: tc.advName}}
			adv.Spec.ClusterIdentity.ClusterID = tc.clusterID
			if got, reason, msg := o.decide(context.Background(), adv); got != tc.want {
				t.Errorf("decided %s (%s: %s), want %s", got, reason, msg, tc.want)
			}
		})
	}
}

func TestAllowedNodeLabels(t *testing.T) {
	got := AllowedNodeLabels(map[string]string{
		"topology.kubernetes.io/zone":           "zone-b",
		"kubernetes.io/arch":                    "arm64",
		"node-role.kubernetes.io/control-plane": "",
		offloadingv1alpha1.RemoteClusterLabel:   "someone-else",
		"kubernetes.io/hostname":                "evil",
		"topology.kubernetes.io/region":         "no value may have spaces",
	})
	want := map[string]string{"topology.kubernetes.io/zone": "zone-b", "kubernetes.io/arch": "arm64"}
	if !maps.Equal(got, want) {
		t.Fatalf("AllowedNodeLabels = %v, want %v", got, want)
	}
}

// TestDecideRefusesPoolsBeyondTheOffer: the cap on an offer binds its
// pools, which together may offer no more than it (of any resource, one
// it does not offer counting as none).
func TestDecideRefusesPoolsBeyondTheOffer(t *testing.T) {
	const provider = "provider-id"
	fc := &discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: provider, Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: provider}}}
	fc.Status.Conditions = []metav1.Condition{{Type: discoveryv1alpha1.ConditionPeeringRequested, Status: metav1.ConditionTrue, Reason: "Accepted"}}
	o := &Operator{
		Client: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(fc).Build(),
		Config: func() *configv1alpha1.ClusterConfig { return &configv1alpha1.ClusterConfig{} },
	}
	pool := func(cpu string) sharingv1alpha1.AdvertisementPool {
		return sharingv1alpha1.AdvertisementPool{Labels: map[string]string{"topology.kubernetes.io/zone": cpu}, Resources: list(cpu, "1Gi")}
	}
	gpu := pool("1")
	gpu.Resources["nvidia.com/gpu"] = resource.MustParse("1")
	for _, tc := range []struct {
		name  string
		pools []sharingv1alpha1.AdvertisementPool
		want  sharingv1alpha1.AdvertisementPhase
	}{
		{"within", []sharingv1alpha1.AdvertisementPool{pool("1"), pool("3")}, sharingv1alpha1.AdvertisementAccepted},
		{"beyond, together", []sharingv1alpha1.AdvertisementPool{pool("3"), pool("3")}, sharingv1alpha1.AdvertisementRefused},
		{"a resource not offered", []sharingv1alpha1.AdvertisementPool{gpu}, sharingv1alpha1.AdvertisementRefused},
	} {
		adv := &sharingv1alpha1.Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: discoveryv1alpha1.TenantNamespace(provider), Name: sharingv1alpha1.AdvertisementName(provider)}}
		adv.Spec.ClusterIdentity.ClusterID = provider
		adv.Spec.Resources = list("4", "4Gi")
		adv.Spec.Pools = tc.pools
		got, reason, msg := o.decide(context.Background(), adv)
		if got != tc.want || got == sharingv1alpha1.AdvertisementRefused && reason != sharingv1alpha1.ReasonPoolsOverOffer {
			t.Errorf("%s: decided %s (%s: %s), want %s", tc.name, got, reason, msg, tc.want)
		}
	}
}
