// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package ipam is the address arithmetic of the network fabric: whether
// two ranges overlap, how an address maps between a range and the range a
// peer is remapped to (prefix NAT, netmap: the host bits are kept, the
// network bits replaced), and the choice of a free range of a given size
// from a pool, away from every range in use. It holds no state: callers
// keep their choices in API objects, so a choice survives a restart.
package ipam

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
)

// Overlaps says whether a and b share an address. Prefixes of different
// families never overlap.
func Overlaps(a, b netip.Prefix) bool {
	return a.IsValid() && b.IsValid() && a.Overlaps(b)
}

// Translate maps addr, an address of from, to the address with the same
// host bits in to: the mapping prefix NAT (nftables "snat ip prefix to",
// iptables NETMAP) makes. from and to must be masked prefixes of the same
// family and length; ok is false when they are not or addr is not in from.
func Translate(addr netip.Addr, from, to netip.Prefix) (netip.Addr, bool) {
	if !from.IsValid() || !to.IsValid() || from.Bits() != to.Bits() || from.Addr().Is4() != to.Addr().Is4() ||
		from != from.Masked() || to != to.Masked() || !from.Contains(addr) {
		return netip.Addr{}, false
	}
	a, t := addr.As16(), to.Addr().As16()
	bits := from.Bits()
	if from.Addr().Is4() {
		bits += 96
	}
	for i := range a {
		// The network bits of this byte: the leading ones of the mask.
		n := min(max(bits-8*i, 0), 8)
		mask := byte(0xff << (8 - n))
		a[i] = a[i]&^mask | t[i]&mask
	}
	out := netip.AddrFrom16(a)
	if from.Addr().Is4() {
		out = out.Unmap()
	}
	return out, true
}

// Last is the last address of p (its broadcast address in IPv4).
func Last(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As16()
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	for i := range a {
		n := min(max(bits-8*i, 0), 8)
		a[i] |= ^byte(0xff << (8 - n))
	}
	out := netip.AddrFrom16(a)
	if p.Addr().Is4() {
		out = out.Unmap()
	}
	return out
}

// ErrPoolExhausted is returned by Allocate when no range of the size asked
// is free in the pool.
var ErrPoolExhausted = errors.New("no free range of that size in the remapping pool")

// Allocate picks the first range of bits length in pool (in the order of
// pool, lowest address first) that overlaps none of used nor Special. It returns
// ErrPoolExhausted, wrapped with the size asked, when there is none.
func Allocate(pool []netip.Prefix, bits int, used []netip.Prefix) (netip.Prefix, error) {
	used = append(slices.Clip(used), Special...)
	for _, p := range pool {
		p = p.Masked()
		if bits < p.Bits() || bits > p.Addr().BitLen() {
			continue
		}
		for candidate := netip.PrefixFrom(p.Addr(), bits); candidate.IsValid() && p.Contains(candidate.Addr()); {
			blocker := firstOverlap(candidate, used)
			if !blocker.IsValid() {
				return candidate, nil
			}
			// Skip past whatever is in the way: the end of the blocking
			// range or of the candidate, whichever is further.
			end := Last(candidate)
			if l := Last(blocker); end.Less(l) {
				end = l
			}
			next := end.Next()
			if !next.IsValid() {
				break
			}
			candidate = netip.PrefixFrom(next, bits).Masked()
			if candidate.Addr().Less(next) {
				// next is not aligned on the size: move to the next
				// aligned range.
				candidate = netip.PrefixFrom(Last(candidate).Next(), bits)
			}
		}
	}
	return netip.Prefix{}, fmt.Errorf("a /%d: %w", bits, ErrPoolExhausted)
}

func firstOverlap(p netip.Prefix, used []netip.Prefix) netip.Prefix {
	for _, u := range used {
		if Overlaps(p, u.Masked()) {
			return u.Masked()
		}
	}
	return netip.Prefix{}
}

// ParsePrefixes parses CIDRs, naming the first that is not one.
func ParsePrefixes(cidrs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR: %w", c, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// DefaultPool is where remapped ranges are taken from when the cluster
// configuration names no pool: the private IPv4 ranges of RFC 1918.
var DefaultPool = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
}

// Special are the IPv4 ranges no peer is ever seen in, stated or
// remapped: "this network" (0.0.0.0/8), loopback, link-local, multicast,
// and the reserved and broadcast block (RFC 6890). Remap and Allocate
// keep away from them whatever the pool says.
var Special = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// Within says whether p lies whole inside one of ranges.
func Within(p netip.Prefix, ranges []netip.Prefix) bool {
	return p.IsValid() && slices.ContainsFunc(ranges, func(r netip.Prefix) bool {
		return r.IsValid() && r.Bits() <= p.Bits() && r.Masked().Contains(p.Addr())
	})
}

// Remap decides how a peer's range is seen locally. A peer states its
// ranges and is a stranger, so what it states is used as it is only when
// that can harm nothing here: the range lies inside pool and inside the
// private ranges of RFC 1918 (DefaultPool; never a public, loopback,
// link-local or multicast range), and overlaps none of used (this
// cluster's ranges and addresses, its nodes' routes, the reserved
// subnets, the other peers' ranges and endpoints). Anything else is seen
// as a range of the same size allocated from pool, away from used and
// from Special. A previous choice that still meets those rules is kept,
// so a decision is stable across restarts and reconciles.
//
// Whatever the inputs, a range Remap returns lies inside pool, overlaps
// nothing of used or Special, and has the size of peer.
func Remap(peer, previous netip.Prefix, pool, used []netip.Prefix) (netip.Prefix, error) {
	peer = peer.Masked()
	used = append(slices.Clip(used), Special...)
	free := func(p netip.Prefix) bool {
		return p.IsValid() && p.Addr().Is4() == peer.Addr().Is4() && p.Bits() == peer.Bits() &&
			Within(p, pool) && !firstOverlap(p, used).IsValid()
	}
	asStated := free(peer) && Within(peer, DefaultPool)
	if previous = previous.Masked(); free(previous) && (previous != peer || asStated) {
		return previous, nil
	}
	if asStated {
		return peer, nil
	}
	return Allocate(pool, peer.Bits(), used)
}

// IPNet is p as the net package (and netlink) spell a range.
func IPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Masked().Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// FromIPNet is n as a prefix, masked; false when n is nil or invalid.
func FromIPNet(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones).Masked(), true
}
