// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package gateway

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/liqo-go/liqo/internal/network/ipam"
	"github.com/liqo-go/liqo/internal/network/noderouting"
)

// RouteProtocol marks the routes and rules a gateway installs
// (rtnetlink's protocol field), so that it finds its own among the others
// and leaves theirs.
const RouteProtocol = 0x6c // 'l'

// RouteTable is the routing table of the gateway's routes to the peers'
// ranges, and RulePriority the priority of its first policy rule
// (noderouting.Table).
const (
	RouteTable   = 108
	RulePriority = 31080
)

// routeAgentProtocol marks the route agent's routes (routeagent's
// RouteProtocol; that package imports this one): they are Liqo's, not the
// node's own, when the gateway looks at what the node uses.
const routeAgentProtocol = 0x6d

// routeTable is the gateway's table; port is the tunnel's UDP port, whose
// packets never go into the tunnel (0 when only removing).
func routeTable(port uint16) noderouting.Table {
	return noderouting.Table{ID: RouteTable, Protocol: RouteProtocol, Priority: RulePriority, SourcePort: port}
}

// setUpLink gives the tunnel interface its address (a /32: the gateway's
// own, not a range) and brings it up.
func setUpLink(name string, addr netip.Addr) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("finding the tunnel interface %s: %w", name, err)
	}
	a := &netlink.Addr{IPNet: ipam.IPNet(netip.PrefixFrom(addr, addr.BitLen()))}
	if err := netlink.AddrReplace(link, a); err != nil {
		return fmt.Errorf("addressing %s with %s: %w", name, addr, err)
	}
	// Only one address: a changed external range leaves no stale one.
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("listing the addresses of %s: %w", name, err)
	}
	for _, old := range addrs {
		if !old.IP.Equal(a.IP) {
			if err := netlink.AddrDel(link, &old); err != nil {
				return fmt.Errorf("removing %s from %s: %w", old.IPNet, name, err)
			}
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("bringing %s up: %w", name, err)
	}
	return nil
}

// underlayMTU is the MTU of the link of the default route, or 1500 when
// there is none.
func underlayMTU() int {
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: nil}, 0)
	if err == nil {
		for _, r := range routes {
			if r.Dst != nil && r.Dst.IP != nil && !r.Dst.IP.IsUnspecified() {
				continue
			}
			if link, err := netlink.LinkByIndex(r.LinkIndex); err == nil && link.Attrs().MTU > 0 {
				return link.Attrs().MTU
			}
		}
	}
	return 1500
}
