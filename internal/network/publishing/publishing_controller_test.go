// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package publishing_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
	"github.com/liqo-go/liqo/internal/network/publishing"
	"github.com/liqo-go/liqo/internal/network/remapping"
)

// side is one cluster of the pair: its API server, and the peering seen
// from it.
type side struct {
	id, peer string
	cfg      *rest.Config
	c        client.Client
	role     netv1alpha1.GatewayRole
	config   atomic.Pointer[configv1alpha1.ClusterConfig]
	// open is set when the peering gave this side its channel to the
	// peer.
	open atomic.Bool
}

func newSide(t *testing.T, id, peer string, role netv1alpha1.GatewayRole) *side {
	t.Helper()
	s := &side{id: id, peer: peer, role: role, cfg: envtest.Start(t, id)}
	if err := install.Install(t.Context(), s.cfg, install.Options{}); err != nil {
		t.Fatal(err)
	}
	var err error
	if s.c, err = client.New(s.cfg, client.Options{Scheme: api.NewScheme()}); err != nil {
		t.Fatal(err)
	}
	// Both use the harness's ranges: each remaps the other.
	s.config.Store(&configv1alpha1.ClusterConfig{Spec: configv1alpha1.ClusterConfigSpec{NetworkConfig: configv1alpha1.NetworkConfig{
		PodCIDR: "10.100.0.0/14", ServiceCIDR: "10.96.0.0/12", ExternalCIDR: "10.70.0.0/16",
	}}})
	ctx := t.Context()
	// The peering's traces: the peer's tenant namespace and its
	// ForeignCluster.
	if err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: discoveryv1alpha1.TenantNamespace(peer), Labels: map[string]string{
		discoveryv1alpha1.TenantLabel: "true", discoveryv1alpha1.ClusterIDLabel: peer,
	}}}); err != nil {
		t.Fatal(err)
	}
	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: peer, Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: peer}},
		Spec:       discoveryv1alpha1.ForeignClusterSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: peer, ClusterName: peer}},
	}
	if err := s.c.Create(ctx, fc); err != nil {
		t.Fatal(err)
	}
	return s
}

// peered marks the peering accepted in the ForeignCluster, as the peering
// controllers do, and opens the channel.
func (s *side) peered(t *testing.T) {
	t.Helper()
	s.open.Store(true)
	var fc discoveryv1alpha1.ForeignCluster
	if err := s.c.Get(t.Context(), client.ObjectKey{Name: s.peer}, &fc); err != nil {
		t.Fatal(err)
	}
	if s.role == netv1alpha1.GatewayClient {
		meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{Type: discoveryv1alpha1.ConditionPeeringRequested, Status: metav1.ConditionTrue, Reason: "Accepted"})
	} else {
		fc.Status.IncomingPeering = true
	}
	if err := s.c.Status().Update(t.Context(), &fc); err != nil {
		t.Fatal(err)
	}
}

// run starts both network controllers of s, reaching the peer's API
// server with peer once the channel is open.
func (s *side) run(t *testing.T, peer *rest.Config) {
	t.Helper()
	endpoint := func(context.Context) (*netv1alpha1.GatewayEndpoint, error) {
		return &netv1alpha1.GatewayEndpoint{Host: "10.254.2.10", Port: 51820}, nil
	}
	envtest.StartManager(t, s.cfg, func(mgr ctrl.Manager) error {
		if err := (&remapping.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: s.config.Load}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&publishing.Reconciler{
			Client: mgr.GetClient(), LocalClusterID: s.id, Namespace: install.DefaultNamespace, Config: s.config.Load, Endpoint: endpoint,
			Peer: func(_ context.Context, peerID string) (*rest.Config, netv1alpha1.GatewayRole, error) {
				if peerID != s.peer || !s.open.Load() {
					return nil, "", nil
				}
				return peer, s.role, nil
			},
		}).SetupWithManager(mgr)
	})
}

func (s *side) tunnel(ctx context.Context) (*netv1alpha1.TunnelEndpoint, error) {
	var tep netv1alpha1.TunnelEndpoint
	return &tep, s.c.Get(ctx, client.ObjectKey{Name: s.peer}, &tep)
}

func (s *side) network(ctx context.Context) (*metav1.Condition, error) {
	var fc discoveryv1alpha1.ForeignCluster
	if err := s.c.Get(ctx, client.ObjectKey{Name: s.peer}, &fc); err != nil {
		return nil, err
	}
	return meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionNetworkEstablished), nil
}

