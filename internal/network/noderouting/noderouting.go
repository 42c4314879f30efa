// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package noderouting puts the routes to the peers' ranges on a node
// where they can never replace or shadow the node's own. They live in a
// routing table of their own, and two policy rules per range send
// traffic for that range first to the main table, with its default route
// left out (suppress_prefixlength 0), then to Liqo's table: a route of
// the node for any part of a peer's range (its own subnet, say) always
// wins over the peer's, and the peer's route only takes what would have
// left by the default route. The peers' ranges are checked against what
// the node already uses (InUse) before they are routed at all; this is
// what remains true when a check was wrong.
//
// The gateway and the route agent each own one Table; each finds its
// routes and rules again by their protocol number, and removes them and
// only them.
package noderouting

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/liqo-go/liqo/internal/network/ipam"
)

// Table is one component's routing table and rules.
type Table struct {
	// ID is the routing table's number.
	ID int
	// Protocol marks the table's routes and rules (rtnetlink's protocol
	// field, a byte): what carries it is this component's, and nothing
	// else is.
	Protocol uint8
	// Priority is that of the rule that consults the main table first;
	// the rule to the table is at Priority+1. Rules of other software at
	// lower numbers run before them.
	Priority int
	// SourcePort, when set, is the UDP port of the tunnel's own socket:
	// a rule at Priority-1 sends what leaves from it to the main table
	// whole, so that the tunnel's encrypted packets never go into the
	// tunnel, whatever a peer's range covers (a peer's gateway's own
	// address, say). A mark would do the same, but marks are shared
	// with kube-proxy and the CNI, which give their bits meanings.
	SourcePort uint16
}

// Route is a route to one of the peers' ranges: through an interface (the
// tunnel), or via a next hop (the gateway's node).
type Route struct {
	Dst netip.Prefix
	// LinkIndex is the interface, for a route through one.
	LinkIndex int
	// Gw is the next hop, for a route via one.
	Gw netip.Addr
	// Src is the source address preferred, if any.
	Src netip.Addr
}

func (t Table) route(r Route) *netlink.Route {
	out := &netlink.Route{Dst: ipam.IPNet(r.Dst), Table: t.ID, Protocol: netlink.RouteProtocol(t.Protocol), LinkIndex: r.LinkIndex}
	if r.Gw.IsValid() {
		out.Gw = net.IP(r.Gw.AsSlice())
	} else {
		out.Scope = netlink.SCOPE_LINK
	}
	if r.Src.IsValid() {
		out.Src = net.IP(r.Src.AsSlice())
	}
	return out
}

// rules are the policy rules for dst.
func (t Table) rules(dst netip.Prefix) []*netlink.Rule {
	var out []*netlink.Rule
	if t.SourcePort != 0 {
		tunnel := netlink.NewRule()
		tunnel.Family, tunnel.Priority, tunnel.Table, tunnel.Dst = unix.AF_INET, t.Priority-1, unix.RT_TABLE_MAIN, ipam.IPNet(dst)
		tunnel.IPProto, tunnel.Sport = unix.IPPROTO_UDP, netlink.NewRulePortRange(t.SourcePort, t.SourcePort)
		tunnel.Protocol = t.Protocol
		out = append(out, tunnel)
	}
	main := netlink.NewRule()
	main.Family, main.Priority, main.Table, main.Dst = unix.AF_INET, t.Priority, unix.RT_TABLE_MAIN, ipam.IPNet(dst)
	main.SuppressPrefixlen, main.Protocol = 0, t.Protocol
	own := netlink.NewRule()
	own.Family, own.Priority, own.Table, own.Dst = unix.AF_INET, t.Priority+1, t.ID, ipam.IPNet(dst)
	own.Protocol = t.Protocol
	return append(out, main, own)
}

