// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/network/ipam"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestPeerCannotBendTheNetwork: with the identities a peering gives it in
// the consumer (the provider's) and in the provider (the virtual
// kubelet's), a peer states its own network parameters and nothing more:
// it cannot state them for another cluster or in another namespace,
// cannot write the answer (how the other side sees it), and cannot point
// the other side's gateway at a loopback or in-cluster address: such
// parameters are refused, the field named, and no tunnel follows them.
// Ranges it claims over this cluster's own are remapped: no gateway or
// route agent here routes a local range to it.
func TestPeerCannotBendTheNetwork(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	inA := framework.Client(t, a)
	asProvider := framework.ClientFor(t, framework.ProviderConfig(t, b, a.ClusterID))
	asConsumer := framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))

	for _, tc := range []struct {
		name       string
		as         client.Client
		writer     string // the identity's own cluster
		namespace  string
		edit       func(*netv1alpha1.NetworkConfig)
		wantReason string
	}{
		{"the provider speaking for another provider", asProvider, b.ClusterID, discoveryv1alpha1.TenantNamespace(b.ClusterID),
			func(nc *netv1alpha1.NetworkConfig) { nc.Spec.ClusterID = c.ClusterID }, "spec.clusterID"},
		{"the provider under another provider's name", asProvider, b.ClusterID, discoveryv1alpha1.TenantNamespace(b.ClusterID),
			func(nc *netv1alpha1.NetworkConfig) { nc.Name = netv1alpha1.NetworkConfigName(c.ClusterID) }, "metadata.name"},
		{"the provider in another provider's namespace", asProvider, b.ClusterID, discoveryv1alpha1.TenantNamespace(c.ClusterID),
			nil, ""},
		{"the consumer speaking for another cluster", asConsumer, a.ClusterID, discoveryv1alpha1.TenantNamespace(a.ClusterID),
			func(nc *netv1alpha1.NetworkConfig) { nc.Spec.ClusterID = c.ClusterID }, "spec.clusterID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &netv1alpha1.NetworkConfig{
				ObjectMeta: metav1.ObjectMeta{Namespace: tc.namespace, Name: netv1alpha1.NetworkConfigName(tc.writer)},
				Spec: netv1alpha1.NetworkConfigSpec{ClusterID: tc.writer, PodCIDR: "10.200.0.0/16", ExternalCIDR: "10.201.0.0/16", Gateway: netv1alpha1.GatewayParameters{
					Role: netv1alpha1.GatewayClient, PublicKey: "Ljk0kCqrl1KXUj2gN4wrxCu5ewcoPuVX3k0o6hMkRWg=",
				}},
			}
			if tc.edit != nil {
				tc.edit(nc)
			}
			err := tc.as.Create(ctx, nc)
			if err == nil {
				framework.DeleteOnCleanup(t, inA, nc)
			}
			framework.Refused(t, "a NetworkConfig "+tc.name, err)
			if tc.wantReason != "" && (err == nil || !strings.Contains(err.Error(), tc.wantReason)) {
				t.Errorf("the refusal does not name %s: %v", tc.wantReason, err)
			}
		})
	}

	// state writes B's own NetworkConfig in A, as B: the parameters a
	// provider may state, changed by edit.
	own := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(b.ClusterID), Name: netv1alpha1.NetworkConfigName(b.ClusterID)}
	state := func(edit func(*netv1alpha1.NetworkConfigSpec)) *netv1alpha1.NetworkConfig {
		t.Helper()
		var nc netv1alpha1.NetworkConfig
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			err := asProvider.Get(ctx, own, &nc)
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			create := err != nil
			if create {
				nc = netv1alpha1.NetworkConfig{ObjectMeta: metav1.ObjectMeta{Namespace: own.Namespace, Name: own.Name}}
			}
			nc.Spec = netv1alpha1.NetworkConfigSpec{ClusterID: b.ClusterID, PodCIDR: "10.200.0.0/16", ExternalCIDR: "10.201.0.0/16", Gateway: netv1alpha1.GatewayParameters{
				Role: netv1alpha1.GatewayServer, PublicKey: "Ljk0kCqrl1KXUj2gN4wrxCu5ewcoPuVX3k0o6hMkRWg=",
				Endpoint: &netv1alpha1.GatewayEndpoint{Host: "gateway.example.com", Port: 51820},
			}}
			edit(&nc.Spec)
			if create {
				return asProvider.Create(ctx, &nc)
			}
			return asProvider.Update(ctx, &nc)
		})
		framework.Allowed(t, "the provider stating its own parameters", err)
		return &nc
	}
	t.Cleanup(func() {
		// The provider's own parameters, written by this test, go.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = inA.Delete(ctx, &netv1alpha1.NetworkConfig{ObjectMeta: metav1.ObjectMeta{Namespace: own.Namespace, Name: own.Name}})
	})

	t.Run("the provider cannot write the consumer's answer", func(t *testing.T) {
		nc := state(func(*netv1alpha1.NetworkConfigSpec) {})
		nc.Status.RemappedPodCIDR = "10.100.0.0/14"
		framework.Denied(t, "the provider setting how the consumer sees it", asProvider.Status().Update(ctx, nc))
	})

	t.Run("ranges over this cluster's own are seen elsewhere, so nothing routes a local range to the peer", func(t *testing.T) {
		// The gateway and every node's route agent route the peer's
		// ranges as the TunnelEndpoint says this cluster sees them: a
		// peer that claims this cluster's pods and Services must get
		// them remapped, never routed as they are.
		var cc configv1alpha1.ClusterConfig
		if err := inA.Get(ctx, client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cc); err != nil {
			t.Fatal(err)
		}
		local := cc.Spec.NetworkConfig
		nc := state(func(spec *netv1alpha1.NetworkConfigSpec) {
			spec.PodCIDR, spec.ExternalCIDR = local.PodCIDR, local.ServiceCIDR
		})
		inUse, err := ipam.ParsePrefixes(append([]string{local.PodCIDR, local.ServiceCIDR, local.ExternalCIDR}, local.ReservedSubnets...))
		if err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 30*time.Second, func() error {
			var now netv1alpha1.NetworkConfig
			if err := inA.Get(ctx, own, &now); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(now.Status.Conditions, netv1alpha1.ConditionProcessed)
			if cond == nil || cond.ObservedGeneration < nc.Generation || cond.Reason != netv1alpha1.ReasonRemapped {
				return fmt.Errorf("Processed %+v, want Remapped for generation %d", cond, nc.Generation)
			}
			var tep netv1alpha1.TunnelEndpoint
			if err := inA.Get(ctx, client.ObjectKey{Name: b.ClusterID}, &tep); err != nil {
				return err
			}
			routed, err := ipam.ParsePrefixes([]string{tep.Spec.RemoteSeenAs.PodCIDR, tep.Spec.RemoteSeenAs.ExternalCIDR})
			if err != nil {
				return fmt.Errorf("the TunnelEndpoint's ranges: %w", err)
			}
			for _, r := range routed {
				for _, u := range inUse {
					if ipam.Overlaps(r, u) {
						t.Fatalf("the peer's claim of %s/%s is routed as %s, over this cluster's %s", local.PodCIDR, local.ServiceCIDR, r, u)
					}
				}
			}
			return nil
		})
	})

	t.Run("a loopback or in-cluster gateway endpoint is refused and followed by no tunnel", func(t *testing.T) {
		for _, host := range []string{"127.0.0.1", "169.254.169.254"} {
			state(func(spec *netv1alpha1.NetworkConfigSpec) { spec.Gateway.Endpoint.Host = host })
			framework.Eventually(t, 30*time.Second, func() error {
				var nc netv1alpha1.NetworkConfig
				if err := inA.Get(ctx, own, &nc); err != nil {
					return err
				}
				cond := meta.FindStatusCondition(nc.Status.Conditions, netv1alpha1.ConditionProcessed)
				if cond == nil || cond.ObservedGeneration != nc.Generation || cond.Reason != netv1alpha1.ReasonInvalid || !strings.Contains(cond.Message, "spec.gateway.endpoint") {
					return fmt.Errorf("endpoint %s: Processed %+v, want Invalid naming spec.gateway.endpoint", host, cond)
				}
				var tep netv1alpha1.TunnelEndpoint
				if err := inA.Get(ctx, client.ObjectKey{Name: b.ClusterID}, &tep); err == nil && tep.Spec.Endpoint != nil && tep.Spec.Endpoint.Host == host {
					return fmt.Errorf("the consumer's TunnelEndpoint dials %s", host)
				}
				return nil
			})
		}
	})
}
