// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/liqo-go/liqo/internal/network/ipam"
)

// RouteProtocol marks the routes a gateway installs (rtnetlink's protocol
// field), so that it finds its own among the others and leaves theirs.
const RouteProtocol = netlink.RouteProtocol(0x6c) // 'l'

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

// syncRoutes makes the routes through the tunnel interface exactly want,
// each with the gateway's tunnel address as the source it prefers.
func syncRoutes(name string, src netip.Addr, want []netip.Prefix) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("finding the tunnel interface %s: %w", name, err)
	}
	have, err := netlink.RouteListFiltered(netlink.FAMILY_V4,
		&netlink.Route{LinkIndex: link.Attrs().Index, Protocol: RouteProtocol},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("listing the routes through %s: %w", name, err)
	}
	wanted := map[netip.Prefix]bool{}
	var errs []error
	for _, p := range want {
		wanted[p.Masked()] = true
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipam.IPNet(p), Src: net.IP(src.AsSlice()),
			Scope: netlink.SCOPE_LINK, Protocol: RouteProtocol}
		if err := netlink.RouteReplace(r); err != nil {
			errs = append(errs, fmt.Errorf("route to %s through %s: %w", p, name, err))
		}
	}
	for _, r := range have {
		p, ok := ipam.FromIPNet(r.Dst)
		if ok && wanted[p] {
			continue
		}
		if err := netlink.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("removing the route to %s through %s: %w", r.Dst, name, err))
		}
	}
	return errors.Join(errs...)
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
