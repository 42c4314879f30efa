// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package gateway

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/liqo-go/liqo/internal/network/ipam"
)

// The nftables tables a gateway owns, all of family ip: one for the
// gateway as a whole, one per peer. Nothing else is touched, so kube-proxy
// and the CNI keep their own tables.
const (
	// GatewayTable holds what does not depend on a peer: TCP MSS clamping
	// and the filter that lets a peer reach this cluster's pods and the
	// gateway's tunnel address, nothing else.
	GatewayTable = "liqo-gateway"
	// PeerTablePrefix begins the name of each peer's table, followed by
	// the peer's ID: its address translation and its counters.
	PeerTablePrefix = "liqo-peer-"
)

// srcNATPriority runs the peers' source translation just before the
// usual source NAT (100) where kube-proxy masquerades: a connection to a
// peer is translated once, by the gateway, into the range the peer agreed
// to, and a masquerade after it has nothing left to do.
var srcNATPriority = nftables.ChainPriorityRef(90)

// firewall programs the gateway's nftables tables in the process's network
// namespace.
type firewall struct {
	iface string
}

// PeerTable is the name of the table of the peer with ClusterID id.
func PeerTable(id string) string { return PeerTablePrefix + id }

// apply replaces the gateway's table and every peer's table with what cfg
// says, in one transaction, and removes the tables of peers cfg does not
// list. Rebuilding from scratch keeps no stale rule; the counters of a
// peer restart from zero only when its table changes.
func (f *firewall) apply(cfg Config, changed map[string]bool) error {
	c, existing, err := ownTables()
	if err != nil {
		return err
	}
	want := map[string]bool{GatewayTable: true}
	for _, p := range cfg.Peers {
		want[PeerTable(p.ID)] = true
	}
	for name, t := range existing {
		if !want[name] || changed[name] {
			c.DelTable(t)
		}
	}
	if _, ok := existing[GatewayTable]; !ok || changed[GatewayTable] {
		f.gatewayTable(c, cfg)
	}
	for _, p := range cfg.Peers {
		if _, ok := existing[PeerTable(p.ID)]; !ok || changed[PeerTable(p.ID)] {
			if err := f.peerTable(c, cfg, p); err != nil {
				return err
			}
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("programming nftables: %w", err)
	}
	// The addresses a peer may reach change with the pods: the elements
	// of its set follow, its rules and connections stay.
	for _, p := range cfg.Peers {
		if _, ok := existing[PeerTable(p.ID)]; !ok || changed[PeerTable(p.ID)] {
			continue
		}
		if !p.ReachAll {
			if err := syncExposed(c, p); err != nil {
				return err
			}
		}
		if p.Transit {
			if err := syncTransit(c, cfg, p); err != nil {
				return err
			}
		}
	}
	// Connections to or from a peer whose translation was just (re)made
	// start over in conntrack: an entry made before, with another mapping
	// or none (a probe that came before the rules), would keep its flow
	// untranslated for as long as packets keep it alive. Prefix NAT maps
	// every address the same way each time, so a connection that goes on
	// is translated again as it was.
	var stale []netlink.CustomConntrackFilter
	for _, p := range cfg.Peers {
		if _, ok := existing[PeerTable(p.ID)]; ok && !changed[PeerTable(p.ID)] {
			continue
		}
		for _, r := range []netip.Prefix{p.PodCIDR, p.ExternalCIDR} {
			// Reply source too: a transit connection to the peer's pod
			// has it there alone (its original addresses are the
			// transit peer's).
			for _, dir := range []netlink.ConntrackFilterType{netlink.ConntrackOrigSrcIP, netlink.ConntrackOrigDstIP, netlink.ConntrackReplySrcIP} {
				f := &netlink.ConntrackFilter{}
				if err := f.AddIPNet(dir, ipam.IPNet(r)); err != nil {
					return err
				}
				stale = append(stale, f)
			}
		}
	}
	if len(stale) > 0 {
		if _, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, stale...); err != nil {
			return fmt.Errorf("forgetting the connections of a peer whose translation changed: %w", err)
		}
	}
	return nil
}

// remove deletes every table of the gateway.
func (f *firewall) remove() error {
	c, existing, err := ownTables()
	if err != nil {
		return err
	}
	for _, t := range existing {
		c.DelTable(t)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("removing the gateway's nftables tables: %w", err)
	}
	return nil
}

