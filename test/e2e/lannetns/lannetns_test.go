// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package lannetns_test checks LAN discovery across a real (virtual) LAN:
// five network namespaces on a bridge, each cluster's mDNS socket in one
// of the first three, so that the only way their packets can meet is the
// bridge; the other two run mDNS implementations this project did not
// write (avahi-daemon; the npm package multicast-dns), which must see the
// clusters and be seen by them.
package lannetns_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/netlab"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

var (
	suite *framework.Suite
	lan   *netlab.LAN
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping end-to-end suite in -short mode")
		return 0
	}
	var err error
	if lan, err = netlab.NewLAN(5); err != nil {
		fmt.Fprintf(os.Stderr, "creating the LAN of network namespaces (needs root and iproute2): %v\n", err)
		return 1
	}
	defer func() {
		if err := lan.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	return framework.Main(m, framework.Options{
		Clusters: 3,
		ControllerManagerArgsFor: func(name string) []string {
			return []string{"--mdns-network-namespace=" + lan.Hosts[index(name)]}
		},
		ClusterConfig: func(_ string, spec *configv1alpha1.ClusterConfigSpec) {
			spec.DiscoveryConfig.MDNSInterface = netlab.Interface
			spec.DiscoveryConfig.MDNSPort = 5353 // the namespaces are the suite's own
			spec.DiscoveryConfig.QueryIntervalSeconds = 1
			spec.DiscoveryConfig.HealthCheckIntervalSeconds = 1
		},
	}, &suite)
}

func index(name string) int {
	for i := range 3 {
		if playground.ClusterName(i+1) == name {
			return i
		}
	}
	panic("unknown cluster " + name)
}

func knows(ctx context.Context, t *testing.T, m, other *playground.Member) error {
	t.Helper()
	fc, err := foreigncluster.Find(ctx, framework.Client(t, m), other.ClusterID)
	if err != nil {
		return err
	}
	if fc == nil {
		return fmt.Errorf("%s does not know %s", m.Name, other.Name)
	}
	if fc.Spec.ForeignAuthURL != other.AuthURL {
		return fmt.Errorf("%s knows %s at %s, want %s", m.Name, other.Name, fc.Spec.ForeignAuthURL, other.AuthURL)
	}
	return nil
}

// TestDiscoveryAcrossNamespaces: every cluster finds the other two over the
// bridge; a host whose bridge port goes down is forgotten, and found again
// when it comes back.
func TestDiscoveryAcrossNamespaces(t *testing.T) {
	for _, m := range suite.Members {
		framework.LogOnFailure(t, m)
		for _, other := range suite.Members {
			if other != m {
				framework.Eventually(t, 10*time.Second, func() error { return knows(t.Context(), t, m, other) })
			}
		}
	}

	cut := suite.Members[2]
	if err := lan.Disconnect(2); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lan.Connect(2) })
	for _, m := range suite.Members[:2] {
		framework.Eventually(t, 20*time.Second, func() error {
			if knows(t.Context(), t, m, cut) == nil {
				return fmt.Errorf("%s still knows %s with its cable pulled", m.Name, cut.Name)
			}
			return nil
		})
	}
	if err := lan.Connect(2); err != nil {
		t.Fatal(err)
	}
	for _, m := range suite.Members[:2] {
		framework.Eventually(t, 10*time.Second, func() error { return knows(t.Context(), t, m, cut) })
	}
}
