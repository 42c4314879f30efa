// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package playground

import (
	"net/netip"
	"testing"

	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/network/ipam"
)

// TestPodRange: with distinct pod ranges, the most clusters Options allows
// and the broker each get a range no other cluster's, the Service range or
// the underlay overlaps; without, every cluster has the shared one.
func TestPodRange(t *testing.T) {
	fixed := []netip.Prefix{netip.MustParsePrefix(localcluster.ServiceCIDR), netip.MustParsePrefix(localcluster.UnderlayCIDR)}
	var seen []netip.Prefix
	o := Options{Clusters: 10, DistinctPodRanges: true}
	for i := range o.Clusters + 1 {
		p, err := netip.ParsePrefix(o.podRange(i))
		if err != nil || p.Bits() != 14 || p.Masked() != p {
			t.Fatalf("cluster %d: range %q (%v), want a /14", i, o.podRange(i), err)
		}
		for _, q := range append(fixed, seen...) {
			if ipam.Overlaps(p, q) {
				t.Errorf("cluster %d: range %s overlaps %s", i, p, q)
			}
		}
		seen = append(seen, p)
	}
	shared := Options{Clusters: 3}
	for i := range shared.Clusters + 1 {
		if got := shared.podRange(i); got != localcluster.PodCIDR {
			t.Errorf("shared ranges, cluster %d: %s, want %s", i, got, localcluster.PodCIDR)
		}
	}
}