// ownTables opens nftables and returns the gateway's tables, by name.
func ownTables() (*nftables.Conn, map[string]*nftables.Table, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, nil, fmt.Errorf("opening nftables: %w", err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, nil, fmt.Errorf("listing nftables tables: %w", err)
	}
	own := map[string]*nftables.Table{}
	for _, t := range tables {
		if t.Name == GatewayTable || strings.HasPrefix(t.Name, PeerTablePrefix) {
			own[t.Name] = t
		}
	}
	return c, own, nil
}

// gatewayTable: TCP MSS clamped to the route's MTU on SYNs both ways
// through the tunnel (a pod's 1500-byte segments would not fit it); what
// comes out of the tunnel, after the peers' translation, may go to this
// cluster's pods only; the gateway itself answers only at its tunnel
// address. Answers to connections this cluster opened pass whatever their
// destination: a pod on another node whose node masqueraded it (as many
// CNIs do for addresses outside the cluster's ranges) is answered at its
// node's address; a peer cannot open such a connection itself. Refusals
// are counted.
func (f *firewall) gatewayTable(c *nftables.Conn, cfg Config) {
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: GatewayTable})
	forward := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
	for _, dir := range []expr.MetaKey{expr.MetaKeyIIFNAME, expr.MetaKeyOIFNAME} {
		c.AddRule(&nftables.Rule{Table: t, Chain: forward, Exprs: concat(
			ifname(dir, f.iface), tcpSYN(),
			[]expr.Any{
				&expr.Rt{Register: 1, Key: expr.RtTCPMSS},
				&expr.Exthdr{SourceRegister: 1, Type: 2, Offset: 2, Len: 2, Op: expr.ExthdrOpTcpopt},
			})})
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: forward, Exprs: concat(
		ifname(expr.MetaKeyIIFNAME, f.iface), replyDirection(), []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}})})
	// A transit peer's connections leave through the tunnel again: those
	// it opened (conntrack's original direction) from its ranges to
	// this cluster's external range as it sees it, which only its own
	// transit map sends anywhere but here (its prefix translation takes
	// them into this cluster's external range, never routed into the
	// tunnel). Where they may go, the peer's table decides (its exposed
	// set holds the targets of its routes, and nothing else of another
	// peer's). The rules sit in a chain of their own: the library reads
	// back no conntrack address match, and the forward chain is read for
	// its counters.
	if slices.ContainsFunc(cfg.Peers, func(p Peer) bool { return p.Transit }) {
		transit := c.AddChain(&nftables.Chain{Name: "transit", Table: t})
		for _, p := range cfg.Peers {
			if !p.Transit {
				continue
			}
			for _, src := range []netip.Prefix{p.PodCIDR, p.ExternalCIDR} {
				c.AddRule(&nftables.Rule{Table: t, Chain: transit, Exprs: concat(
					ctMatch(expr.CtKeySRC, src), ctMatch(expr.CtKeyDST, p.LocalExternalCIDR),
					[]expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}})})
			}
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: forward, Exprs: concat(
			ifname(expr.MetaKeyIIFNAME, f.iface), ifname(expr.MetaKeyOIFNAME, f.iface), originalDirection(),
			[]expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: transit.Name}})})
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: forward, Exprs: concat(
		ifname(expr.MetaKeyIIFNAME, f.iface), notIn(daddr, cfg.PodCIDR),
		[]expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}})})
	// The gateway itself answers a peer's probes (ICMP echo at its tunnel
	// address) and nothing else: it runs in a node's network namespace,
	// where the kubelet and whatever else the node serves listen.
	input := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: t, Chain: input, Exprs: concat(
		ifname(expr.MetaKeyIIFNAME, f.iface), replyDirection(), []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}})})
	c.AddRule(&nftables.Rule{Table: t, Chain: input, Exprs: concat(
		ifname(expr.MetaKeyIIFNAME, f.iface), in(daddr, netip.PrefixFrom(TunnelAddress(cfg.ExternalCIDR), 32)), icmpEchoRequest(),
		[]expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}})})
	c.AddRule(&nftables.Rule{Table: t, Chain: input, Exprs: concat(
		ifname(expr.MetaKeyIIFNAME, f.iface), []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}})})
}

// icmpEchoRequest matches an ICMP echo request.
func icmpEchoRequest() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_ICMP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{8}}, // echo request
	}
}

