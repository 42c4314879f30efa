// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package localcluster

import (
	"net/netip"
	"testing"
)

// TestClusterDNSAddress: the cluster DNS is at the tenth address of the
// service range, as kubeadm puts it, whatever the range.
func TestClusterDNSAddress(t *testing.T) {
	if ClusterDNSAddress != "10.96.0.10" {
		t.Errorf("ClusterDNSAddress = %s for %s, want 10.96.0.10", ClusterDNSAddress, ServiceCIDR)
	}
	for prefix, want := range map[string]string{"10.43.0.0/16": "10.43.0.10", "172.20.16.0/20": "172.20.16.10", "10.0.0.255/24": "10.0.0.10", "fd00::/108": "fd00::a"} {
		if got := nthAddress(netip.MustParsePrefix(prefix), 10).String(); got != want {
			t.Errorf("nthAddress(%s, 10) = %s, want %s", prefix, got, want)
		}
	}
}
