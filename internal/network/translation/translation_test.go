// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package translation

import (
	"net/netip"
	"testing"

	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
)

func TestTranslation(t *testing.T) {
	tep := &netv1alpha1.TunnelEndpoint{Spec: netv1alpha1.TunnelEndpointSpec{
		Remote:       netv1alpha1.Ranges{PodCIDR: "10.100.0.0/14", ExternalCIDR: "10.70.0.0/16"},
		RemoteSeenAs: netv1alpha1.Ranges{PodCIDR: "10.0.0.0/14", ExternalCIDR: "10.4.0.0/16"},
	}}
	if got, ok := FromPeer(tep, netip.MustParseAddr("10.100.16.3")); ok {
		t.Errorf("FromPeer before the peer answered = %s", got)
	}
	if got, ok := ToPeer(tep, netip.MustParseAddr("10.100.0.5")); ok {
		t.Errorf("ToPeer before the peer answered = %s", got)
	}
	tep.Spec.Local = &netv1alpha1.Ranges{PodCIDR: "10.100.0.0/14", ExternalCIDR: "10.70.0.0/16"}
	tep.Spec.LocalSeenAs = &netv1alpha1.Ranges{PodCIDR: "10.8.0.0/14", ExternalCIDR: "10.12.0.0/16"}
	for in, want := range map[string]string{"10.100.16.3": "10.0.16.3", "10.103.255.1": "10.3.255.1", "10.70.0.1": "10.4.0.1", "192.168.1.1": ""} {
		got, ok := FromPeer(tep, netip.MustParseAddr(in))
		if want == "" {
			if ok {
				t.Errorf("FromPeer(%s) = %s, want none", in, got)
			}
			continue
		}
		if !ok || got != netip.MustParseAddr(want) {
			t.Errorf("FromPeer(%s) = %s, %v; want %s", in, got, ok, want)
		}
	}
	for in, want := range map[string]string{"10.100.0.5": "10.8.0.5", "10.70.0.1": "10.12.0.1"} {
		if got, ok := ToPeer(tep, netip.MustParseAddr(in)); !ok || got != netip.MustParseAddr(want) {
			t.Errorf("ToPeer(%s) = %s, %v; want %s", in, got, ok, want)
		}
	}
}
