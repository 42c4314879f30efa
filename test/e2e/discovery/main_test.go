// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package discovery_test checks discovery against three real clusters whose
// controller managers speak mDNS on the loopback interface, on a port of
// the suite's own, and resolve SearchDomains with Debian's dnsmasq (which
// forwards zones to the project's test server and to BIND 9).
package discovery_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/discovery/dnssd/dnstest"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

var suite *framework.Suite

// discoveredAfter holds, for each "member/other" pair, how long after the
// suite was ready the member first had a ForeignCluster for the other.
var discoveredAfter = map[string]time.Duration{}

// The test intervals: one query and one health check per second, so that
// three missed checks take seconds, not minutes.
const interval = time.Second

// zone is the DNS zone the suite's DNS server serves for WAN discovery.
const zone = "liqo.test."

var dnsServer *dnstest.Server

// dnsmasq is the DNS server the controller managers ask: Debian's
// dnsmasq, forwarding zone to dnsServer without caching, and serving
// dnsmasqZone from its own local records, with its default TTL of 0.
var dnsmasq *dnstest.Dnsmasq

// dnsmasqZone is the zone dnsmasq serves itself.
const dnsmasqZone = "dnsmasq.test."

// named is BIND 9 serving bindZone from a zone file; dnsmasq forwards the
// zone to it.
var named *dnstest.Bind

const bindZone = "bind.test."

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if dnsServer, err = dnstest.Start(zone); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer dnsServer.Close()
	if named, err = dnstest.StartBind(bindZone, 30); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer named.Close()
	if dnsmasq, err = dnstest.StartDnsmasq(map[string]string{zone: dnsServer.Addr, bindZone: named.Addr}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer dnsmasq.Close()
	return framework.Main(m, framework.Options{
		ControllerManagerArgs: []string{"--dns-server=" + dnsmasq.Addr},
		Clusters:              3,
		ClusterConfig: func(_ string, spec *configv1alpha1.ClusterConfigSpec) {
			spec.DiscoveryConfig.QueryIntervalSeconds = 1
			spec.DiscoveryConfig.HealthCheckIntervalSeconds = 1
			spec.DiscoveryConfig.MaxMissedHealthChecks = 3
		},
		OnReady: measureFirstDiscovery,
	}, &suite)
}

// measureFirstDiscovery polls every cluster until it has found the others,
// recording when each pair was first seen; it gives up after 30 s.
func measureFirstDiscovery(s *framework.Suite) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(discoveredAfter) < len(s.Members)*(len(s.Members)-1) {
		for _, m := range s.Members {
			c, err := client.New(m.RESTConfig, client.Options{Scheme: api.NewScheme()})
			if err != nil {
				return err
			}
			for _, other := range s.Members {
				key := m.Name + "/" + other.Name
				if _, done := discoveredAfter[key]; done || other == m {
					continue
				}
				if fc, err := foreigncluster.Find(ctx, c, other.ClusterID); err == nil && fc != nil {
					discoveredAfter[key] = time.Since(s.ReadyAt)
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("clusters did not all find each other: found %v", discoveredAfter)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

func member(i int) *playground.Member { return suite.Members[i] }

// foreignClusterOf returns m's ForeignCluster for other, or an error saying
// why there is none.
func foreignClusterOf(t *testing.T, m, other *playground.Member) (*discoveryv1alpha1.ForeignCluster, error) {
	t.Helper()
	fc, err := foreigncluster.Find(t.Context(), framework.Client(t, m), other.ClusterID)
	if err != nil {
		return nil, err
	}
	if fc == nil {
		return nil, fmt.Errorf("%s has no ForeignCluster for %s", m.Name, other.Name)
	}
	return fc, nil
}

// setDiscovery patches a member's discovery switches, and puts them back
// as they were when the test ends.
func setDiscovery(t *testing.T, m *playground.Member, mutate func(*configv1alpha1.DiscoveryConfig)) {
	t.Helper()
	c := framework.Client(t, m)
	var cfg configv1alpha1.ClusterConfig
	if err := c.Get(t.Context(), client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cfg); err != nil {
		t.Fatal(err)
	}
	before := cfg.Spec.DiscoveryConfig
	framework.SetClusterConfig(t, m, func(s *configv1alpha1.ClusterConfigSpec) { mutate(&s.DiscoveryConfig) })
	t.Cleanup(func() {
		// t.Context() is already cancelled in cleanups.
		var now configv1alpha1.ClusterConfig
		if err := c.Get(context.Background(), client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &now); err != nil {
			t.Errorf("restoring the ClusterConfig of %s: %v", m.Name, err)
			return
		}
		patch := client.MergeFrom(now.DeepCopy())
		now.Spec.DiscoveryConfig = before
		if err := c.Patch(context.Background(), &now, patch); err != nil {
			t.Errorf("restoring the ClusterConfig of %s: %v", m.Name, err)
		}
	})
}

func enable(b bool) *bool { return ptr.To(b) }

func controllerManagerRunning(m *playground.Member) bool {
	for _, p := range m.Processes() {
		if p.Name == playground.ControllerManager {
			return !p.Exited()
		}
	}
	return false
}

// joinedForeignCluster says whether c has a ForeignCluster for id with
// join set, and why not otherwise.
func joinedForeignCluster(t *testing.T, c client.Client, id string) error {
	t.Helper()
	fc, err := foreigncluster.Find(t.Context(), c, id)
	if err != nil {
		return err
	}
	if fc == nil {
		return fmt.Errorf("no ForeignCluster for %s yet", id)
	}
	if !fc.Spec.Join {
		return fmt.Errorf("the ForeignCluster for %s has join=false", id)
	}
	return nil
}