// peerTable: the translation between this cluster's ranges and how the
// peer sees them (prefix NAT: host bits kept), and the peer's counters.
// Traffic from the peer to its view of us is translated back to our
// ranges; traffic to the peer leaves translated into its view of us: pod
// sources into the pod range, external ones into the external range, and
// any other source (a node, a masqueraded Service connection) as the
// gateway's tunnel address in the peer's view. Identity mappings are
// written too, so that nothing else (kube-proxy's masquerade) translates
// the connection afterwards.
func (f *firewall) peerTable(c *nftables.Conn, cfg Config, p Peer) error {
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: PeerTable(p.ID)})
	peerRanges := []netip.Prefix{p.PodCIDR, p.ExternalCIDR}

	// What the peer may open connections to: the addresses exposed to
	// it, unless it reaches every pod. Its answers to connections this
	// side opened (conntrack's reply direction) pass.
	if !p.ReachAll {
		set := &nftables.Set{Table: t, Name: ExposedSet, KeyType: nftables.TypeIPAddr}
		if err := c.AddSet(set, nil); err != nil {
			return fmt.Errorf("the set of what peer %s may reach: %w", p.ID, err)
		}
		if err := inChunks(exposedElements(reachable(p)), func(e []nftables.SetElement) error { return c.SetAddElements(set, e) }); err != nil {
			return fmt.Errorf("the set of what peer %s may reach: %w", p.ID, err)
		}
		reach := c.AddChain(&nftables.Chain{Name: "reach", Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
		for _, src := range peerRanges {
			// A packet conntrack does not follow has no direction to
			// tell: it goes nowhere.
			c.AddRule(&nftables.Rule{Table: t, Chain: reach, Exprs: concat(
				ifname(expr.MetaKeyIIFNAME, f.iface), in(saddr, src),
				[]expr.Any{
					&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
					&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
						Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitINVALID | expr.CtStateBitUNTRACKED), Xor: binaryutil.NativeEndian.PutUint32(0)},
					&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
					&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop},
				})})
			c.AddRule(&nftables.Rule{Table: t, Chain: reach, Exprs: concat(
				ifname(expr.MetaKeyIIFNAME, f.iface), in(saddr, src), originalDirection(),
				[]expr.Any{
					&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: 4},
					&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID, Invert: true},
					&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop},
				})})
		}
	}

	pre := c.AddChain(&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
	// Transit first: an address of the map leads to its target, at
	// another peer; any other address of the external range is
	// translated back into it below, and goes nowhere.
	if p.Transit {
		m := &nftables.Set{Table: t, Name: TransitMap, IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeIPAddr}
		if err := c.AddSet(m, nil); err != nil {
			return fmt.Errorf("the transit map of peer %s: %w", p.ID, err)
		}
		if err := inChunks(transitElements(cfg, p), func(e []nftables.SetElement) error { return c.SetAddElements(m, e) }); err != nil {
			return fmt.Errorf("the transit map of peer %s: %w", p.ID, err)
		}
		// Whatever sent them there (this map, or a DNAT of anyone
		// else's, kube-proxy's to a Service's endpoint at another peer),
		// the peer's connections leave through the tunnel again to its
		// routes' targets alone: a drop here is final.
		targets := &nftables.Set{Table: t, Name: TransitTargetsSet, KeyType: nftables.TypeIPAddr}
		if err := c.AddSet(targets, nil); err != nil {
			return fmt.Errorf("the transit targets of peer %s: %w", p.ID, err)
		}
		if err := inChunks(targetElements(p), func(e []nftables.SetElement) error { return c.SetAddElements(targets, e) }); err != nil {
			return fmt.Errorf("the transit targets of peer %s: %w", p.ID, err)
		}
		out := c.AddChain(&nftables.Chain{Name: "transit-out", Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
		for _, src := range peerRanges {
			c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: concat(
				ifname(expr.MetaKeyIIFNAME, f.iface), ifname(expr.MetaKeyOIFNAME, f.iface), in(saddr, src), originalDirection(),
				[]expr.Any{
					&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: 4},
					&expr.Lookup{SourceRegister: 1, SetName: targets.Name, SetID: targets.ID, Invert: true},
					&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop},
				})})
		}
		for _, src := range peerRanges {
			c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: concat(
				ifname(expr.MetaKeyIIFNAME, f.iface), in(saddr, src), in(daddr, p.LocalExternalCIDR),
				[]expr.Any{
					&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: 4},
					&expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: m.Name, SetID: m.ID},
					&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1},
				})})
		}
	}
	for _, src := range peerRanges {
		for _, m := range []struct{ seen, ours netip.Prefix }{{p.LocalPodCIDR, cfg.PodCIDR}, {p.LocalExternalCIDR, cfg.ExternalCIDR}} {
			c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: concat(
				ifname(expr.MetaKeyIIFNAME, f.iface), in(saddr, src), in(daddr, m.seen),
				prefixNAT(expr.NATTypeDestNAT, m.ours))})
		}
	}

	post := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: srcNATPriority})
	for _, dst := range peerRanges {
		for _, m := range []struct{ ours, seen netip.Prefix }{{cfg.PodCIDR, p.LocalPodCIDR}, {cfg.ExternalCIDR, p.LocalExternalCIDR}} {
			c.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: concat(
				ifname(expr.MetaKeyOIFNAME, f.iface), in(daddr, dst), in(saddr, m.ours),
				prefixNAT(expr.NATTypeSourceNAT, m.seen))})
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: concat(
			ifname(expr.MetaKeyOIFNAME, f.iface), in(daddr, dst),
			prefixNAT(expr.NATTypeSourceNAT, netip.PrefixFrom(TunnelAddress(p.LocalExternalCIDR), 32)))})
	}

	// Counters: every packet from the peer as it arrives, every packet to
	// it as it leaves (before translation, addresses in our view).
	in1 := c.AddChain(&nftables.Chain{Name: "count-in", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityMangle})
	out1 := c.AddChain(&nftables.Chain{Name: "count-out", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityMangle})
	for _, r := range peerRanges {
		c.AddRule(&nftables.Rule{Table: t, Chain: in1, Exprs: concat(
			ifname(expr.MetaKeyIIFNAME, f.iface), in(saddr, r), []expr.Any{&expr.Counter{}})})
		c.AddRule(&nftables.Rule{Table: t, Chain: out1, Exprs: concat(
			ifname(expr.MetaKeyOIFNAME, f.iface), in(daddr, r), []expr.Any{&expr.Counter{}})})
	}
	return nil
}

