// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package noderouting

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/liqo-go/liqo/internal/netlab"
	"github.com/liqo-go/liqo/internal/testenv"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// TestPeerRoutesNeverShadowTheNodes: in a namespace whose main table has
// a default route, a subnet of its own and a route to part of what a
// peer's range covers, the table's routes take only what would have left
// by the default route: the node's routes keep their traffic, the main
// table is not changed, the tunnel's own UDP packets never go into the
// table, and Remove leaves nothing of the table's, another table's
// routes and rules included.
func TestPeerRoutesNeverShadowTheNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds network namespaces")
	}
	if err := netlab.Supported(); err != nil {
		testenv.Unsupported(t, "no network namespaces: "+err.Error())
	}
	t.Parallel()
	node, lan, tunnel := netlab.ForTest(t, "node"), netlab.ForTest(t, "lan"), netlab.ForTest(t, "tun")
	must(t, netlab.Veth(node, "eth0", pfx("192.168.60.2/24"), lan, "eth0", pfx("192.168.60.1/24")))
	must(t, netlab.Veth(node, "tun0", pfx("172.29.0.1/30"), tunnel, "eth0", pfx("172.29.0.2/30")))
	must(t, node.IP("route", "add", "default", "via", "192.168.60.1"))
	// Part of the peer's range the node already reaches another way.
	must(t, node.IP("route", "add", "10.60.1.0/24", "via", "192.168.60.1"))
	before := routes(t, node, "main")
	var tun0 int
	must(t, node.Do(func() error {
		l, err := netlink.LinkByName("tun0")
		if err == nil {
			tun0 = l.Attrs().Index
		}
		return err
	}))
	table := Table{ID: 108, Protocol: 0x6c, Priority: 31080, SourcePort: 51820}
	other := Table{ID: 109, Protocol: 0x6d, Priority: 31090}
	must(t, node.Do(func() error {
		return table.Sync([]Route{{Dst: pfx("10.60.0.0/16"), LinkIndex: tun0}, {Dst: pfx("10.61.0.0/16"), LinkIndex: tun0}})
	}))
	must(t, node.Do(func() error {
		return other.Sync([]Route{{Dst: pfx("10.62.0.0/16"), Gw: netip.MustParseAddr("192.168.60.1")}})
	}))
	// Synced again, nothing is added twice.
	must(t, node.Do(func() error {
		return table.Sync([]Route{{Dst: pfx("10.60.0.0/16"), LinkIndex: tun0}, {Dst: pfx("10.61.0.0/16"), LinkIndex: tun0}})
	}))

	for _, tc := range []struct{ dst, extra, want string }{
		{"10.60.2.5", "", "dev tun0"},
		{"10.61.0.9", "", "dev tun0"},
		{"10.60.1.5", "", "via 192.168.60.1"},  // the node's own route wins
		{"192.168.60.7", "", "dev eth0"},       // and its subnet
		{"8.8.8.8", "", "via 192.168.60.1"},    // the default route is untouched
		{"10.60.2.5", "udp 51820", "dev eth0"}, // the tunnel's own packets
		{"10.60.2.5", "udp 40000", "dev tun0"}, // others' UDP is the peer's
		{"10.62.3.4", "", "via 192.168.60.1"},  // the other table's route
	} {
		if got := get(t, node, tc.dst, tc.extra); !strings.Contains(got, tc.want) {
			t.Errorf("route to %s %s: %q, want %q", tc.dst, tc.extra, got, tc.want)
		}
	}
	if after := routes(t, node, "main"); !slices.Equal(after, before) {
		t.Errorf("the main table changed:\n%v\nwas\n%v", after, before)
	}
	if got := rules(t, node, 0x6c); len(got) != 6 {
		t.Errorf("the table's rules: %v, want three per range", got)
	}

	// One range goes: its route and rules with it.
	must(t, node.Do(func() error { return table.Sync([]Route{{Dst: pfx("10.61.0.0/16"), LinkIndex: tun0}}) }))
	if got := get(t, node, "10.60.2.5", ""); !strings.Contains(got, "via 192.168.60.1") {
		t.Errorf("route to a range no longer routed: %q, want the default route", got)
	}
	if got := rules(t, node, 0x6c); len(got) != 3 {
		t.Errorf("rules after a range went: %v", got)
	}

	must(t, node.Do(table.Remove))
	if got := append(routes(t, node, "108"), rules(t, node, 0x6c)...); len(got) != 0 {
		t.Errorf("after Remove: %v", got)
	}
	if got := rules(t, node, 0x6d); len(got) != 2 {
		t.Errorf("the other table's rules after Remove: %v", got)
	}
	if got := routes(t, node, "main"); !slices.Equal(got, before) {
		t.Errorf("the main table after Remove:\n%v\nwas\n%v", got, before)
	}
}

