// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package routeagent

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/liqo-go/liqo/internal/network/gateway"
	"github.com/liqo-go/liqo/internal/network/noderouting"
)

// RouteProtocol marks the routes and rules the route agent installs
// (rtnetlink's protocol field), apart from the gateway's
// (gateway.RouteProtocol) and everyone else's: it finds and removes its
// own, and only those.
const RouteProtocol = 0x6d // 'm'

// RouteTable is the routing table of the route agent's routes, and
// RulePriority the priority of its first policy rule (noderouting.Table):
// the node's own routes always win over them.
const (
	RouteTable   = 109
	RulePriority = 31090
)

var table = noderouting.Table{ID: RouteTable, Protocol: RouteProtocol, Priority: RulePriority}

// Sync makes the route agent's routes in this network namespace exactly
// one per range, each via gw, in its own table. With no valid gw, or a gw
// that is an address of this node (the gateway runs here and routes the
// ranges into its tunnel itself), it removes them all. A range that
// overlaps what the node uses (its addresses, its main table's routes) is
// not routed, and named in the error; the others are. It reports whether
// routes via gw are in place.
func Sync(gw netip.Addr, ranges []netip.Prefix) (bool, error) {
	local, err := isLocal(gw)
	if err != nil {
		return false, err
	}
	var routes []noderouting.Route
	var errs []error
	if gw.Is4() && !local {
		inUse, err := noderouting.InUse(RouteProtocol, gateway.RouteProtocol)
		if err != nil {
			return false, err
		}
		for _, p := range ranges {
			if !p.Addr().Is4() {
				continue
			}
			if c, ok := noderouting.Conflict(p, inUse); ok {
				errs = append(errs, fmt.Errorf("%s is not routed: it overlaps %s, which this node uses", p, c))
				continue
			}
			routes = append(routes, noderouting.Route{Dst: p, Gw: gw})
		}
	}
	if err := table.Sync(routes); err != nil {
		errs = append(errs, fmt.Errorf("routes via the gateway's node %s: %w", gw, err))
	}
	return len(routes) > 0 && len(errs) == 0, errors.Join(errs...)
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
