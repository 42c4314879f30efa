// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package remapping

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/liqo-go/liqo/internal/network/ipam"
	"github.com/liqo-go/liqo/internal/network/wgkey"
)

// local is this test cluster's configuration: the harness's ranges, which
// every peer below shares.
func local(pool ...string) *configv1alpha1.ClusterConfig {
	return &configv1alpha1.ClusterConfig{Spec: configv1alpha1.ClusterConfigSpec{NetworkConfig: configv1alpha1.NetworkConfig{
		PodCIDR: "10.100.0.0/14", ServiceCIDR: "10.96.0.0/12", ExternalCIDR: "10.70.0.0/16",
		ReservedSubnets: []string{"10.254.0.0/16"}, RemappingPool: pool,
	}}}
}

type env struct {
	t   *testing.T
	cfg *rest.Config
	c   client.Client
}

func start(t *testing.T) *env {
	t.Helper()
	cfg := envtest.Start(t, "remapping")
	if err := install.Install(t.Context(), cfg, install.Options{}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, cfg: cfg, c: c}
}

// run starts the reconciler; stop stops it.
func (e *env) run(config func() *configv1alpha1.ClusterConfig, changes <-chan struct{}) (stop func() error) {
	e.t.Helper()
	_, stop, err := envtest.RunManager(e.cfg, func(mgr ctrl.Manager) error {
		return (&Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: config, Changes: changes}).SetupWithManager(mgr)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	once := sync.OnceValue(stop)
	e.t.Cleanup(func() { _ = once() })
	return once
}

// tenant makes the tenant namespace of peer, as the peering does.
func (e *env) tenant(peer string) string {
	e.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: discoveryv1alpha1.TenantNamespace(peer), Labels: map[string]string{
		discoveryv1alpha1.TenantLabel: "true", discoveryv1alpha1.ClusterIDLabel: peer,
	}}}
	if err := e.c.Create(e.t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	return ns.Name
}

func key(t *testing.T) string {
	t.Helper()
	k, err := wgkey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k.Public().String()
}

// state writes peer's NetworkConfig, with the harness's ranges unless
// changed by edit, as a provider (a Server with an endpoint).
func (e *env) state(peer string, edit func(*netv1alpha1.NetworkConfig)) *netv1alpha1.NetworkConfig {
	e.t.Helper()
	nc := &netv1alpha1.NetworkConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.tenant(peer), Name: netv1alpha1.NetworkConfigName(peer)},
		Spec: netv1alpha1.NetworkConfigSpec{ClusterID: peer, PodCIDR: "10.100.0.0/14", ExternalCIDR: "10.70.0.0/16", Gateway: netv1alpha1.GatewayParameters{
			Role: netv1alpha1.GatewayServer, PublicKey: key(e.t), Endpoint: &netv1alpha1.GatewayEndpoint{Host: "10.254.2.10", Port: 51820},
		}},
	}
	if edit != nil {
		edit(nc)
	}
	if err := e.c.Create(e.t.Context(), nc); err != nil {
		e.t.Fatal(err)
	}
	return nc
}

// answered waits for the answer to peer's NetworkConfig with reason, and
// returns it.
func (e *env) answered(nc *netv1alpha1.NetworkConfig, reason string) *netv1alpha1.NetworkConfig {
	e.t.Helper()
	var got netv1alpha1.NetworkConfig
	envtest.Eventually(e.t, 10*time.Second, func(ctx context.Context) error {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(nc), &got); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, netv1alpha1.ConditionProcessed)
		if cond == nil || cond.Reason != reason {
			return fmt.Errorf("%s: Processed %+v, want reason %s", nc.Spec.ClusterID, cond, reason)
		}
		return nil
	})
	return &got
}

func (e *env) tunnel(peer string) *netv1alpha1.TunnelEndpoint {
	e.t.Helper()
	var tep netv1alpha1.TunnelEndpoint
	if err := e.c.Get(e.t.Context(), client.ObjectKey{Name: peer}, &tep); err != nil {
		e.t.Fatal(err)
	}
	return &tep
}

