// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package routeagent

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/liqo-go/liqo/internal/network/ipam"
)

// RouteProtocol marks the routes the route agent installs (rtnetlink's
// protocol field), apart from the gateway's (gateway.RouteProtocol) and
// everyone else's: it finds and removes its own, and only those.
const RouteProtocol = netlink.RouteProtocol(0x6d) // 'm'

// Sync makes the route agent's routes in this network namespace exactly
// one per range, each through gw. With no valid gw, or a gw that is an
// address of this node (the gateway runs here and routes the ranges into
// its tunnel itself), it removes them all. It reports whether routes
// through gw are in place.
func Sync(gw netip.Addr, ranges []netip.Prefix) (bool, error) {
	local, err := isLocal(gw)
	if err != nil {
		return false, err
	}
	want := map[netip.Prefix]bool{}
	var errs []error
	if gw.Is4() && !local {
		for _, p := range ranges {
			if !p.Addr().Is4() {
				continue
			}
			want[p.Masked()] = true
			r := &netlink.Route{Dst: ipam.IPNet(p), Gw: net.IP(gw.AsSlice()), Protocol: RouteProtocol}
			if err := netlink.RouteReplace(r); err != nil {
				errs = append(errs, fmt.Errorf("route to %s via the gateway's node %s: %w", p, gw, err))
			}
		}
	}
	have, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return false, fmt.Errorf("listing the route agent's routes: %w", err)
	}
	for _, r := range have {
		if p, ok := ipam.FromIPNet(r.Dst); ok && want[p] && r.Gw.Equal(net.IP(gw.AsSlice())) {
			continue
		}
		if err := netlink.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("removing the route to %s via %s: %w", r.Dst, r.Gw, err))
		}
	}
	return len(want) > 0 && len(errs) == 0, errors.Join(errs...)
}

// isLocal says whether a is an address of an interface in this namespace.
func isLocal(a netip.Addr) (bool, error) {
	if !a.IsValid() {
		return false, nil
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return false, fmt.Errorf("listing this node's addresses: %w", err)
	}
	for _, x := range addrs {
		if y, ok := netip.AddrFromSlice(x.IP); ok && y.Unmap() == a.Unmap() {
			return true, nil
		}
	}
	return false, nil
}
