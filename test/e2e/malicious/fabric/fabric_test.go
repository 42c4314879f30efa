// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package fabric_test

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/network/ipam"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// stateExternal has the attacker's controller manager state external as
// its external range, from its own ClusterConfig, until the test ends.
func stateExternal(t *testing.T, attacker *playground.Member, external string) {
	t.Helper()
	var was string
	framework.SetClusterConfig(t, attacker, func(spec *configv1alpha1.ClusterConfigSpec) {
		was, spec.NetworkConfig.ExternalCIDR = spec.NetworkConfig.ExternalCIDR, external
	})
	t.Cleanup(func() {
		framework.SetClusterConfig(t, attacker, func(spec *configv1alpha1.ClusterConfigSpec) { spec.NetworkConfig.ExternalCIDR = was })
		waitTunnels(t, 2*time.Minute, pairs()...)
	})
}

// seenAs waits until m's TunnelEndpoint of peer records that the peer
// states external as its external range, and returns how m sees it.
func seenAs(t *testing.T, m, peer *playground.Member, external string) netip.Prefix {
	t.Helper()
	var tep netv1alpha1.TunnelEndpoint
	framework.Eventually(t, time.Minute, func() error {
		if err := framework.Client(t, m).Get(t.Context(), client.ObjectKey{Name: peer.ClusterID}, &tep); err != nil {
			return err
		}
		if tep.Spec.Remote.ExternalCIDR != external {
			return fmt.Errorf("%s's TunnelEndpoint of %s: the peer's external range %s, want %s", m.Name, peer.Name, tep.Spec.Remote.ExternalCIDR, external)
		}
		return nil
	})
	return netip.MustParsePrefix(tep.Spec.RemoteSeenAs.ExternalCIDR)
}

// notRouted checks that no table of m's node routes r and that the node
// sends nothing for addr into the tunnel.
func notRouted(t *testing.T, m *playground.Member, r netip.Prefix, addr netip.Addr) {
	t.Helper()
	if all := framework.NodeIP(t, m, "-4", "route", "show", "table", "all"); strings.Contains(all, r.String()+" ") {
		t.Errorf("%s's node routes %s:\n%s", m.Name, r, all)
	}
	if got := routeGet(t, m, addr); strings.Contains(got, "liqo-tunnel") {
		t.Errorf("%s's node sends %s into the tunnel: %s", m.Name, addr, got)
	}
}

// routeGet is `ip route get addr` on m's node: the route it would take,
// or the kernel's refusal (the nodes have no default route).
func routeGet(t *testing.T, m *playground.Member, addr netip.Addr) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "ip", "-n", m.RealNodeNetns(0), "route", "get", addr.String()).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "unreachable") {
		t.Fatalf("ip route get %s on %s's node: %v: %s", addr, m.Name, err, out)
	}
	return string(out)
}

// TestStatedRangesAreNotRoutedAsStated: a provider states a public range
// as its external range, from its own ClusterConfig. Its consumer sees
// it as a range of its remapping pool, and routes nothing to the public
// range; the tunnel comes back up at the remapped range, and nothing
// else is disturbed. (The consumer direction is the same code.)
func TestStatedRangesAreNotRoutedAsStated(t *testing.T) {
	peered(t)
	a, b, _ := members()
	before := mainTables(t)
	const public = "8.8.8.0/30"
	stateExternal(t, b, public)
	seen := seenAs(t, a, b, public)
	if seen == netip.MustParsePrefix(public) || !ipam.Within(seen, ipam.DefaultPool) || seen.Bits() != 30 {
		t.Errorf("%s sees %s's %s as %s, want a /30 of its pool", a.Name, b.Name, public, seen)
	}
	waitTunnels(t, time.Minute, pair{a, b}, pair{b, a})
	notRouted(t, a, netip.MustParsePrefix(public), netip.MustParseAddr("8.8.8.1"))
	undisturbed(t, b, before)
}

// TestNodesSubnetCutsNoNodeOff: a provider states the underlay the nodes
// live on as its external range. Neither its consumer of both (a) nor
// its other consumer (b) routes any of it to the peer: their nodes keep
// their routes, stay Ready, and their own tunnel stays up.
func TestNodesSubnetCutsNoNodeOff(t *testing.T) {
	peered(t)
	a, b, c := members()
	before := mainTables(t)
	stateExternal(t, c, localcluster.UnderlayCIDR)
	underlay := netip.MustParsePrefix(localcluster.UnderlayCIDR)
	for _, m := range []*playground.Member{a, b} {
		if seen := seenAs(t, m, c, localcluster.UnderlayCIDR); ipam.Overlaps(seen, underlay) {
			t.Errorf("%s sees %s's %s as %s, over its nodes' subnet", m.Name, c.Name, underlay, seen)
		}
	}
	for _, m := range []*playground.Member{a, b} {
		// Another node of the underlay (c's API server's address is
		// there too).
		if got := routeGet(t, m, netip.MustParseAddr("10.254.0.1")); strings.Contains(got, "liqo-tunnel") {
			t.Errorf("%s's node sends the underlay into the tunnel: %s", m.Name, got)
		}
	}
	undisturbed(t, c, before)
}