// ExposedSet is the set, in each peer's table, of the addresses the peer
// may open connections to.
const ExposedSet = "exposed"

// TransitMap is the map, in a transit peer's table, from the addresses
// it opens connections to (this cluster's external range in its view) to
// the pods of other peers they lead to.
const TransitMap = "transit"

// TransitTargetsSet is the set, in a transit peer's table, of its
// routes' targets: all its connections may leave through the tunnel to.
const TransitTargetsSet = "transit-targets"

func targetElements(p Peer) []nftables.SetElement {
	seen := map[netip.Addr]bool{}
	var out []nftables.SetElement
	for _, r := range p.TransitRoutes {
		if r.Target.Is4() && !seen[r.Target] {
			seen[r.Target] = true
			out = append(out, nftables.SetElement{Key: r.Target.AsSlice()})
		}
	}
	return out
}

// reachable is what p may open connections to: what is exposed to it,
// and the targets of its transit routes.
func reachable(p Peer) []netip.Prefix {
	out := slices.Clone(p.Exposed)
	for _, r := range p.TransitRoutes {
		out = append(out, netip.PrefixFrom(r.Target, 32))
	}
	return out
}

// transitElements are the elements of p's transit map: each route's
// address in p's view, to its target.
func transitElements(cfg Config, p Peer) []nftables.SetElement {
	var out []nftables.SetElement
	for _, r := range p.TransitRoutes {
		if key, ok := ipam.Translate(r.Address, cfg.ExternalCIDR, p.LocalExternalCIDR); ok && key.Is4() && r.Target.Is4() {
			out = append(out, nftables.SetElement{Key: key.AsSlice(), Val: r.Target.AsSlice()})
		}
	}
	return out
}

func exposedElements(exposed []netip.Prefix) []nftables.SetElement {
	var out []nftables.SetElement
	for _, p := range exposed {
		if p.Addr().Is4() && p.Bits() == 32 {
			out = append(out, nftables.SetElement{Key: p.Addr().AsSlice()})
		}
	}
	return out
}

// setChunk is how many elements go in one netlink message: the message
// carries them in one attribute, whose length is 16 bits (about 4000
// addresses).
const setChunk = 1000

// inChunks calls do on elements, setChunk at a time.
func inChunks(elements []nftables.SetElement, do func([]nftables.SetElement) error) error {
	for len(elements) > 0 {
		n := min(len(elements), setChunk)
		if err := do(elements[:n]); err != nil {
			return err
		}
		elements = elements[n:]
	}
	return nil
}