// TestPeersSeenApart: peers whose ranges overlap this cluster's, and each
// other's, are each seen in ranges of their own, of the same size, away
// from every local range; a peer that overlaps nothing is seen as it is.
// The TunnelEndpoint holds the decision, the status tells the peer; a
// decision stays through a new key, a controller restart and a
// reconfiguration; a peer whose parameters go loses its TunnelEndpoint.
func TestPeersSeenApart(t *testing.T) {
	e := start(t)
	var config atomic.Pointer[configv1alpha1.ClusterConfig]
	config.Store(local())
	stop := e.run(config.Load, nil)

	first := e.answered(e.state("peer-1", nil), netv1alpha1.ReasonRemapped)
	second := e.answered(e.state("peer-2", nil), netv1alpha1.ReasonRemapped)
	apart := e.answered(e.state("peer-3", func(nc *netv1alpha1.NetworkConfig) {
		nc.Spec.PodCIDR, nc.Spec.ExternalCIDR = "172.16.0.0/16", "172.17.0.0/16"
		nc.Spec.Gateway.Role, nc.Spec.Gateway.Endpoint = netv1alpha1.GatewayClient, nil
	}), netv1alpha1.ReasonRemapped)

	localRanges, err := ipam.ParsePrefixes(append([]string{"10.100.0.0/14", "10.96.0.0/12", "10.70.0.0/16"}, config.Load().Spec.NetworkConfig.ReservedSubnets...))
	if err != nil {
		t.Fatal(err)
	}
	var views []netip.Prefix
	for _, nc := range []*netv1alpha1.NetworkConfig{first, second} {
		pod, ext := netip.MustParsePrefix(nc.Status.RemappedPodCIDR), netip.MustParsePrefix(nc.Status.RemappedExternalCIDR)
		if pod.Bits() != 14 || ext.Bits() != 16 {
			t.Errorf("%s seen as %s and %s: not the sizes of its ranges", nc.Spec.ClusterID, pod, ext)
		}
		for _, v := range []netip.Prefix{pod, ext} {
			for _, other := range append(append([]netip.Prefix{}, localRanges...), views...) {
				if ipam.Overlaps(v, other) {
					t.Errorf("%s seen as %s, which overlaps %s", nc.Spec.ClusterID, v, other)
				}
			}
			views = append(views, v)
		}
		tep := e.tunnel(nc.Spec.ClusterID)
		if tep.Spec.RemoteSeenAs.PodCIDR != nc.Status.RemappedPodCIDR || tep.Spec.RemoteSeenAs.ExternalCIDR != nc.Status.RemappedExternalCIDR ||
			tep.Spec.Remote.PodCIDR != "10.100.0.0/14" || tep.Spec.PublicKey != nc.Spec.Gateway.PublicKey ||
			tep.Spec.Endpoint == nil || tep.Spec.Endpoint.Host != "10.254.2.10" {
			t.Errorf("TunnelEndpoint of %s: %+v; its NetworkConfig's status %+v", nc.Spec.ClusterID, tep.Spec, nc.Status)
		}
	}
	if apart.Status.RemappedPodCIDR != "172.16.0.0/16" || apart.Status.RemappedExternalCIDR != "172.17.0.0/16" {
		t.Errorf("a peer that overlaps nothing is seen as %+v", apart.Status)
	}
	if tep := e.tunnel("peer-3"); tep.Spec.Endpoint != nil {
		t.Errorf("a Client peer's endpoint was kept: %+v", tep.Spec.Endpoint)
	}

	// A new key, then a restart of the controller: the decision stays.
	patch := client.MergeFrom(first.DeepCopy())
	first.Spec.Gateway.PublicKey = key(t)
	if err := e.c.Patch(t.Context(), first, patch); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		if tep := e.tunnel("peer-1"); tep.Spec.PublicKey != first.Spec.Gateway.PublicKey {
			return fmt.Errorf("the TunnelEndpoint has key %s, want the new %s", tep.Spec.PublicKey, first.Spec.Gateway.PublicKey)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	changes := make(chan struct{}, 1)
	e.run(config.Load, changes)
	// A reconfiguration that reserves more decides everything again, and
	// what still holds stays.
	more := local()
	more.Spec.NetworkConfig.ReservedSubnets = append(more.Spec.NetworkConfig.ReservedSubnets, "192.168.0.0/16")
	config.Store(more)
	changes <- struct{}{}
	envtest.Consistently(t, 3*time.Second, func(ctx context.Context) error {
		for _, nc := range []*netv1alpha1.NetworkConfig{first, second} {
			var now netv1alpha1.NetworkConfig
			if err := e.c.Get(ctx, client.ObjectKeyFromObject(nc), &now); err != nil {
				return err
			}
			if now.Status.RemappedPodCIDR != nc.Status.RemappedPodCIDR || now.Status.RemappedExternalCIDR != nc.Status.RemappedExternalCIDR {
				return fmt.Errorf("%s now seen as %s and %s, was %s and %s", nc.Spec.ClusterID,
					now.Status.RemappedPodCIDR, now.Status.RemappedExternalCIDR, nc.Status.RemappedPodCIDR, nc.Status.RemappedExternalCIDR)
			}
		}
		return nil
	})

	// The peering with peer-2 goes: its parameters, then its tunnel.
	if err := e.c.Delete(t.Context(), second); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		err := e.c.Get(ctx, client.ObjectKey{Name: "peer-2"}, &netv1alpha1.TunnelEndpoint{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("the TunnelEndpoint of peer-2 is still there: %w", err)
	})
}

// TestWhatAPeerMayNotState: a NetworkConfig that speaks for another
// cluster, names another, or points this cluster's gateway at a loopback
// address or into this cluster is refused, the field named, and no tunnel
// is made; the schema refuses malformed ranges and a server without an
// endpoint; a pool with no room says so.
func TestWhatAPeerMayNotState(t *testing.T) {
	e := start(t)
	e.run(func() *configv1alpha1.ClusterConfig { return local("10.64.0.0/13") }, nil)

	for _, tc := range []struct {
		peer  string
		edit  func(*netv1alpha1.NetworkConfig)
		field string
	}{
		{"claims-another", func(nc *netv1alpha1.NetworkConfig) { nc.Spec.ClusterID = "peer-1" }, "spec.clusterID"},
		{"loopback", func(nc *netv1alpha1.NetworkConfig) { nc.Spec.Gateway.Endpoint.Host = "127.0.0.1" }, "spec.gateway.endpoint"},
		{"inside", func(nc *netv1alpha1.NetworkConfig) { nc.Spec.Gateway.Endpoint.Host = "10.96.0.1" }, "spec.gateway.endpoint"},
		{"link-local", func(nc *netv1alpha1.NetworkConfig) { nc.Spec.Gateway.Endpoint.Host = "169.254.169.254" }, "spec.gateway.endpoint"},
	} {
		nc := e.answered(e.state(tc.peer, tc.edit), netv1alpha1.ReasonInvalid)
		cond := meta.FindStatusCondition(nc.Status.Conditions, netv1alpha1.ConditionProcessed)
		if cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, tc.field) {
			t.Errorf("%s: %+v, want False naming %s", tc.peer, cond, tc.field)
		}
		if err := e.c.Get(t.Context(), client.ObjectKey{Name: tc.peer}, &netv1alpha1.TunnelEndpoint{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: a TunnelEndpoint was made (%v)", tc.peer, err)
		}
	}
	// Misnamed, in another's namespace.
	misnamed := e.state("peer-9", func(nc *netv1alpha1.NetworkConfig) { nc.Name = netv1alpha1.NetworkConfigName("peer-8") })
	if cond := meta.FindStatusCondition(e.answered(misnamed, netv1alpha1.ReasonInvalid).Status.Conditions, netv1alpha1.ConditionProcessed); !strings.Contains(cond.Message, "metadata.name") {
		t.Errorf("misnamed: %+v", cond)
	}

	// The schema: each refusal names the field.
	for field, edit := range map[string]func(*netv1alpha1.NetworkConfig){
		"spec.podCIDR":      func(nc *netv1alpha1.NetworkConfig) { nc.Spec.PodCIDR = "10.100.0.1/14" },
		"spec.externalCIDR": func(nc *netv1alpha1.NetworkConfig) { nc.Spec.ExternalCIDR = "fd00::/64" },
		"spec.gateway.endpoint": func(nc *netv1alpha1.NetworkConfig) {
			nc.Spec.Gateway.Endpoint = nil
		},
		"spec.gateway.publicKey": func(nc *netv1alpha1.NetworkConfig) { nc.Spec.Gateway.PublicKey = "not a key" },
	} {
		nc := &netv1alpha1.NetworkConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.tenant("schema"), Name: netv1alpha1.NetworkConfigName("schema")},
			Spec: netv1alpha1.NetworkConfigSpec{ClusterID: "schema", PodCIDR: "10.100.0.0/14", ExternalCIDR: "10.70.0.0/16", Gateway: netv1alpha1.GatewayParameters{
				Role: netv1alpha1.GatewayServer, PublicKey: key(t), Endpoint: &netv1alpha1.GatewayEndpoint{Host: "gw.example.com", Port: 51820},
			}},
		}
		edit(nc)
		err := e.c.Create(t.Context(), nc)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want Invalid naming it", field, err)
		}
	}

	// A pool with room for one /14 and a /16: the first peer that needs them gets
	// it, the second is told there is no room.
	e.answered(e.state("peer-1", nil), netv1alpha1.ReasonRemapped)
	full := e.answered(e.state("peer-2", nil), netv1alpha1.ReasonPoolExhausted)
	if cond := meta.FindStatusCondition(full.Status.Conditions, netv1alpha1.ConditionProcessed); cond.Status != metav1.ConditionFalse {
		t.Errorf("pool exhausted: %+v", cond)
	}
}

