// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package gateway_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/liqo-go/liqo/internal/netlab"
	"github.com/liqo-go/liqo/internal/network/gateway"
	"github.com/liqo-go/liqo/internal/network/gateway/gatewaytest"
	"github.com/liqo-go/liqo/internal/network/wgkey"
	"github.com/liqo-go/liqo/internal/testenv"
)

func TestMain(m *testing.M) {
	gatewaytest.Main()
	os.Exit(m.Run())
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// Every cluster of these tests uses the same ranges, as the harness's
// clusters do, so every peer is remapped.
var (
	podCIDR      = pfx("10.100.0.0/16")
	externalCIDR = pfx("10.70.0.0/16")
	// podAddr is the pod of every cluster; gatewayPodSide is its gateway
	// on the pods' link.
	podAddr        = netip.MustParseAddr("10.100.0.10")
	gatewayPodSide = netip.MustParseAddr("10.100.0.1")
)

// cluster is a pod and its gateway, each in a namespace: the pod's link to
// the gateway plays the cluster's pod network, the gateway's wan0 the
// underlay between clusters.
type cluster struct {
	name    string
	pod, gw *netlab.Namespace
	wan     netip.Addr
	key     wgkey.Key
	proc    *gatewaytest.Process
}

// lab is clusters on one underlay, a bridge in its own namespace.
type lab struct {
	t      *testing.T
	bridge *netlab.Namespace
	n      int
}

func newLab(t *testing.T) *lab {
	t.Helper()
	if testing.Short() {
		t.Skip("builds network namespaces")
	}
	if err := netlab.Supported(); err != nil {
		testenv.Unsupported(t, "no network namespaces: "+err.Error())
	}
	// Each lab is namespaces of its own: the tests run side by side.
	t.Parallel()
	l := &lab{t: t, bridge: netlab.ForTest(t, "wan")}
	if err := l.bridge.IP("link", "add", "br0", "type", "bridge"); err != nil {
		t.Fatal(err)
	}
	if err := l.bridge.IP("link", "set", "br0", "up"); err != nil {
		t.Fatal(err)
	}
	return l
}

// cluster adds a cluster: its pod, its gateway on the underlay at
// 192.168.50.<n>, a gateway process running there, and a fresh key.
func (l *lab) cluster(name string) *cluster {
	t := l.t
	t.Helper()
	l.n++
	wan := netip.MustParseAddr("192.168.50.0")
	for range l.n {
		wan = wan.Next()
	}
	c := &cluster{name: name, pod: netlab.ForTest(t, name+"-pod"), gw: netlab.ForTest(t, name+"-gw"), wan: wan}
	must(t, netlab.Veth(c.pod, "eth0", netip.PrefixFrom(podAddr, 16), c.gw, "pods", netip.PrefixFrom(gatewayPodSide, 16)))
	must(t, c.pod.IP("route", "add", "default", "via", gatewayPodSide.String()))
	port := fmt.Sprintf("port%d", l.n)
	must(t, netlab.Veth(c.gw, "wan0", netip.PrefixFrom(c.wan, 24), l.bridge, port, netip.Prefix{}))
	must(t, l.bridge.IP("link", "set", port, "master", "br0"))
	must(t, c.gw.Sysctl("ipv4/ip_forward", "1"))
	var err error
	if c.key, err = wgkey.Generate(); err != nil {
		t.Fatal(err)
	}
	c.proc = gatewaytest.Start(t, c.gw)
	return c
}

// cut takes the cluster's underlay link down, as a cable pulled; join
// brings it back.
func (l *lab) cut(c *cluster) {
	l.t.Helper()
	must(l.t, c.gw.IP("link", "set", "wan0", "down"))
}

func (l *lab) join(c *cluster) {
	l.t.Helper()
	must(l.t, c.gw.IP("link", "set", "wan0", "up"))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// view is how one cluster sees another: the other's pod and external
// ranges, remapped.
type view struct{ pod, external netip.Prefix }

// peer is the entry of remote in local's configuration: local sees remote
// as seen, remote sees local as seenBy.
func peer(remote *cluster, seen, seenBy view, client bool) gateway.Peer {
	p := gateway.Peer{
		ID: remote.name, PublicKey: remote.key.Public(),
		PodCIDR: seen.pod, ExternalCIDR: seen.external,
		LocalPodCIDR: seenBy.pod, LocalExternalCIDR: seenBy.external,
		// The pod of every cluster is what its peering exposes.
		Exposed: []netip.Prefix{netip.PrefixFrom(podAddr, 32)},
	}
	if client {
		p.Endpoint = netip.AddrPortFrom(remote.wan, 51820).String()
	}
	return p
}

func config(c *cluster, peers ...gateway.Peer) gateway.Config {
	return gateway.Config{PrivateKey: c.key, ListenPort: 51820, PodCIDR: podCIDR, ExternalCIDR: externalCIDR, Peers: peers}
}

// The two views of TestTunnelAcrossIdenticalRanges: each side chose its
// own range for the other.
var (
	bAsSeenByA = view{pfx("10.81.0.0/16"), pfx("10.82.0.0/16")}
	aAsSeenByB = view{pfx("10.91.0.0/16"), pfx("10.92.0.0/16")}
)

// translated is the address of the pod of a cluster seen as v.
func translated(v view) netip.Addr {
	a := v.pod.Addr().As4()
	b := podAddr.As4()
	return netip.AddrFrom4([4]byte{a[0], a[1], b[2], b[3]})
}

func waitEstablished(t *testing.T, c *cluster, peerID string, within time.Duration) gateway.PeerStatus {
	t.Helper()
	return waitPeer(t, c, peerID, "established", within, func(p gateway.PeerStatus) bool { return p.Established })
}

// waitSent waits until c has sent at least n packets into its tunnel to
// peerID (its probes, when nothing else talks).
func waitSent(t *testing.T, c *cluster, peerID string, n uint64, within time.Duration) {
	t.Helper()
	waitPeer(t, c, peerID, fmt.Sprintf("%d packets sent", n), within, func(p gateway.PeerStatus) bool { return p.TxPackets >= n })
}

// waitPeer waits until c's status of peerID satisfies ok, and returns it.
func waitPeer(t *testing.T, c *cluster, peerID, what string, within time.Duration, ok func(gateway.PeerStatus) bool) gateway.PeerStatus {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := c.proc.Status()
		if err == nil {
			for _, p := range st.Peers {
				if p.ID == peerID && ok(p) {
					return p
				}
			}
			err = fmt.Errorf("%+v", st.Peers)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: tunnel to %s not %s within %s: %v", c.name, peerID, what, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// echoServer accepts connections in ns and writes back what it reads;
// each connection's remote address goes to the returned channel.
func echoServer(t *testing.T, ns *netlab.Namespace) <-chan netip.Addr {
	t.Helper()
	l, err := ns.Listen("tcp4", ":8080")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	from := make(chan netip.Addr, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			select {
			case from <- c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap():
			default:
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return from
}

// exchange connects from ns to addr:8080, sends size random bytes and
// checks that they come back whole.
func exchange(ctx context.Context, ns *netlab.Namespace, addr netip.Addr, size int) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	c, err := ns.Dial(ctx, "tcp4", netip.AddrPortFrom(addr, 8080).String())
	if err != nil {
		return err
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	sent := make([]byte, size)
	_, _ = rand.Read(sent)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(sent)
		errc <- err
	}()
	got := make([]byte, size)
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("reading %d bytes back from %s: %w", size, addr, err)
	}
	if err := <-errc; err != nil {
		return err
	}
	if !bytes.Equal(sent, got) {
		return fmt.Errorf("%d bytes from %s came back different", size, addr)
	}
	return nil
}

// TestTunnelAcrossIdenticalRanges: two clusters with the same pod range
// reach each other's pod at the address each reads in its own view, in
// both directions, with payloads that need segmentation; each side sees
// the other's pod at the translated address; the tunnel is established
// and probed.
func TestTunnelAcrossIdenticalRanges(t *testing.T) {
	l := newLab(t)
	a, b := l.cluster("a"), l.cluster("b")
	fromAtB, fromBtA := echoServer(t, b.pod), echoServer(t, a.pod)
	must(t, a.proc.Apply(config(a, peer(b, bAsSeenByA, aAsSeenByB, true))))
	must(t, b.proc.Apply(config(b, peer(a, aAsSeenByB, bAsSeenByA, false))))
	start := time.Now()
	st := waitEstablished(t, a, "b", 5*time.Second)
	t.Logf("a's tunnel to b established %s after configuration; latency %s", time.Since(start).Round(time.Millisecond), st.Latency)
	waitEstablished(t, b, "a", 5*time.Second)

	for _, size := range []int{1, 1400, 8000, 1 << 20} {
		must(t, exchange(t.Context(), a.pod, translated(bAsSeenByA), size))
		must(t, exchange(t.Context(), b.pod, translated(aAsSeenByB), size))
	}
	if got := <-fromAtB; got != translated(aAsSeenByB) {
		t.Errorf("b's pod saw a's pod as %s, want %s (b's view of a)", got, translated(aAsSeenByB))
	}
	if got := <-fromBtA; got != translated(bAsSeenByA) {
		t.Errorf("a's pod saw b's pod as %s, want %s (a's view of b)", got, translated(bAsSeenByA))
	}

	sa, err := a.proc.Status()
	must(t, err)
	if p := sa.Peers[0]; p.Latency <= 0 || p.LastHandshake.IsZero() || p.RxPackets == 0 || p.TxPackets == 0 || p.RxBytes < 1<<20 {
		t.Errorf("a's status of b: %+v; want a latency, a handshake, packets both ways and the megabyte received", p)
	}
}

// TestAnswersReachWhatOpenedTheConnection: a source of this cluster that
// is not a pod (a node; a pod its node masqueraded, as many CNIs do for
// addresses outside the cluster's ranges) reaches a peer's pod as the
// gateway's tunnel address, and the answers come back to it through the
// filter, which lets out of the tunnel only what goes to the pods, or
// answers a connection this side opened.
func TestAnswersReachWhatOpenedTheConnection(t *testing.T) {
	l := newLab(t)
	a, b := l.cluster("a"), l.cluster("b")
	from := echoServer(t, b.pod)
	node := netlab.ForTest(t, "a-node")
	must(t, netlab.Veth(a.gw, "nodes", pfx("172.30.0.1/24"), node, "eth0", pfx("172.30.0.2/24")))
	must(t, node.IP("route", "add", "default", "via", "172.30.0.1"))
	must(t, a.proc.Apply(config(a, peer(b, bAsSeenByA, aAsSeenByB, true))))
	must(t, b.proc.Apply(config(b, peer(a, aAsSeenByB, bAsSeenByA, false))))
	waitEstablished(t, a, "b", 5*time.Second)
	must(t, exchange(t.Context(), node, translated(bAsSeenByA), 8000))
	if got, want := <-from, gateway.TunnelAddress(aAsSeenByB.external); got != want {
		t.Errorf("b's pod saw a's node as %s, want %s (a's gateway in b's view)", got, want)
	}
}

// TestCoincidingViewsServerFirst: two clusters that chose the same ranges
// for each other (their pools and ranges alike, as the harness's are), the
// server configured first: the probes it queued while it waited for the
// client reach the client as its session comes up, and must meet the
// client's translation, else conntrack keeps their flow untranslated, and
// looping back into the tunnel, for good. Both sides are established, and
// their pods talk both ways.
func TestCoincidingViewsServerFirst(t *testing.T) {
	l := newLab(t)
	a, b := l.cluster("a"), l.cluster("b")
	echoServer(t, a.pod)
	echoServer(t, b.pod)
	same := view{pfx("10.81.0.0/16"), pfx("10.82.0.0/16")}
	must(t, b.proc.Apply(config(b, peer(a, same, same, false))))
	// The server's probes go into the tunnel and wait there for the
	// client's session.
	waitSent(t, b, "a", 3, 5*time.Second)
	must(t, a.proc.Apply(config(a, peer(b, same, same, true))))
	waitEstablished(t, a, "b", 5*time.Second)
	waitEstablished(t, b, "a", 5*time.Second)
	must(t, exchange(t.Context(), a.pod, translated(same), 8000))
	must(t, exchange(t.Context(), b.pod, translated(same), 8000))
}

// TestGatewayLetsAPeerReachPodsOnly: through the tunnel, a peer reaches
// this cluster's pods, and the gateway's tunnel address with probes,
// nothing else: not a service of the gateway's node at that address, not
// the gateway at another of its addresses, not a network behind it. A
// packet whose source is outside what was agreed with the peer, even with
// the peer's real key, and a packet under a key nobody agreed to, reach
// nothing.
func TestGatewayLetsAPeerReachPodsOnly(t *testing.T) {
	l := newLab(t)
	a, b := l.cluster("a"), l.cluster("b")
	// A network behind b's gateway that is not b's pods.
	other := netlab.ForTest(t, "b-other")
	must(t, netlab.Veth(b.gw, "other", pfx("10.96.0.1/24"), other, "eth0", pfx("10.96.0.10/24")))
	must(t, other.IP("route", "add", "default", "via", "10.96.0.1"))
	reached := map[string]<-chan netip.Addr{"the network behind b": echoServer(t, other), "b's pod": echoServer(t, b.pod)}

	must(t, a.proc.Apply(config(a, peer(b, bAsSeenByA, aAsSeenByB, true))))
	must(t, b.proc.Apply(config(b, peer(a, aAsSeenByB, bAsSeenByA, false))))
	waitEstablished(t, a, "b", 5*time.Second)

	// A service of b's gateway node (the kubelet, say), at the
	// gateway's tunnel address: the gateway answers probes there, and
	// nothing else.
	reached["b's gateway node"] = echoServer(t, b.gw)
	refusedBefore := refused(t, b)
	if err := attempt(t.Context(), a.pod, gateway.TunnelAddress(bAsSeenByA.external)); err == nil {
		t.Errorf("a's pod reached a service of b's gateway node at its tunnel address")
	}
	if n := refused(t, b); n <= refusedBefore {
		t.Errorf("b's gateway refused %d packets, %d before: the attempt was not counted", n, refusedBefore)
	}

	// b's gateway on the pods' link, in a's view: an address of b's pod
	// range, but the gateway's own.
	gwInAView := netip.AddrFrom4([4]byte{10, 81, 0, 1})
	refusedBefore = refused(t, b)
	if err := attempt(t.Context(), a.pod, gwInAView); err == nil {
		t.Errorf("a's pod reached b's gateway at %s (%s in b)", gwInAView, gatewayPodSide)
	}
	if n := refused(t, b); n <= refusedBefore {
		t.Errorf("b's gateway refused %d packets, %d before: the attempt was not counted", n, refusedBefore)
	}

	// a turns against b, with its real key and address. First its gateway
	// claims b sees it natively: its pod's packets leave untranslated,
	// from outside what b agreed to.
	untranslated := peer(b, bAsSeenByA, view{podCIDR, aAsSeenByB.external}, true)
	must(t, a.proc.Apply(config(a, untranslated)))
	if err := attempt(t.Context(), a.pod, translated(bAsSeenByA)); err == nil {
		t.Errorf("a's pod, untranslated, reached b's pod")
	}
	// The tunnel itself stays: only the packets from outside the agreed
	// ranges were dropped.
	waitEstablished(t, a, "b", 5*time.Second)
	// Then, with its sources as agreed, it routes the network behind b's
	// gateway into the tunnel as if it were b's pods.
	behind := peer(b, view{pfx("10.96.0.0/24"), bAsSeenByA.external}, aAsSeenByB, true)
	must(t, a.proc.Apply(config(a, behind)))
	refusedBefore = refused(t, b)
	if err := attempt(t.Context(), a.pod, netip.MustParseAddr("10.96.0.10")); err == nil {
		t.Errorf("a's pod reached the network behind b's gateway")
	}
	if n := refused(t, b); n <= refusedBefore {
		t.Errorf("b's gateway refused %d packets, %d before: the attempt was not counted", n, refusedBefore)
	}

	// A stranger with a key b never heard of, in a's place in b's view.
	m := l.cluster("m")
	must(t, m.proc.Apply(config(m, peer(b, bAsSeenByA, aAsSeenByB, true))))
	// The stranger's first handshake goes out with its first packet; this
	// attempt lasts past its second (5 s later).
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Second)
	defer cancel()
	if err := exchange(ctx, m.pod, translated(bAsSeenByA), 10); err == nil {
		t.Error("a stranger's pod reached b's pod")
	}
	st, err := m.proc.Status()
	must(t, err)
	if p := st.Peers[0]; p.Established || !p.LastHandshake.IsZero() || p.RxBytes != 0 {
		t.Errorf("a stranger's tunnel to b: %+v", p)
	}

	for name, ch := range reached {
		select {
		case from := <-ch:
			t.Errorf("%s was reached from %s", name, from)
		default:
		}
	}
}

// attempt is an exchange expected to fail: it gives up after 3 s, two
// TCP SYNs.
func attempt(ctx context.Context, ns *netlab.Namespace, addr netip.Addr) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return exchange(ctx, ns, addr, 10)
}

func refused(t *testing.T, c *cluster) uint64 {
	t.Helper()
	st, err := c.proc.Status()
	must(t, err)
	return st.Refused
}

// TestTunnelSurvivesOutagesAndRestarts: the underlay cut for a while, the
// tunnel is down, then back within seconds of the link, without a new key;
// a gateway killed and started again (its tables left behind, its
// interface gone) has the tunnel back within 5 s.
func TestTunnelSurvivesOutagesAndRestarts(t *testing.T) {
	l := newLab(t)
	a, b := l.cluster("a"), l.cluster("b")
	echoServer(t, a.pod)
	echoServer(t, b.pod)
	ca, cb := config(a, peer(b, bAsSeenByA, aAsSeenByB, true)), config(b, peer(a, aAsSeenByB, bAsSeenByA, false))
	must(t, a.proc.Apply(ca))
	must(t, b.proc.Apply(cb))
	waitEstablished(t, a, "b", 5*time.Second)

	l.cut(b)
	waitDown(t, a, "b", 5*time.Second)
	// An outage, not a blip: the link stays down a while (not a wait for
	// anything); what is measured is the way back.
	time.Sleep(5 * time.Second)
	l.join(b)
	back := time.Now()
	waitEstablished(t, a, "b", 10*time.Second)
	t.Logf("after the link came back, the tunnel was up again in %s", time.Since(back).Round(time.Millisecond))
	must(t, exchange(t.Context(), a.pod, translated(bAsSeenByA), 8000))

	for _, victim := range []*cluster{b, a} {
		victim.proc.Kill()
		victim.proc = gatewaytest.Start(t, victim.gw)
		restarted := time.Now()
		cfg := ca
		if victim == b {
			cfg = cb
		}
		must(t, victim.proc.Apply(cfg))
		waitEstablished(t, a, "b", 5*time.Second)
		must(t, exchange(t.Context(), a.pod, translated(bAsSeenByA), 8000))
		must(t, exchange(t.Context(), b.pod, translated(aAsSeenByB), 8000))
		t.Logf("%s's gateway restarted: tunnel back and pods talking in %s", victim.name, time.Since(restarted).Round(time.Millisecond))
	}
}

func waitDown(t *testing.T, c *cluster, peerID string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := c.proc.Status()
		must(t, err)
		if len(st.Peers) == 1 && !st.Peers[0].Established {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: tunnel to %s still established %s after the cut", c.name, peerID, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNoPeerLeavesNothing: a gateway whose last peer goes removes its
// interface, its routes and its tables, and so does one that stops.
func TestNoPeerLeavesNothing(t *testing.T) {
	l := newLab(t)
	a, b := l.cluster("a"), l.cluster("b")
	must(t, a.proc.Apply(config(a, peer(b, bAsSeenByA, aAsSeenByB, true))))
	must(t, b.proc.Apply(config(b, peer(a, aAsSeenByB, bAsSeenByA, false))))
	waitEstablished(t, a, "b", 5*time.Second)
	for _, c := range []*cluster{a, b} {
		// Per peer range, a route and three rules (the tunnel's own
		// packets, the main table first, then the gateway's table).
		if left := dataPlane(t, c.gw); len(left) != 1+2+6+2 {
			t.Fatalf("%s's gateway, configured: %v; want the interface, two routes, six rules and two tables", c.name, left)
		}
	}
	must(t, a.proc.Apply(config(a)))
	if left := dataPlane(t, a.gw); len(left) != 0 {
		t.Errorf("a's gateway with no peer left %v", left)
	}
	must(t, b.proc.Stop())
	if left := dataPlane(t, b.gw); len(left) != 0 {
		t.Errorf("b's gateway, stopped, left %v", left)
	}
}

// dataPlane lists what a gateway made in ns: its interface, its routes (in
// any table), its policy rules and its nftables tables.
func dataPlane(t *testing.T, ns *netlab.Namespace) []string {
	t.Helper()
	var out []string
	must(t, ns.Do(func() error {
		if _, err := netlink.LinkByName(gateway.DefaultInterface); err == nil {
			out = append(out, "interface "+gateway.DefaultInterface)
		}
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: gateway.RouteProtocol},
			netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		for _, r := range routes {
			out = append(out, fmt.Sprintf("route %s table %d", r.Dst, r.Table))
		}
		rules, err := netlink.RuleList(netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, r := range rules {
			if r.Protocol == uint8(gateway.RouteProtocol) {
				out = append(out, r.String())
			}
		}
		c, err := nftables.New()
		if err != nil {
			return err
		}
		tables, err := c.ListTables()
		if err != nil {
			return err
		}
		for _, tb := range tables {
			if tb.Name == gateway.GatewayTable || strings.HasPrefix(tb.Name, gateway.PeerTablePrefix) {
				out = append(out, "table "+tb.Name)
			}
		}
		return nil
	}))
	return out
}

// TestOnePeerRefusedAlone: peers whose parameters would disturb the node
// or another peer (a key that is the gateway's own or an earlier peer's,
// an endpoint that resolves to loopback or sits inside its own range,
// ranges over the node's own subnet or address, a special range) are
// each refused, with the reason in the status, while the good peer's
// tunnel is established and carries traffic, also after a restart of the
// gateway with the same configuration. The node's main table is never
// changed: a peer's routes live in the gateway's own table.
func TestOnePeerRefusedAlone(t *testing.T) {
	l := newLab(t)
	a, b := l.cluster("a"), l.cluster("b")
	echoServer(t, b.pod)
	must(t, a.gw.IP("addr", "add", "172.31.9.9/32", "dev", "lo"))
	mainBefore := mainTable(t, a.gw)
	other, err := wgkey.Generate()
	must(t, err)
	bad := func(id string, edit func(*gateway.Peer)) gateway.Peer {
		p := gateway.Peer{ID: id, PublicKey: other.Public(), PodCIDR: pfx("10.111.0.0/16"), ExternalCIDR: pfx("10.112.0.0/16"),
			LocalPodCIDR: aAsSeenByB.pod, LocalExternalCIDR: aAsSeenByB.external}
		edit(&p)
		return p
	}
	refusals := map[string]string{
		"own-key":           "this gateway's own key",
		"b-key":             "the key of peer b",
		"loopback":          "not an address a gateway can be at",
		"endpoint-in-range": "inside 10.111.0.0/16 (the peer's own pod range)",
		"node-subnet":       "overlaps what this node uses",
		"node-address":      "overlaps what this node uses",
		"special":           "a special range",
		"over-b":            "the pod range of peer b",
	}
	cfg := config(a,
		peer(b, bAsSeenByA, aAsSeenByB, true),
		bad("own-key", func(p *gateway.Peer) { p.PublicKey = a.key.Public() }),
		bad("b-key", func(p *gateway.Peer) { p.PublicKey = b.key.Public() }),
		bad("loopback", func(p *gateway.Peer) { p.Endpoint = "localhost:51820" }),
		bad("endpoint-in-range", func(p *gateway.Peer) { p.Endpoint = "10.111.0.9:51820" }),
		// The lab's underlay: the node's connected route.
		bad("node-subnet", func(p *gateway.Peer) { p.PodCIDR = pfx("192.168.50.0/30") }),
		// A range over an address of the node that no route covers.
		bad("node-address", func(p *gateway.Peer) { p.ExternalCIDR = pfx("172.31.9.8/30") }),
		bad("special", func(p *gateway.Peer) { p.ExternalCIDR = pfx("169.254.169.252/30") }),
		bad("over-b", func(p *gateway.Peer) { p.PodCIDR = pfx("10.80.0.0/12") }),
	)
	must(t, a.proc.Apply(cfg))
	must(t, b.proc.Apply(config(b, peer(a, aAsSeenByB, bAsSeenByA, false))))
	check := func(when string) {
		t.Helper()
		waitEstablished(t, a, "b", 5*time.Second)
		must(t, exchange(t.Context(), a.pod, translated(bAsSeenByA), 8000))
		st, err := a.proc.Status()
		must(t, err)
		seen := map[string]bool{}
		for _, p := range st.Peers {
			want, isBad := refusals[p.ID]
			seen[p.ID] = true
			switch {
			case !isBad && p.Refused != "":
				t.Errorf("%s: peer %s refused: %s", when, p.ID, p.Refused)
			case isBad && !strings.Contains(p.Refused, want):
				t.Errorf("%s: peer %s: refused %q, want a reason naming %q", when, p.ID, p.Refused, want)
			case isBad && p.Established:
				t.Errorf("%s: refused peer %s shows established", when, p.ID)
			}
		}
		for id := range refusals {
			if !seen[id] {
				t.Errorf("%s: peer %s missing from the status %+v", when, id, st.Peers)
			}
		}
		if after := mainTable(t, a.gw); !slices.Equal(after, mainBefore) {
			t.Errorf("%s: the node's main table changed:\n%v\nwas\n%v", when, after, mainBefore)
		}
	}
	check("first apply")
	a.proc.Kill()
	a.proc = gatewaytest.Start(t, a.gw)
	must(t, a.proc.Apply(cfg))
	check("after a restart")
}

// mainTable lists the IPv4 routes of ns's main table.
func mainTable(t *testing.T, ns *netlab.Namespace) []string {
	t.Helper()
	var out []string
	must(t, ns.Do(func() error {
		routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
		for _, r := range routes {
			out = append(out, r.String())
		}
		return err
	}))
	slices.Sort(out)
	return out
}

// TestPeerReachesWhatIsExposed: a peer opens connections to the pods
// exposed to it, and to no other pod of this cluster (refusals counted);
// answers to connections this side opened pass whatever is exposed; a
// newly exposed address is reachable without the peer's established
// connections being dropped; with AllPods reach, every pod is.
func TestPeerReachesWhatIsExposed(t *testing.T) {
	l := newLab(t)
	a, b := l.cluster("a"), l.cluster("b")
	// A second pod of b's, unexposed, at 10.100.0.11.
	hidden := netip.MustParseAddr("10.100.0.11")
	must(t, b.pod.IP("addr", "add", hidden.String()+"/16", "dev", "eth0"))
	echoServer(t, b.pod)
	echoServer(t, a.pod)
	toB := peer(b, bAsSeenByA, aAsSeenByB, true)
	toA := peer(a, aAsSeenByB, bAsSeenByA, false)
	must(t, a.proc.Apply(config(a, toB)))
	must(t, b.proc.Apply(config(b, toA)))
	waitEstablished(t, a, "b", 5*time.Second)
	hiddenInA := netip.AddrFrom4([4]byte{10, 81, 0, 11})

	must(t, exchange(t.Context(), a.pod, translated(bAsSeenByA), 8000))
	before := refused(t, b)
	if err := attempt(t.Context(), a.pod, hiddenInA); err == nil {
		t.Errorf("a's pod reached b's unexposed pod %s", hidden)
	}
	if n := refused(t, b); n <= before {
		t.Errorf("b's gateway refused %d packets, %d before: the attempt was not counted", n, before)
	}
	// b opens a connection to a's pod: a exposes it; the answers pass
	// b's gateway, whatever b exposes.
	toA.Exposed = nil
	must(t, b.proc.Apply(config(b, toA)))
	must(t, exchange(t.Context(), b.pod, translated(aAsSeenByB), 8000))
	if err := attempt(t.Context(), a.pod, translated(bAsSeenByA)); err == nil {
		t.Error("a's pod reached b's pod no longer exposed")
	}

	// Exposed again, and the hidden one too: reachable; then every pod.
	toA.Exposed = []netip.Prefix{netip.PrefixFrom(podAddr, 32), netip.PrefixFrom(hidden, 32)}
	must(t, b.proc.Apply(config(b, toA)))
	must(t, exchange(t.Context(), a.pod, hiddenInA, 1400))
	must(t, exchange(t.Context(), a.pod, translated(bAsSeenByA), 1400))
	toA.Exposed, toA.ReachAll = nil, true
	must(t, b.proc.Apply(config(b, toA)))
	waitEstablished(t, a, "b", 5*time.Second)
	must(t, exchange(t.Context(), a.pod, hiddenInA, 1400))
}

// The views of the transit tests' broker b and provider p.
var (
	pAsSeenByB = view{pfx("10.83.0.0/16"), pfx("10.84.0.0/16")}
	bAsSeenByP = view{pfx("10.93.0.0/16"), pfx("10.94.0.0/16")}
)

// TestTransitLeadsAPeerToThePodsPlacedForIt: a, an aggregator's consumer,
// reaches p's pod through b (the aggregator) at the address b assigned in
// its external range, in a's view; p's pod sees b's gateway, and b's
// counters of both tunnels move. Without transit, and through any other
// address, a reaches nothing beyond b: not p's pods, not a route whose
// target is no peer's pod, not p's pods by naming them itself.
func TestTransitLeadsAPeerToThePodsPlacedForIt(t *testing.T) {
	l := newLab(t)
	a, b, p := l.cluster("a"), l.cluster("b"), l.cluster("p")
	// A second pod of p's, placed for nobody, and a network behind b's
	// gateway that is no peer's.
	hidden := netip.MustParseAddr("10.100.0.11")
	must(t, p.pod.IP("addr", "add", hidden.String()+"/16", "dev", "eth0"))
	other := netlab.ForTest(t, "b-other")
	must(t, netlab.Veth(b.gw, "other", pfx("10.96.0.1/24"), other, "eth0", pfx("10.96.0.10/24")))
	must(t, other.IP("route", "add", "default", "via", "10.96.0.1"))
	fromAtP := echoServer(t, p.pod)
	reachedOther := echoServer(t, other)

	pInB := translated(pAsSeenByB)
	hiddenInB := netip.AddrFrom4([4]byte{10, 83, 0, 11})
	toP := peer(p, pAsSeenByB, bAsSeenByP, true)
	// p runs both pods for b: b may reach both.
	toB := peer(b, bAsSeenByP, pAsSeenByB, false)
	toB.Exposed = []netip.Prefix{netip.PrefixFrom(podAddr, 32), netip.PrefixFrom(hidden, 32)}
	toA := peer(a, aAsSeenByB, bAsSeenByA, false)
	// b's routes for a: its external range's .5 to p's pod, .6 to the
	// network behind b, .7 to b's own pod; .1 is b's tunnel address.
	// .8 names p's pod but says it is a's (a route must lead into its
	// provider's range).
	routes := []gateway.TransitRoute{
		{Address: netip.MustParseAddr("10.70.0.5"), Target: pInB, Via: "p"},
		{Address: netip.MustParseAddr("10.70.0.6"), Target: netip.MustParseAddr("10.96.0.10"), Via: "p"},
		{Address: netip.MustParseAddr("10.70.0.7"), Target: podAddr, Via: "p"},
		{Address: netip.MustParseAddr("10.70.0.1"), Target: hiddenInB, Via: "p"},
		{Address: netip.MustParseAddr("10.70.0.8"), Target: hiddenInB, Via: "a"},
	}
	toA.TransitRoutes = routes
	must(t, a.proc.Apply(config(a, peer(b, bAsSeenByA, aAsSeenByB, true))))
	must(t, p.proc.Apply(config(p, toB)))
	must(t, b.proc.Apply(config(b, toA, toP)))
	waitEstablished(t, a, "b", 5*time.Second)
	waitEstablished(t, b, "p", 5*time.Second)
	inA := func(last byte) netip.Addr { return netip.AddrFrom4([4]byte{10, 82, 0, last}) }

	// Routes without transit lead nowhere.
	if err := attempt(t.Context(), a.pod, inA(5)); err == nil {
		t.Error("a reached p's pod through b without transit")
	}

	toA.Transit = true
	must(t, b.proc.Apply(config(b, toA, toP)))
	stB, err := b.proc.Status()
	must(t, err)
	must(t, exchange(t.Context(), a.pod, inA(5), 8000))
	if got, want := <-fromAtP, gateway.TunnelAddress(bAsSeenByP.external); got != want {
		t.Errorf("p's pod saw the transit connection from %s, want %s (b's gateway in p's view)", got, want)
	}
	after, err := b.proc.Status()
	must(t, err)
	moved := map[string]bool{}
	for i, ps := range after.Peers {
		moved[ps.ID] = ps.RxPackets > stB.Peers[i].RxPackets && ps.TxPackets > stB.Peers[i].TxPackets
	}
	if !moved["a"] || !moved["p"] {
		t.Errorf("b's counters moved both ways for a: %v, for p: %v; want both", moved["a"], moved["p"])
	}

	// Every other way is closed: a route to what is not another peer's
	// pod, the tunnel address, an address with no route, p's pod named
	// by a itself.
	for _, to := range []netip.Addr{inA(6), inA(7), inA(1), inA(8)} {
		if err := attempt(t.Context(), a.pod, to); err == nil {
			t.Errorf("a reached something through b at %s", to)
		}
	}
	// a turns against b: it routes b's view of p's pods into the tunnel
	// as if they were b's external range.
	bent := peer(b, view{bAsSeenByA.pod, pfx("10.83.0.0/16")}, aAsSeenByB, true)
	must(t, a.proc.Apply(config(a, bent)))
	if err := attempt(t.Context(), a.pod, pInB); err == nil {
		t.Error("a reached p's pod at b's address for it, naming it itself")
	}
	if err := attempt(t.Context(), a.pod, hiddenInB); err == nil {
		t.Error("a reached p's pod placed for nobody")
	}
	must(t, a.proc.Apply(config(a, peer(b, bAsSeenByA, aAsSeenByB, true))))
	waitEstablished(t, a, "b", 5*time.Second)

	// The route goes: the address leads nowhere again, and the
	// connection through it is forgotten.
	toA.TransitRoutes = routes[1:]
	must(t, b.proc.Apply(config(b, toA, toP)))
	if err := attempt(t.Context(), a.pod, inA(5)); err == nil {
		t.Error("a reached p's pod through a transit route b removed")
	}
	// And back, to the other pod of p's.
	toA.TransitRoutes = []gateway.TransitRoute{{Address: netip.MustParseAddr("10.70.0.5"), Target: hiddenInB, Via: "p"}}
	must(t, b.proc.Apply(config(b, toA, toP)))
	must(t, exchange(t.Context(), a.pod, inA(5), 1400))

	// Something else on b's node translates an address of a's view of
	// b's external range before the gateway does (kube-proxy, for a
	// Service whose address a's view happens to cover, with an endpoint
	// at p): a, even reaching every pod of b, still reaches through b
	// only its routes' targets.
	toA.ReachAll = true
	toA.TransitRoutes = []gateway.TransitRoute{{Address: netip.MustParseAddr("10.70.0.5"), Target: pInB, Via: "p"}}
	must(t, b.proc.Apply(config(b, toA, toP)))
	must(t, b.gw.Do(func() error { return dnatBefore(inA(9), hiddenInB) }))
	must(t, exchange(t.Context(), a.pod, inA(5), 1400))
	before := refused(t, b)
	if err := attempt(t.Context(), a.pod, inA(9)); err == nil {
		t.Errorf("a reached p's pod placed for nobody through another DNAT of b's node")
	}
	if n := refused(t, b); n <= before {
		t.Errorf("b's gateway refused %d packets, %d before: the attempt was not counted", n, before)
	}
	must(t, exchange(t.Context(), a.pod, inA(5), 1400))
	select {
	case from := <-reachedOther:
		t.Errorf("the network behind b was reached from %s", from)
	default:
	}
}

// dnatBefore adds, in the network namespace it runs in, a table of its
// own translating from into to as packets arrive, before the gateway's
// peer tables, as kube-proxy's Service rules could.
func dnatBefore(from, to netip.Addr) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "not-the-gateways"})
	ch := c.AddChain(&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRef(-150)})
	f, d := from.As4(), to.As4()
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: f[:]},
		&expr.Immediate{Register: 1, Data: d[:]},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1},
	}})
	return c.Flush()
}