// Sync makes the table's routes and rules exactly routes, in the
// network namespace of the process. Routes of the table's protocol left
// in the main table by a version that put them there go too.
func (t Table) Sync(routes []Route) error {
	var errs []error
	want := map[netip.Prefix]bool{}
	for _, r := range routes {
		r.Dst = r.Dst.Masked()
		if err := netlink.RouteReplace(t.route(r)); err != nil {
			// No rule either: a rule to a table without the route would
			// send the range on to the main table's default route.
			errs = append(errs, fmt.Errorf("route to %s in table %d: %w", r.Dst, t.ID, err))
			continue
		}
		want[r.Dst] = true
	}
	have, err := t.ownRoutes()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, r := range have {
		if p, ok := ipam.FromIPNet(r.Dst); ok && want[p] && r.Table == t.ID {
			continue
		}
		if err := netlink.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("removing the route to %s from table %d: %w", r.Dst, r.Table, err))
		}
	}
	// Rules after routes: a rule to a table without the route would send
	// the range's traffic on to the main table's default route.
	rules, err := t.ownRules()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	present := map[string]bool{}
	for _, r := range rules {
		p, ok := ipam.FromIPNet(r.Dst)
		if ok && want[p] && slices.ContainsFunc(t.rules(p), func(w *netlink.Rule) bool { return sameRule(w, &r) }) {
			present[ruleKey(r.Priority, p)] = true
			continue
		}
		if err := netlink.RuleDel(&r); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("removing the rule for %s: %w", r.Dst, err))
		}
	}
	for p := range want {
		for _, r := range t.rules(p) {
			if present[ruleKey(r.Priority, p)] {
				continue
			}
			if err := netlink.RuleAdd(r); err != nil && !errors.Is(err, unix.EEXIST) {
				errs = append(errs, fmt.Errorf("adding the rule for %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Remove deletes the table's routes and rules.
func (t Table) Remove() error { return t.Sync(nil) }

func ruleKey(priority int, p netip.Prefix) string { return fmt.Sprint(priority, p) }

// sameRule says whether have, listed from the kernel, is want.
func sameRule(want, have *netlink.Rule) bool {
	return want.Priority == have.Priority && want.Table == have.Table &&
		want.SuppressPrefixlen == have.SuppressPrefixlen && want.IPProto == have.IPProto &&
		(want.Sport == nil) == (have.Sport == nil) && (want.Sport == nil || *want.Sport == *have.Sport)
}

// ownRoutes lists the routes of the table's protocol in every table.
func (t Table) ownRoutes() ([]netlink.Route, error) {
	have, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC, Protocol: netlink.RouteProtocol(t.Protocol)},
		netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return nil, fmt.Errorf("listing the routes of protocol %d: %w", t.Protocol, err)
	}
	return have, nil
}

// ownRules lists the rules of the table's protocol.
func (t Table) ownRules() ([]netlink.Rule, error) {
	all, err := netlink.RuleList(netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("listing the policy rules: %w", err)
	}
	return slices.DeleteFunc(all, func(r netlink.Rule) bool { return r.Protocol != t.Protocol }), nil
}

// InUse is what the node already uses, which no peer's range may
// overlap: every IPv4 address of its interfaces (as a /32) and every
// route of its main table but the default route and the routes of the
// protocols named (Liqo's own, of an earlier version).
func InUse(own ...uint8) ([]netip.Prefix, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("listing the node's addresses: %w", err)
	}
	var out []netip.Prefix
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, netip.PrefixFrom(ip.Unmap(), 32))
		}
	}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("listing the node's routes: %w", err)
	}
	for _, r := range routes {
		p, ok := ipam.FromIPNet(r.Dst)
		if !ok || p.Bits() == 0 || slices.Contains(own, uint8(r.Protocol)) { //nolint:gosec // rtnetlink's protocol is a byte
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// Conflict is the first of inUse that p overlaps.
func Conflict(p netip.Prefix, inUse []netip.Prefix) (netip.Prefix, bool) {
	i := slices.IndexFunc(inUse, func(u netip.Prefix) bool { return ipam.Overlaps(p, u) })
	if i < 0 {
		return netip.Prefix{}, false
	}
	return inUse[i], true
}