// TestExchangeAcrossTwoClusters runs the remapping and publishing
// controllers of a consumer and a provider against two API servers: once
// peered, each states its parameters in the other, each decides how it
// sees the other, and each learns the other's decision, so that the two
// TunnelEndpoints mirror each other (the consumer the client, dialing the
// provider's endpoint); the ForeignClusters say the gateways are awaited,
// then that the network is established once the gateway reports so. The
// gateways' key is made once and kept.
func TestExchangeAcrossTwoClusters(t *testing.T) {
	consumer := newSide(t, "consumer-1", "provider-1", netv1alpha1.GatewayClient)
	provider := newSide(t, "provider-1", "consumer-1", netv1alpha1.GatewayServer)
	consumer.run(t, provider.cfg)
	provider.run(t, consumer.cfg)

	// Not peered yet: nothing is stated, no condition.
	envtest.Consistently(t, time.Second, func(ctx context.Context) error {
		if cond, err := consumer.network(ctx); err != nil || cond != nil {
			return fmt.Errorf("before the peering, NetworkEstablished %+v (%w)", cond, err)
		}
		return nil
	})

	start := time.Now()
	consumer.peered(t)
	provider.peered(t)
	var cTep, pTep *netv1alpha1.TunnelEndpoint
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		var err error
		if cTep, err = consumer.tunnel(ctx); err != nil {
			return err
		}
		if pTep, err = provider.tunnel(ctx); err != nil {
			return err
		}
		if cTep.Spec.LocalSeenAs == nil || pTep.Spec.LocalSeenAs == nil {
			return fmt.Errorf("the peers' answers are not recorded yet: consumer %+v, provider %+v", cTep.Spec.LocalSeenAs, pTep.Spec.LocalSeenAs)
		}
		return nil
	})
	t.Logf("both TunnelEndpoints complete %s after the peering", time.Since(start).Round(time.Millisecond))
	if *cTep.Spec.LocalSeenAs != pTep.Spec.RemoteSeenAs || *pTep.Spec.LocalSeenAs != cTep.Spec.RemoteSeenAs {
		t.Errorf("the two sides disagree: the consumer sees the provider as %+v and is seen as %+v; the provider sees the consumer as %+v and is seen as %+v",
			cTep.Spec.RemoteSeenAs, *cTep.Spec.LocalSeenAs, pTep.Spec.RemoteSeenAs, *pTep.Spec.LocalSeenAs)
	}
	if cTep.Spec.RemoteSeenAs.PodCIDR == "10.100.0.0/14" || pTep.Spec.RemoteSeenAs.PodCIDR == "10.100.0.0/14" {
		t.Errorf("identical ranges not remapped: %+v, %+v", cTep.Spec.RemoteSeenAs, pTep.Spec.RemoteSeenAs)
	}
	if cTep.Spec.Endpoint == nil || cTep.Spec.Endpoint.Host != "10.254.2.10" || pTep.Spec.Endpoint != nil {
		t.Errorf("the consumer must dial the provider: consumer's endpoint %+v, provider's %+v", cTep.Spec.Endpoint, pTep.Spec.Endpoint)
	}
	keys := map[string]string{}
	for _, s := range []*side{consumer, provider} {
		var secret corev1.Secret
		if err := s.c.Get(t.Context(), client.ObjectKey{Namespace: install.DefaultNamespace, Name: netv1alpha1.GatewayKeySecret}, &secret); err != nil {
			t.Fatal(err)
		}
		keys[s.id] = string(secret.Data[netv1alpha1.GatewayKeyField])
	}
	var pNC netv1alpha1.NetworkConfig
	if err := consumer.c.Get(t.Context(), client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace("provider-1"), Name: netv1alpha1.NetworkConfigName("provider-1")}, &pNC); err != nil {
		t.Fatal(err)
	}
	if pTep.Spec.PublicKey == cTep.Spec.PublicKey || cTep.Spec.PublicKey != pNC.Spec.Gateway.PublicKey {
		t.Errorf("keys: the consumer dials key %s, the provider stated %s", cTep.Spec.PublicKey, pNC.Spec.Gateway.PublicKey)
	}

	for _, s := range []*side{consumer, provider} {
		envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
			cond, err := s.network(ctx)
			if err != nil {
				return err
			}
			if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "WaitingForGateway" {
				return fmt.Errorf("%s: NetworkEstablished %+v, want False WaitingForGateway", s.id, cond)
			}
			return nil
		})
	}
	// The consumer's gateway reports the tunnel up.
	meta.SetStatusCondition(&cTep.Status.Conditions, metav1.Condition{Type: netv1alpha1.ConditionEstablished, Status: metav1.ConditionTrue,
		Reason: netv1alpha1.ReasonConnected, Message: "up", ObservedGeneration: cTep.Generation})
	if err := consumer.c.Status().Update(t.Context(), cTep); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		cond, err := consumer.network(ctx)
		if err != nil {
			return err
		}
		if cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("NetworkEstablished %+v, want True", cond)
		}
		return nil
	})
	// The key stays what it was.
	var secret corev1.Secret
	if err := consumer.c.Get(t.Context(), client.ObjectKey{Namespace: install.DefaultNamespace, Name: netv1alpha1.GatewayKeySecret}, &secret); err != nil {
		t.Fatal(err)
	}
	if string(secret.Data[netv1alpha1.GatewayKeyField]) != keys[consumer.id] {
		t.Error("the consumer's gateway key changed")
	}
}