// TestInUse: the node's addresses and its main table's routes, but the
// default route and the routes of the protocols named.
func TestInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("builds network namespaces")
	}
	if err := netlab.Supported(); err != nil {
		testenv.Unsupported(t, "no network namespaces: "+err.Error())
	}
	t.Parallel()
	node, lan := netlab.ForTest(t, "node"), netlab.ForTest(t, "lan")
	must(t, netlab.Veth(node, "eth0", pfx("192.168.61.2/24"), lan, "eth0", pfx("192.168.61.1/24")))
	must(t, node.IP("route", "add", "default", "via", "192.168.61.1"))
	must(t, node.IP("route", "add", "10.50.0.0/16", "via", "192.168.61.1"))
	must(t, node.IP("route", "add", "10.51.0.0/16", "via", "192.168.61.1", "proto", "108"))
	var got []netip.Prefix
	must(t, node.Do(func() (err error) { got, err = InUse(0x6c); return err }))
	for _, want := range []string{"192.168.61.2/32", "192.168.61.0/24", "10.50.0.0/16"} {
		if !slices.Contains(got, pfx(want)) {
			t.Errorf("InUse = %v, missing %s", got, want)
		}
	}
	for _, not := range []string{"0.0.0.0/0", "10.51.0.0/16"} {
		if slices.Contains(got, pfx(not)) {
			t.Errorf("InUse = %v, with %s", got, not)
		}
	}
	if c, ok := Conflict(pfx("10.50.128.0/17"), got); !ok || c != pfx("10.50.0.0/16") {
		t.Errorf("Conflict(10.50.128.0/17) = %s, %v", c, ok)
	}
	if c, ok := Conflict(pfx("10.52.0.0/16"), got); ok {
		t.Errorf("Conflict(10.52.0.0/16) = %s", c)
	}
}

// get is `ip route get` of dst in ns, for a UDP packet from a port when
// extra is "udp <port>".
func get(t *testing.T, ns *netlab.Namespace, dst, extra string) string {
	t.Helper()
	args := []string{"route", "get", dst}
	if port, ok := strings.CutPrefix(extra, "udp "); ok {
		args = append(args, "ipproto", "udp", "sport", port)
	}
	out, err := ns.Command(t.Context(), "ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
	return string(out)
}

// routes lists ns's IPv4 routes of a table.
func routes(t *testing.T, ns *netlab.Namespace, table string) []string {
	t.Helper()
	out, err := ns.Command(t.Context(), "ip", "-4", "route", "show", "table", table).CombinedOutput()
	if err != nil {
		t.Fatalf("ip route show table %s: %v: %s", table, err, out)
	}
	return strings.Fields(strings.ReplaceAll(string(out), " ", "_"))
}

// rules lists ns's policy rules of a protocol.
func rules(t *testing.T, ns *netlab.Namespace, protocol uint8) []string {
	t.Helper()
	var out []string
	must(t, ns.Do(func() error {
		all, err := netlink.RuleList(netlink.FAMILY_V4)
		for _, r := range all {
			if r.Protocol == protocol {
				out = append(out, r.String())
			}
		}
		return err
	}))
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