// syncExposed makes the elements of p's set exactly p.Exposed.
func syncExposed(c *nftables.Conn, p Peer) error {
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: PeerTable(p.ID)}
	set, err := c.GetSetByName(t, ExposedSet)
	if err != nil {
		return fmt.Errorf("the set of what peer %s may reach: %w", p.ID, err)
	}
	have, err := c.GetSetElements(set)
	if err != nil {
		return fmt.Errorf("the elements of what peer %s may reach: %w", p.ID, err)
	}
	want := map[netip.Addr]bool{}
	for _, e := range exposedElements(reachable(p)) {
		a, _ := netip.AddrFromSlice(e.Key)
		want[a] = true
	}
	var stale []nftables.SetElement
	for _, e := range have {
		a, ok := netip.AddrFromSlice(e.Key)
		if ok && want[a] {
			delete(want, a)
			continue
		}
		stale = append(stale, nftables.SetElement{Key: e.Key})
	}
	var fresh []nftables.SetElement
	for a := range want {
		fresh = append(fresh, nftables.SetElement{Key: a.AsSlice()})
	}
	if len(stale) == 0 && len(fresh) == 0 {
		return nil
	}
	if err := inChunks(stale, func(e []nftables.SetElement) error { return c.SetDeleteElements(set, e) }); err != nil {
		return err
	}
	if err := inChunks(fresh, func(e []nftables.SetElement) error { return c.SetAddElements(set, e) }); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("updating what peer %s may reach: %w", p.ID, err)
	}
	return nil
}

// syncTransit makes the elements of p's transit map exactly its routes.
// The connections through an address that goes or leads elsewhere are
// forgotten: they would keep their old target while packets flow.
func syncTransit(c *nftables.Conn, cfg Config, p Peer) error {
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: PeerTable(p.ID)}
	m, err := c.GetSetByName(t, TransitMap)
	if err != nil {
		return fmt.Errorf("the transit map of peer %s: %w", p.ID, err)
	}
	have, err := c.GetSetElements(m)
	if err != nil {
		return fmt.Errorf("the elements of the transit map of peer %s: %w", p.ID, err)
	}
	want := map[netip.Addr]netip.Addr{}
	for _, e := range transitElements(cfg, p) {
		k, _ := netip.AddrFromSlice(e.Key)
		v, _ := netip.AddrFromSlice(e.Val)
		want[k] = v
	}
	var stale []nftables.SetElement
	var forget []netlink.CustomConntrackFilter
	for _, e := range have {
		k, _ := netip.AddrFromSlice(e.Key)
		v, _ := netip.AddrFromSlice(e.Val)
		if to, ok := want[k]; ok && to == v {
			delete(want, k)
			continue
		}
		stale = append(stale, nftables.SetElement{Key: e.Key})
		// The peer's own connections through that address alone: the
		// address is in its view, which other peers' ranges may overlap.
		for _, src := range []netip.Prefix{p.PodCIDR, p.ExternalCIDR} {
			f := &netlink.ConntrackFilter{}
			if err := f.AddIPNet(netlink.ConntrackOrigDstIP, ipam.IPNet(netip.PrefixFrom(k, 32))); err != nil {
				return err
			}
			if err := f.AddIPNet(netlink.ConntrackOrigSrcIP, ipam.IPNet(src)); err != nil {
				return err
			}
			forget = append(forget, f)
		}
	}
	fresh := make([]nftables.SetElement, 0, len(want))
	for k, v := range want {
		fresh = append(fresh, nftables.SetElement{Key: k.AsSlice(), Val: v.AsSlice()})
	}
	if len(stale) == 0 && len(fresh) == 0 {
		return nil
	}
	if err := inChunks(stale, func(e []nftables.SetElement) error { return c.SetDeleteElements(m, e) }); err != nil {
		return err
	}
	if err := inChunks(fresh, func(e []nftables.SetElement) error { return c.SetAddElements(m, e) }); err != nil {
		return err
	}
	// The targets' set, made anew with the map (a handful of elements
	// per pod, in the same transaction).
	targets, err := c.GetSetByName(t, TransitTargetsSet)
	if err != nil {
		return fmt.Errorf("the transit targets of peer %s: %w", p.ID, err)
	}
	c.FlushSet(targets)
	if err := inChunks(targetElements(p), func(e []nftables.SetElement) error { return c.SetAddElements(targets, e) }); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("updating the transit map of peer %s: %w", p.ID, err)
	}
	if len(forget) > 0 {
		if _, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, forget...); err != nil {
			return fmt.Errorf("forgetting the connections through transit routes that changed: %w", err)
		}
	}
	return nil
}

// counters are packets and bytes seen by the rules of a chain.
type counters struct{ packets, bytes uint64 }

