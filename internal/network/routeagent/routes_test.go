// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package routeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/liqo-go/liqo/internal/netlab"
	"github.com/liqo-go/liqo/internal/network/ipam"
	"github.com/liqo-go/liqo/internal/testenv"
)

// TestRoutesThroughTheGatewaysNode, with real packets in bare network
// namespaces: a pod on a node without the gateway reaches a peer's range
// only once the agent routes it through the gateway's node; the agent on
// the gateway's node routes nothing (the gateway does there); a range
// that goes is unrouted; stopped, the agent leaves no route of its own and
// never touches another's.
func TestRoutesThroughTheGatewaysNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds network namespaces")
	}
	if err := netlab.Supported(); err != nil {
		testenv.Unsupported(t, "no network namespaces: "+err.Error())
	}
	t.Parallel()
	gwNode, node, pod := netlab.ForTest(t, "gwnode"), netlab.ForTest(t, "node"), netlab.ForTest(t, "pod")
	must(t, netlab.Veth(gwNode, "eth0", netip.MustParsePrefix("192.168.77.1/24"), node, "eth0", netip.MustParsePrefix("192.168.77.2/24")))
	must(t, netlab.Veth(node, "pod0", netip.MustParsePrefix("10.100.32.1/24"), pod, "eth0", netip.MustParsePrefix("10.100.32.2/24")))
	must(t, node.Sysctl("ipv4/ip_forward", "1"))
	must(t, pod.IP("route", "add", "default", "via", "10.100.32.1"))
	// The gateway's node: the cluster's network routes the other node's
	// pods (as a CNI would), and a peer's address answers there (as the
	// tunnel would).
	must(t, gwNode.IP("route", "add", "10.100.32.0/24", "via", "192.168.77.2"))
	must(t, gwNode.IP("addr", "add", "10.8.0.1/32", "dev", "lo"))
	// Somebody else's route, which the agent must leave alone.
	must(t, node.IP("route", "add", "10.50.0.0/16", "via", "192.168.77.1"))
	from := make(chan netip.Addr, 4)
	l, err := gwNode.Listen("tcp4", "10.8.0.1:8080")
	must(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			from <- c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
			_, _ = io.Copy(c, c)
			_ = c.Close()
		}
	}()
	peer := netip.MustParseAddr("10.8.0.1")
	gw := netip.MustParseAddr("192.168.77.1")
	ranges := []netip.Prefix{netip.MustParsePrefix("10.8.0.0/16"), netip.MustParsePrefix("10.9.0.0/16")}

	if err := reach(t, pod, peer); err == nil {
		t.Fatal("the pod reaches the peer's range with no route: the test proves nothing")
	}
	var routed bool
	must(t, node.Do(func() (err error) { routed, err = Sync(gw, ranges); return err }))
	if !routed {
		t.Error("Sync reports no route on a node without the gateway")
	}
	if err := reach(t, pod, peer); err != nil {
		t.Fatalf("with the agent's routes, the pod does not reach the peer's range: %v", err)
	}
	if src := <-from; src != netip.MustParseAddr("10.100.32.2") {
		t.Errorf("the peer's side sees the pod as %s, want its own address", src)
	}
	if got := agentRoutes(t, node); !slices.Equal(got, []string{"10.8.0.0/16 via 192.168.77.1", "10.9.0.0/16 via 192.168.77.1"}) {
		t.Errorf("the node's agent routes: %v", got)
	}

	// On the gateway's node the agent installs nothing.
	must(t, gwNode.Do(func() (err error) { routed, err = Sync(gw, ranges); return err }))
	if got := agentRoutes(t, gwNode); routed || len(got) > 0 {
		t.Errorf("on the gateway's node: routed %v, routes %v", routed, got)
	}

	// A range over the node's own routes (somebody else's) is refused,
	// named, and the others stay routed; the node's route stays whole.
	_ = node.Do(func() (err error) {
		routed, err = Sync(gw, append(slices.Clip(ranges), netip.MustParsePrefix("10.50.128.0/17")))
		if err == nil || !strings.Contains(err.Error(), "10.50.128.0/17 is not routed: it overlaps 10.50.0.0/16") {
			t.Errorf("a range over the node's route: %v, want it refused", err)
		}
		return nil
	})
	if got := agentRoutes(t, node); routed || !slices.Equal(got, []string{"10.8.0.0/16 via 192.168.77.1", "10.9.0.0/16 via 192.168.77.1"}) {
		t.Errorf("with a range refused: routed %v, routes %v", routed, got)
	}

	// A peer gone: its range is unrouted, the other stays.
	must(t, node.Do(func() (err error) { _, err = Sync(gw, ranges[1:]); return err }))
	if got := agentRoutes(t, node); !slices.Equal(got, []string{"10.9.0.0/16 via 192.168.77.1"}) {
		t.Errorf("after a peer went: %v", got)
	}
	if err := reach(t, pod, peer); err == nil {
		t.Error("the pod still reaches a range no peer has")
	}

	// Stopped: nothing of the agent's, the other route untouched.
	must(t, node.Do(func() (err error) { routed, err = Sync(netip.Addr{}, nil); return err }))
	if got := agentRoutes(t, node); routed || len(got) > 0 {
		t.Errorf("after stopping: routed %v, routes %v", routed, got)
	}
	must(t, node.Do(func() error {
		rs, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: ipam.IPNet(netip.MustParsePrefix("10.50.0.0/16"))}, netlink.RT_FILTER_DST)
		if err == nil && len(rs) != 1 {
			err = errors.New("another's route to 10.50.0.0/16 is gone")
		}
		return err
	}))
}

// reach opens a TCP connection from ns to addr:8080 and echoes a byte.
func reach(t *testing.T, ns *netlab.Namespace, addr netip.Addr) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	c, err := ns.Dial(ctx, "tcp4", netip.AddrPortFrom(addr, 8080).String())
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte{1}); err != nil {
		return err
	}
	_, err = c.Read(make([]byte, 1))
	return err
}

// agentRoutes lists ns's routes of the agent, as "dst via gw".
func agentRoutes(t *testing.T, ns *netlab.Namespace) []string {
	t.Helper()
	var out []string
	must(t, ns.Do(func() error {
		rs, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: RouteProtocol}, netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
		for _, r := range rs {
			if r.Table != RouteTable {
				out = append(out, fmt.Sprintf("a route in table %d", r.Table))
			}
			out = append(out, r.Dst.String()+" via "+r.Gw.String())
		}
		return err
	}))
	slices.Sort(out)
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
