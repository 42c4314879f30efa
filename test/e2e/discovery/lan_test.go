// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package discovery_test

import (
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestEachClusterSeesTheOthers: every cluster has a ForeignCluster for each
// of the other two, with the right identity and auth URL, found within 2 s
// of the last controller manager being ready (measured before any test ran,
// by measureFirstDiscovery).
func TestEachClusterSeesTheOthers(t *testing.T) {
	for pair, took := range discoveredAfter {
		t.Logf("%s: found %s after the suite was ready", pair, took.Round(time.Millisecond))
		if took > 2*time.Second {
			t.Errorf("%s: found after %s, want under 2 s", pair, took)
		}
	}
	for _, m := range suite.Members {
		framework.LogOnFailure(t, m)
		for _, other := range suite.Members {
			if other == m {
				continue
			}
			var fc *discoveryv1alpha1.ForeignCluster
			framework.Eventually(t, 10*time.Second, func() (err error) {
				fc, err = foreignClusterOf(t, m, other)
				return err
			})
			if fc.Spec.ClusterIdentity.ClusterName != other.Name || fc.Spec.ForeignAuthURL != other.AuthURL {
				t.Errorf("%s's ForeignCluster for %s: name %q, auth URL %q; want %q, %q", m.Name, other.Name,
					fc.Spec.ClusterIdentity.ClusterName, fc.Spec.ForeignAuthURL, other.Name, other.AuthURL)
			}
		}
		// Other tests announce clusters of their own on the shared mDNS
		// port, and those age out on their own schedule: count only the
		// suite's clusters, by identity.
		for _, other := range suite.Members {
			var list discoveryv1alpha1.ForeignClusterList
			if err := framework.Client(t, m).List(t.Context(), &list,
				client.MatchingLabels{discoveryv1alpha1.ClusterIDLabel: other.ClusterID}); err != nil {
				t.Fatal(err)
			}
			want := 1
			if other == m {
				want = 0
			}
			if len(list.Items) != want {
				t.Errorf("%s has %d ForeignClusters for %s, want %d (one per other cluster, none for itself)", m.Name, len(list.Items), other.Name, want)
			}
		}
	}
}

// TestAdvertisementSwitch: a cluster that stops advertising is deleted by
// the others after three missed checks, and comes back when it advertises
// again.
func TestAdvertisementSwitch(t *testing.T) {
	quiet, a, b := member(2), member(0), member(1)
	framework.LogOnFailure(t, quiet, a, b)
	for _, m := range []*playground.Member{a, b} {
		framework.Eventually(t, 10*time.Second, func() error { return seenByMDNS(t, m, quiet) })
	}

	// The clock starts before the switch: advertising may stop before
	// setDiscovery has seen the change applied, and the lower bound below
	// must count from the earliest moment it could have stopped.
	stopped := time.Now()
	setDiscovery(t, quiet, func(d *configv1alpha1.DiscoveryConfig) { d.EnableAdvertisement = enable(false) })
	for _, m := range []*playground.Member{a, b} {
		framework.Eventually(t, 20*time.Second, func() error {
			if _, err := foreignClusterOf(t, m, quiet); err == nil {
				return fmt.Errorf("%s still has %s", m.Name, quiet.Name)
			}
			return nil
		})
		took := time.Since(stopped)
		t.Logf("%s forgot %s %s after it stopped advertising", m.Name, quiet.Name, took.Round(time.Millisecond))
		// Three checks must have been missed: not gone before three intervals.
		if took < 3*interval {
			t.Errorf("%s forgot %s after %s, before three missed checks", m.Name, quiet.Name, took)
		}
	}

	setDiscovery(t, quiet, func(d *configv1alpha1.DiscoveryConfig) { d.EnableAdvertisement = enable(true) })
	for _, m := range []*playground.Member{a, b} {
		framework.Eventually(t, 5*time.Second, func() error { return seenByMDNS(t, m, quiet) })
	}
}

// TestDiscoverySwitch: with enableDiscovery off, no new ForeignCluster
// appears; on again, they come back.
func TestDiscoverySwitch(t *testing.T) {
	m := member(0)
	framework.LogOnFailure(t, m)
	c := framework.Client(t, m)
	setDiscovery(t, m, func(d *configv1alpha1.DiscoveryConfig) { d.EnableDiscovery = enable(false) })
	framework.Eventually(t, 5*time.Second, func() error {
		if v := framework.Metric(t, m, "liqo_discovery_mdns_browsing", nil); v != 0 {
			return fmt.Errorf("still browsing (liqo_discovery_mdns_browsing=%v)", v)
		}
		return nil
	})
	if err := c.DeleteAllOf(t.Context(), &discoveryv1alpha1.ForeignCluster{}); err != nil {
		t.Fatal(err)
	}
	// For five query intervals, nothing may come back.
	framework.Consistently(t, 5*interval, func() error {
		var list discoveryv1alpha1.ForeignClusterList
		if err := c.List(t.Context(), &list); err != nil {
			return err
		}
		if len(list.Items) != 0 {
			return fmt.Errorf("with discovery off, %s recorded %s", m.Name, list.Items[0].Spec.ClusterIdentity.ClusterName)
		}
		return nil
	})

	setDiscovery(t, m, func(d *configv1alpha1.DiscoveryConfig) { d.EnableDiscovery = enable(true) })
	framework.Eventually(t, 5*time.Second, func() error {
		if v := framework.Metric(t, m, "liqo_discovery_mdns_browsing", nil); v != 1 {
			return fmt.Errorf("not browsing (liqo_discovery_mdns_browsing=%v)", v)
		}
		return nil
	})
	for _, other := range suite.Members[1:] {
		framework.Eventually(t, 5*time.Second, func() error { _, err := foreignClusterOf(t, m, other); return err })
	}
}

// seenByMDNS says whether m's ForeignCluster for other records a current
// mDNS sighting.
func seenByMDNS(t *testing.T, m, other *playground.Member) error {
	t.Helper()
	fc, err := foreignClusterOf(t, m, other)
	if err != nil {
		return err
	}
	for _, s := range fc.Status.Sources {
		if s.Name == "mdns" && s.MissedChecks == 0 {
			return nil
		}
	}
	return fmt.Errorf("%s's ForeignCluster for %s has no current mDNS sighting: %+v", m.Name, other.Name, fc.Status.Sources)
}
