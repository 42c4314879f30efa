// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package lan

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/clusterconfig"
	"github.com/liqo-go/liqo/internal/discovery/dnssd"
	"github.com/liqo-go/liqo/internal/discovery/mdns"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// heard records the clusters a test's mDNS peer hears announced.
type heard struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (h *heard) Found(f dnssd.Found, _ net.Addr) {
	if f.Announcement == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids[f.Announcement.ClusterID] = true
}

func (h *heard) Dropped(*dnssd.DropError, net.Addr) {}

func (h *heard) has(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ids[id]
}

// TestLANDiscovery runs LAN discovery alone (with the ClusterConfig
// reconciler that feeds it its settings) against a real API server, on
// loopback, with a test peer on the same mDNS port: the peer is recorded
// as a LAN ForeignCluster and hears this cluster's announcement; a peer
// announcing this cluster's own identity is not recorded; with discovery
// switched off, a new peer is not recorded either.
func TestLANDiscovery(t *testing.T) {
	cfg, c := envtest.StartInstalled(t, "consumer")
	ctx := t.Context()
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cc := &configv1alpha1.ClusterConfig{ObjectMeta: metav1.ObjectMeta{Name: configv1alpha1.ClusterConfigName}}
	cc.Spec.DiscoveryConfig = configv1alpha1.DiscoveryConfig{MDNSInterface: "lo", MDNSPort: int32(port), TTL: 3, QueryIntervalSeconds: 1} //nolint:gosec // a port
	if err := c.Create(ctx, cc); err != nil {
		t.Fatal(err)
	}
	const self = "consumer-1"
	store := &clusterconfig.Store{}
	envtest.StartManager(t, cfg, func(mgr ctrl.Manager) error {
		if err := (&clusterconfig.Reconciler{Client: mgr.GetClient(), ClusterID: self, Store: store}).SetupWithManager(mgr); err != nil {
			return err
		}
		registry := &foreigncluster.Registry{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), LocalClusterID: self,
			Choices:  &foreigncluster.Choices{Client: mgr.GetClient(), Namespace: install.DefaultNamespace},
			AutoJoin: func() bool { return false },
		}
		return mgr.Add(&Discovery{Store: store, Registry: registry, AuthPort: 30443, Self: func() dnssd.Announcement {
			return dnssd.Announcement{ClusterID: self, ClusterName: "consumer", AuthURL: "https://127.0.0.1:30443", Namespace: install.DefaultNamespace}
		}})
	})

	conn, err := mdns.Listen(ctx, "lo", port)
	if err != nil {
		t.Fatal(err)
	}
	ears := &heard{ids: map[string]bool{}}
	peer := mdns.NewServer(conn, mdns.Options{Service: dnssd.DefaultService, Handler: ears})
	peerCtx, stopPeer := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- peer.Serve(peerCtx) }()
	t.Cleanup(func() {
		_ = peer.Withdraw()
		stopPeer()
		if err := <-served; err != nil {
			t.Errorf("the test peer's mDNS server: %v", err)
		}
	})
	peer.SetBrowsing(true)
	announce := func(id string) {
		t.Helper()
		inst := &dnssd.Instance{Name: id, Service: dnssd.DefaultService, Domain: "local.", Host: id, Port: 30443,
			Announcement: dnssd.Announcement{ClusterID: id, ClusterName: id, AuthURL: "https://127.0.0.1:30443", Namespace: install.DefaultNamespace}}
		if err := peer.Publish(ctx, inst); err != nil {
			t.Fatal(err)
		}
	}
	recorded := func(ctx context.Context, id string) (*discoveryv1alpha1.ForeignCluster, error) {
		var list discoveryv1alpha1.ForeignClusterList
		if err := c.List(ctx, &list, client.MatchingLabels{discoveryv1alpha1.ClusterIDLabel: id}); err != nil {
			return nil, err
		}
		if len(list.Items) != 1 {
			return nil, fmt.Errorf("%d ForeignClusters for %s", len(list.Items), id)
		}
		return &list.Items[0], nil
	}

	envtest.Eventually(t, 15*time.Second, func(ctx context.Context) error {
		announce("peer-1")
		fc, err := recorded(ctx, "peer-1")
		if err != nil {
			return err
		}
		if got := fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel]; got != string(discoveryv1alpha1.LanDiscovery) {
			return fmt.Errorf("discovery type %q, want LAN", got)
		}
		if fc.Spec.ForeignAuthURL != "https://127.0.0.1:30443" {
			return fmt.Errorf("auth URL %q", fc.Spec.ForeignAuthURL)
		}
		return nil
	})
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		if err := peer.Query(); err != nil {
			return err
		}
		if !ears.has(self) {
			return fmt.Errorf("the peer has not heard %s announced", self)
		}
		return nil
	})

	// Someone announces this cluster's own identity.
	envtest.Consistently(t, 2*time.Second, func(ctx context.Context) error {
		announce(self)
		if fc, err := recorded(ctx, self); err == nil {
			return fmt.Errorf("this cluster recorded itself: ForeignCluster %s", fc.Name)
		}
		return nil
	})

	// Discovery off: a new peer is not recorded.
	patch := client.MergeFrom(cc.DeepCopy())
	cc.Spec.DiscoveryConfig.EnableDiscovery = ptr.To(false)
	if err := c.Patch(ctx, cc, patch); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		if v := testutil.ToFloat64(dnssd.MDNSBrowsing); v != 0 {
			return fmt.Errorf("still browsing (liqo_discovery_mdns_browsing=%v)", v)
		}
		return nil
	})
	envtest.Consistently(t, 3*time.Second, func(ctx context.Context) error {
		announce("peer-2")
		if fc, err := recorded(ctx, "peer-2"); err == nil {
			return fmt.Errorf("recorded %s with discovery off", fc.Name)
		}
		return nil
	})
}