// peerCounters reads what went in from the peer and out to it.
func (f *firewall) peerCounters(id string) (in, out counters, err error) {
	c, err := nftables.New()
	if err != nil {
		return in, out, fmt.Errorf("opening nftables: %w", err)
	}
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: PeerTable(id)}
	if in, err = chainCounters(c, t, "count-in"); err != nil {
		return in, out, err
	}
	out, err = chainCounters(c, t, "count-out")
	return in, out, err
}

// refused reads how many packets from the tunnel the gateway dropped: to
// somewhere other than this cluster's pods, to the gateway other than at
// its tunnel address, or to a pod not exposed to the peer that sent it.
func (f *firewall) refused(peers []Peer) (uint64, error) {
	c, err := nftables.New()
	if err != nil {
		return 0, fmt.Errorf("opening nftables: %w", err)
	}
	var total uint64
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: GatewayTable}
	for _, chain := range []string{"forward", "input"} {
		n, err := chainCounters(c, t, chain)
		if err != nil {
			return 0, err
		}
		total += n.packets
	}
	for _, p := range peers {
		for _, chain := range []string{"reach", "transit-out"} {
			n, err := chainCounters(c, &nftables.Table{Family: nftables.TableFamilyIPv4, Name: PeerTable(p.ID)}, chain)
			if err != nil {
				return 0, err
			}
			total += n.packets
		}
	}
	return total, nil
}

func chainCounters(c *nftables.Conn, t *nftables.Table, chain string) (counters, error) {
	rules, err := c.GetRules(t, &nftables.Chain{Name: chain, Table: t})
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return counters{}, nil
		}
		return counters{}, fmt.Errorf("reading the counters of %s %s: %w", t.Name, chain, err)
	}
	var n counters
	for _, r := range rules {
		for _, e := range r.Exprs {
			if ctr, ok := e.(*expr.Counter); ok {
				n.packets += ctr.Packets
				n.bytes += ctr.Bytes
			}
		}
	}
	return n, nil
}

// Offsets of the IPv4 source and destination addresses.
const (
	saddr = 12
	daddr = 16
)

// originalDirection matches a packet of a connection's opener.
func originalDirection() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeyDIRECTION},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0}}, // IP_CT_DIR_ORIGINAL
	}
}

// replyDirection matches a packet that answers a connection opened from
// this side (conntrack's reply direction).
func replyDirection() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeyDIRECTION},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{1}}, // IP_CT_DIR_REPLY
	}
}

func concat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// ifname matches the input or output interface by name.
func ifname(key expr.MetaKey, name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b},
	}
}

// in matches the address at offset inside p; notIn, outside it.
func in(offset uint32, p netip.Prefix) []expr.Any { return prefixMatch(offset, p, expr.CmpOpEq) }

func notIn(offset uint32, p netip.Prefix) []expr.Any { return prefixMatch(offset, p, expr.CmpOpNeq) }

func prefixMatch(offset uint32, p netip.Prefix, op expr.CmpOp) []expr.Any {
	return append([]expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4}}, masked(p, op)...)
}

// masked compares register 1, masked to p's length, with p's network.
func masked(p netip.Prefix, op expr.CmpOp) []expr.Any {
	m := make([]byte, 4)
	for i := range p.Bits() {
		m[i/8] |= 0x80 >> (i % 8)
	}
	a := p.Masked().Addr().As4()
	return []expr.Any{
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: m, Xor: make([]byte, 4)},
		&expr.Cmp{Op: op, Register: 1, Data: a[:]},
	}
}

// prefixNAT translates the source or destination address into to,
// keeping the host bits (to's size must be the matched range's).
func prefixNAT(kind expr.NATType, to netip.Prefix) []expr.Any {
	first, last := to.Masked().Addr().As4(), ipam.Last(to).As4()
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: first[:]},
		&expr.Immediate{Register: 2, Data: last[:]},
		&expr.NAT{Type: kind, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegAddrMax: 2, Prefix: to.Bits() < 32},
	}
}

// tcpSYN matches TCP segments with SYN set and RST not.
func tcpSYN() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x02 | 0x04}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x02}},
	}
}

// ctMatch matches the address conntrack recorded for the connection's
// opener (key CtKeySRC or CtKeyDST, original direction) inside p.
func ctMatch(key expr.CtKey, p netip.Prefix) []expr.Any {
	return append([]expr.Any{&expr.Ct{Register: 1, Key: key, Direction: 0}}, masked(p, expr.CmpOpEq)...)
}
