// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package translation maps addresses between this cluster and a peer, as
// the two agreed in the peer's TunnelEndpoint: an address of the peer
// (its pod's, say) to the address this cluster reaches it at, and an
// address of this cluster to the one the peer reaches it at. The virtual
// kubelet shows translated addresses, so that a workload reaches what it
// reads in its own cluster's API.
package translation

import (
	"context"
	"net/netip"

	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/network/ipam"
)

// FromPeer returns how this cluster sees addr, an address of the peer of
// tep (in its pod or external range, as the peer has them). ok is false
// until the two sides agreed (the peer answered how it sees this
// cluster: before that no tunnel can carry anything, and the address is
// shown as the peer has it), and when addr is in neither range.
func FromPeer(tep *netv1alpha1.TunnelEndpoint, addr netip.Addr) (netip.Addr, bool) {
	if tep.Spec.LocalSeenAs == nil {
		return netip.Addr{}, false
	}
	return translate(addr, tep.Spec.Remote, tep.Spec.RemoteSeenAs)
}

// FromPeers returns FromPeer for any peer, reading the peers'
// TunnelEndpoints from r (a cache): false where there is none.
func FromPeers(r client.Reader) func(ctx context.Context, peerID string, addr netip.Addr) (netip.Addr, bool) {
	return func(ctx context.Context, peerID string, addr netip.Addr) (netip.Addr, bool) {
		var tep netv1alpha1.TunnelEndpoint
		if err := r.Get(ctx, client.ObjectKey{Name: peerID}, &tep); err != nil {
			return netip.Addr{}, false
		}
		return FromPeer(&tep, addr)
	}
}

// Agreed returns, for any peer, whether the two sides agreed on the
// network (the peer answered how it sees this cluster), reading the
// peers' TunnelEndpoints from r (a cache).
func Agreed(r client.Reader) func(ctx context.Context, peerID string) bool {
	return func(ctx context.Context, peerID string) bool {
		var tep netv1alpha1.TunnelEndpoint
		return r.Get(ctx, client.ObjectKey{Name: peerID}, &tep) == nil && tep.Spec.LocalSeenAs != nil
	}
}

// ToPeers returns ToPeer for any peer, reading the peers' TunnelEndpoints
// from r (a cache): false where there is none.
func ToPeers(r client.Reader) func(ctx context.Context, peerID string, addr netip.Addr) (netip.Addr, bool) {
	return func(ctx context.Context, peerID string, addr netip.Addr) (netip.Addr, bool) {
		var tep netv1alpha1.TunnelEndpoint
		if err := r.Get(ctx, client.ObjectKey{Name: peerID}, &tep); err != nil {
			return netip.Addr{}, false
		}
		return ToPeer(&tep, addr)
	}
}

// ToPeer returns how the peer of tep sees addr, an address of this
// cluster's pod or external range. ok is false when the peer has not
// answered yet, or addr is in neither range.
func ToPeer(tep *netv1alpha1.TunnelEndpoint, addr netip.Addr) (netip.Addr, bool) {
	if tep.Spec.Local == nil || tep.Spec.LocalSeenAs == nil {
		return netip.Addr{}, false
	}
	return translate(addr, *tep.Spec.Local, *tep.Spec.LocalSeenAs)
}

func translate(addr netip.Addr, from, to netv1alpha1.Ranges) (netip.Addr, bool) {
	for _, pair := range [][2]string{{from.PodCIDR, to.PodCIDR}, {from.ExternalCIDR, to.ExternalCIDR}} {
		f, err1 := netip.ParsePrefix(pair[0])
		t, err2 := netip.ParsePrefix(pair[1])
		if err1 != nil || err2 != nil {
			continue
		}
		if out, ok := ipam.Translate(addr.Unmap(), f, t); ok {
			return out, true
		}
	}
	return netip.Addr{}, false
}

// Peers shows addresses across the boundary with each peer as their
// TunnelEndpoint says (a virtual kubelet's provider.Addresses).
type Peers struct {
	// Reader reads the TunnelEndpoints.
	Reader client.Reader
}

// FromProvider shows a peer's address as this cluster reaches it.
func (p Peers) FromProvider(ctx context.Context, peerID string, addr netip.Addr) (netip.Addr, bool) {
	return FromPeers(p.Reader)(ctx, peerID, addr)
}

// ToProvider shows a local address as the peer reaches it.
func (p Peers) ToProvider(ctx context.Context, peerID string, addr netip.Addr) (netip.Addr, bool) {
	return ToPeers(p.Reader)(ctx, peerID, addr)
}

// Agreed says whether this cluster and the peer agreed on their views.
func (p Peers) Agreed(ctx context.Context, peerID string) bool {
	return Agreed(p.Reader)(ctx, peerID)
}