// TestOnePeerCannotStopTheGateway: a provider stops its own controller
// manager and, with the identity its peering gave it in the consumer,
// states the all-zero key (refused by the schema), the key of another
// provider's gateway (refused by the consumer, the holder keeping it),
// then an endpoint that resolves to loopback: the consumer's gateway
// refuses that peer alone, its TunnelEndpoint says why, and the other
// provider's tunnel stays up, also after the gateway restarts.
func TestOnePeerCannotStopTheGateway(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	inA := framework.Client(t, a)
	before := mainTables(t)
	// Its controller manager, back at cleanup, states its parameters
	// again (cleanups run last registered first).
	t.Cleanup(func() { waitTunnels(t, 2*time.Minute, pairs()...) })
	framework.StopControllerManager(t, b)
	asB := framework.ClientFor(t, framework.ProviderConfig(t, b, a.ClusterID))
	own := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(b.ClusterID), Name: netv1alpha1.NetworkConfigName(b.ClusterID)}
	var original netv1alpha1.NetworkConfigSpec
	state := func(edit func(*netv1alpha1.GatewayParameters)) (*netv1alpha1.NetworkConfig, error) {
		var nc netv1alpha1.NetworkConfig
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := asB.Get(ctx, own, &nc); err != nil {
				return err
			}
			if original.ClusterID == "" {
				original = *nc.Spec.DeepCopy()
			}
			nc.Spec = *original.DeepCopy()
			edit(&nc.Spec.Gateway)
			return asB.Update(ctx, &nc)
		})
		return &nc, err
	}
	processed := func(nc *netv1alpha1.NetworkConfig, reason, says string) {
		t.Helper()
		framework.Eventually(t, 30*time.Second, func() error {
			var now netv1alpha1.NetworkConfig
			if err := inA.Get(ctx, own, &now); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(now.Status.Conditions, netv1alpha1.ConditionProcessed)
			if cond == nil || cond.ObservedGeneration != nc.Generation || cond.Reason != reason || !strings.Contains(cond.Message, says) {
				return fmt.Errorf("Processed %+v, want %s saying %q for generation %d", cond, reason, says, nc.Generation)
			}
			return nil
		})
	}
	var cTunnel netv1alpha1.TunnelEndpoint
	if err := inA.Get(ctx, client.ObjectKey{Name: c.ClusterID}, &cTunnel); err != nil {
		t.Fatal(err)
	}

	_, err := state(func(g *netv1alpha1.GatewayParameters) { g.PublicKey = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" })
	framework.Refused(t, "the all-zero key", err)
	if err == nil || !strings.Contains(err.Error(), "publicKey") {
		t.Errorf("the refusal of the all-zero key does not name the field: %v", err)
	}

	nc, err := state(func(g *netv1alpha1.GatewayParameters) { g.PublicKey = cTunnel.Spec.PublicKey })
	framework.Allowed(t, "the provider stating a key", err)
	processed(nc, netv1alpha1.ReasonInvalid, "spec.gateway.publicKey")
	var bTunnel netv1alpha1.TunnelEndpoint
	if err := inA.Get(ctx, client.ObjectKey{Name: b.ClusterID}, &bTunnel); err != nil {
		t.Fatal(err)
	}
	if bTunnel.Spec.PublicKey == cTunnel.Spec.PublicKey {
		t.Errorf("%s's TunnelEndpoint took %s's key", b.Name, c.Name)
	}
	waitTunnels(t, 30*time.Second, pair{a, c})

	nc, err = state(func(g *netv1alpha1.GatewayParameters) { g.Endpoint.Host = "localhost" })
	framework.Allowed(t, "the provider stating its endpoint", err)
	processed(nc, netv1alpha1.ReasonRemapped, "")
	refused := func() {
		t.Helper()
		framework.Eventually(t, 30*time.Second, func() error {
			cond, err := established(t, a, b.ClusterID)
			if err != nil {
				return err
			}
			if cond.Reason != netv1alpha1.ReasonRefused || !strings.Contains(cond.Message, "endpoint") {
				return fmt.Errorf("%s's tunnel to %s: %+v, want Refused naming the endpoint", a.Name, b.Name, cond)
			}
			return nil
		})
	}
	refused()
	waitTunnels(t, 30*time.Second, pair{a, c}, pair{c, a})

	// The gateway restarts: the other provider's tunnel comes up again
	// at once (a new gateway says TunnelUp), the refused one stays out.
	pods := &corev1.PodList{}
	if err := inA.List(ctx, pods, client.InNamespace(install.DefaultNamespace),
		client.MatchingLabels{netv1alpha1.GatewayComponentLabel: netv1alpha1.GatewayComponentValue}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("%s's gateway pods: %d, %v", a.Name, len(pods.Items), err)
	}
	restarted := time.Now().Add(-time.Second)
	if err := inA.Delete(ctx, &pods.Items[0]); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		var evs eventsv1.EventList
		if err := inA.List(ctx, &evs); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == c.ClusterID && e.Reason == "TunnelUp" && e.EventTime.After(restarted) {
				return nil
			}
		}
		return fmt.Errorf("no TunnelUp of %s from a gateway started after %s", c.Name, restarted)
	})
	refused()
	undisturbed(t, b, before)
}