// TestPeerRangesCheckedAgainstThisCluster: what a peer states is used as
// it is only inside the pool and the private ranges, away from what this
// cluster's nodes use (their addresses and pod ranges) and from the
// peer's own gateway endpoint; a key another peer's gateway holds is
// refused, the first holder keeping it; a range the gateway found in the
// way on its node is decided again, elsewhere.
func TestPeerRangesCheckedAgainstThisCluster(t *testing.T) {
	e := start(t)
	ctx := t.Context()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24"}}}
	if err := e.c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.7.3"}}
	if err := e.c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	e.run(func() *configv1alpha1.ClusterConfig { return local() }, nil)

	asClient := func(nc *netv1alpha1.NetworkConfig) {
		nc.Spec.Gateway.Role, nc.Spec.Gateway.Endpoint = netv1alpha1.GatewayClient, nil
	}
	for _, tc := range []struct {
		peer string
		edit func(*netv1alpha1.NetworkConfig)
	}{
		{"public", func(nc *netv1alpha1.NetworkConfig) {
			asClient(nc)
			nc.Spec.PodCIDR, nc.Spec.ExternalCIDR = "8.8.8.0/30", "203.0.113.0/24"
		}},
		{"over-a-node", func(nc *netv1alpha1.NetworkConfig) { asClient(nc); nc.Spec.PodCIDR = "192.168.0.0/16" }},
		{"over-node-pods", func(nc *netv1alpha1.NetworkConfig) { asClient(nc); nc.Spec.PodCIDR = "10.244.0.0/16" }},
		{"over-its-endpoint", func(nc *netv1alpha1.NetworkConfig) {
			nc.Spec.PodCIDR, nc.Spec.Gateway.Endpoint.Host = "172.20.0.0/16", "172.20.0.9"
		}},
	} {
		nc := e.answered(e.state(tc.peer, tc.edit), netv1alpha1.ReasonRemapped)
		for stated, seen := range map[string]string{nc.Spec.PodCIDR: nc.Status.RemappedPodCIDR, nc.Spec.ExternalCIDR: nc.Status.RemappedExternalCIDR} {
			p := netip.MustParsePrefix(seen)
			if stated == seen && stated != "10.70.0.0/16" || !ipam.Within(p, ipam.DefaultPool) || p.Bits() != netip.MustParsePrefix(stated).Bits() {
				t.Errorf("%s: %s seen as %s, want a range of that size in the pool", tc.peer, stated, seen)
			}
		}
	}

	// A key another peer's gateway holds: refused, the holder kept.
	holder := e.answered(e.state("holder", asClient), netv1alpha1.ReasonRemapped)
	copycat := e.answered(e.state("copycat", func(nc *netv1alpha1.NetworkConfig) {
		asClient(nc)
		nc.Spec.PodCIDR, nc.Spec.ExternalCIDR = "172.30.0.0/16", "172.31.0.0/16"
		nc.Spec.Gateway.PublicKey = holder.Spec.Gateway.PublicKey
	}), netv1alpha1.ReasonInvalid)
	if cond := meta.FindStatusCondition(copycat.Status.Conditions, netv1alpha1.ConditionProcessed); !strings.Contains(cond.Message, "spec.gateway.publicKey") {
		t.Errorf("copycat: %+v, want the key named", cond)
	}
	if tep := e.tunnel("holder"); tep.Spec.PublicKey != holder.Spec.Gateway.PublicKey {
		t.Errorf("the holder's TunnelEndpoint has key %s", tep.Spec.PublicKey)
	}

	// The gateway found a node route over what "holder" is seen as.
	tep := e.tunnel("holder")
	was := tep.Spec.RemoteSeenAs.PodCIDR
	patch := client.MergeFrom(tep.DeepCopy())
	tep.Status.RangesInUse = []string{was}
	if err := e.c.Status().Patch(ctx, tep, patch); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		now := e.tunnel("holder")
		if now.Spec.RemoteSeenAs.PodCIDR == was || ipam.Overlaps(netip.MustParsePrefix(now.Spec.RemoteSeenAs.PodCIDR), netip.MustParsePrefix(was)) {
			return fmt.Errorf("holder still seen as %s, over the node's %s", now.Spec.RemoteSeenAs.PodCIDR, was)
		}
		return nil
	})
	// The gateway then finds the new range in the way too, and reports
	// only that one: the first is remembered, and neither is taken again.
	tep = e.tunnel("holder")
	second := tep.Spec.RemoteSeenAs.PodCIDR
	patch = client.MergeFrom(tep.DeepCopy())
	tep.Status.RangesInUse = []string{second}
	if err := e.c.Status().Patch(ctx, tep, patch); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		now := netip.MustParsePrefix(e.tunnel("holder").Spec.RemoteSeenAs.PodCIDR)
		for _, avoid := range []string{was, second} {
			if ipam.Overlaps(now, netip.MustParsePrefix(avoid)) {
				return fmt.Errorf("holder seen as %s, over the node's %s", now, avoid)
			}
		}
		return nil
	})
}
