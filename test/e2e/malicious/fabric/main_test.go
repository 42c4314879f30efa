// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package fabric_test plays a peer turned hostile against the network
// fabric of three real clusters, each with a real node on one underlay
// and the chart's gateway and route agent: cluster-1 consumes from
// cluster-2 and cluster-3, cluster-2 from cluster-3. The attacker
// controls its own cluster (its ClusterConfig, its controller manager)
// and holds the credentials its peerings gave it; it states ranges over
// public addresses and over the nodes' own subnet, another peer's key, an
// endpoint that resolves to loopback. Each attack must be refused or
// remapped, and the other peers and the nodes must keep working: the
// nodes Ready and heartbeating, the tunnels between the others
// established, the nodes' main routing tables unchanged.
package fabric_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

var suite *framework.Suite

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, framework.Options{
		Clusters: 3,
		Network:  true,
		// Liqo's DNS proxy in every cluster, asking no cluster DNS (the
		// clusters run none): a closed port of its own pod's loopback.
		DNSProxy:         true,
		DNSProxyUpstream: "127.0.0.1:1",
		ClusterConfig: func(_ string, spec *configv1alpha1.ClusterConfigSpec) {
			spec.DiscoveryConfig.EnableDiscovery = ptr.To(false)
			spec.DiscoveryConfig.EnableAdvertisement = ptr.To(false)
			spec.PeeringConfig.ReconcilePeriodSeconds = 3
		},
	}, &suite))
}

// members returns the consumer of both, the provider that also consumes,
// and the provider of both.
func members() (a, b, c *playground.Member) {
	return suite.Members[0], suite.Members[1], suite.Members[2]
}

var (
	peerOnce sync.Once
	peeredOK bool
)

// peered peers a with b and c, b with c, once for the suite, and waits
// for every tunnel.
func peered(t *testing.T) {
	t.Helper()
	a, b, c := members()
	framework.LogOnFailure(t, a, b, c)
	peerOnce.Do(func() {
		framework.AddWithToken(t, a, b)
		framework.AddWithToken(t, a, c)
		framework.AddWithToken(t, b, c)
		framework.WaitVirtualNodesReady(t, a, b, c)
		framework.WaitVirtualNodesReady(t, b, c)
		waitTunnels(t, 2*time.Minute, pairs()...)
		peeredOK = true
	})
	if !peeredOK {
		t.Fatal("the suite's peerings failed in an earlier test")
	}
}

// mainTables are the nodes' main routing tables, by cluster: taken before
// an attack, compared after (a pod's first start adds its node's CNI
// bridge route, so they are taken anew by each test).
func mainTables(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, m := range suite.Members {
		out[m.Name] = mainTable(t, m)
	}
	return out
}

// pair is one side of a tunnel: m's TunnelEndpoint to peer.
type pair struct{ m, peer *playground.Member }

// pairs are both sides of every tunnel of the suite.
func pairs() []pair {
	a, b, c := members()
	return []pair{{a, b}, {b, a}, {a, c}, {c, a}, {b, c}, {c, b}}
}

// without are the pairs that do not involve the attacker.
func without(attacker *playground.Member) []pair {
	return slices.DeleteFunc(pairs(), func(p pair) bool { return p.m == attacker || p.peer == attacker })
}

// waitTunnels waits until each pair's TunnelEndpoint says Established,
// for its current generation.
func waitTunnels(t *testing.T, within time.Duration, ps ...pair) {
	t.Helper()
	framework.Eventually(t, within, func() error {
		for _, p := range ps {
			cond, err := established(t, p.m, p.peer.ClusterID)
			if err != nil {
				return err
			}
			if cond.Status != metav1.ConditionTrue {
				return fmt.Errorf("%s's tunnel to %s: %s %s: %s", p.m.Name, p.peer.Name, cond.Status, cond.Reason, cond.Message)
			}
		}
		return nil
	})
}

// established is the Established condition of m's TunnelEndpoint to
// peerID, for its current generation.
func established(t *testing.T, m *playground.Member, peerID string) (*metav1.Condition, error) {
	t.Helper()
	var tep netv1alpha1.TunnelEndpoint
	// Not t.Context(): cleanups wait for tunnels too.
	if err := framework.Client(t, m).Get(context.Background(), client.ObjectKey{Name: peerID}, &tep); err != nil {
		return nil, err
	}
	cond := meta.FindStatusCondition(tep.Status.Conditions, netv1alpha1.ConditionEstablished)
	if cond == nil || cond.ObservedGeneration != tep.Generation {
		return nil, fmt.Errorf("%s's TunnelEndpoint %s: no Established condition for generation %d: %+v", m.Name, peerID, tep.Generation, cond)
	}
	return cond, nil
}

// mainTable is the IPv4 main routing table of m's real node.
func mainTable(t *testing.T, m *playground.Member) []string {
	t.Helper()
	lines := slices.DeleteFunc(strings.Split(framework.NodeIP(t, m, "-4", "route", "show", "table", "main"), "\n"), func(l string) bool { return strings.TrimSpace(l) == "" })
	slices.Sort(lines)
	return lines
}

// undisturbed checks what an attack by attacker must leave as it was:
// every other cluster's node keeps its main routing table (as before,
// taken before the attack) and stays Ready through heartbeats (renewals
// of its Lease) after the attack took effect, and the tunnels between the
// others stay established.
func undisturbed(t *testing.T, attacker *playground.Member, before map[string][]string) {
	t.Helper()
	var others []*playground.Member
	for _, m := range suite.Members {
		if m != attacker {
			others = append(others, m)
		}
	}
	waitTunnels(t, time.Minute, without(attacker)...)
	for _, m := range others {
		heartbeats(t, m, 2)
		if got := mainTable(t, m); !slices.Equal(got, before[m.Name]) {
			t.Errorf("%s's node: the main routing table changed:\n%s\nwas\n%s", m.Name, strings.Join(got, "\n"), strings.Join(before[m.Name], "\n"))
		}
	}
	waitTunnels(t, 10*time.Second, without(attacker)...)
}

// heartbeats waits until m's real node renewed its Lease n times more,
// and checks it is Ready: the node still reaches its API server.
func heartbeats(t *testing.T, m *playground.Member, n int) {
	t.Helper()
	c := framework.Client(t, m)
	name := m.RealNodeName(0)
	key := client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: name}
	var last time.Time
	seen := -1
	framework.Eventually(t, time.Duration(n+1)*15*time.Second, func() error {
		var lease coordinationv1.Lease
		if err := c.Get(context.Background(), key, &lease); err != nil {
			return err
		}
		if lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(last) {
			seen++
			last = lease.Spec.RenewTime.Time
		}
		if seen < n {
			return fmt.Errorf("node %s of %s: %d of %d heartbeats", name, m.Name, seen, n)
		}
		return nil
	})
	var nd corev1.Node
	if err := c.Get(t.Context(), client.ObjectKey{Name: name}, &nd); err != nil {
		t.Fatal(err)
	}
	for _, cond := range nd.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
			t.Errorf("node %s of %s is not Ready: %s", name, m.Name, cond.Message)
		}
	}
}
