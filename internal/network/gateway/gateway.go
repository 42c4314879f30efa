// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"

	"github.com/liqo-go/liqo/internal/network/noderouting"
)

// Gateway is the data plane of one cluster's side of its tunnels, in the
// network namespace of the process: the WireGuard device, the routes to
// the peers' ranges, the nftables tables that translate and filter, and a
// prober per peer. Apply converges it to a Config; it is safe for
// concurrent use.
type Gateway struct {
	log logr.Logger

	mu      sync.Mutex
	applied *Config
	// refused are the peers of the last configuration left out, and why.
	refused []PeerStatus
	tunnel  *tunnel
	prober  *prober
	fw      firewall
}

// New returns a gateway that has made nothing yet.
func New(log logr.Logger) *Gateway {
	return &Gateway{log: log}
}

// Apply makes the data plane what cfg says. With no peer, nothing is left:
// no interface, route or table (and nothing else of cfg is looked at).
// The first Apply of a process rebuilds every table, since a gateway that
// died may have left some behind.
//
// An invalid cfg (this cluster's part of it) changes nothing and is an
// error. A peer is checked on its own (admission): one whose parameters
// would disturb this node or another peer is left out, and Status says
// why, while every other peer is applied.
func (g *Gateway) Apply(ctx context.Context, cfg Config) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(cfg.Peers) == 0 {
		// Nothing to run: nothing of the configuration is needed either.
		err := g.teardown()
		g.applied, g.refused = &cfg, nil
		return err
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid gateway configuration: %w", err)
	}
	inUse, err := noderouting.InUse(RouteProtocol, routeAgentProtocol)
	if err != nil {
		return err
	}
	adm := newAdmission(cfg, inUse)
	for _, p := range cfg.Peers {
		adm.admit(ctx, p)
	}
	for _, r := range adm.refuse {
		g.log.Info("Peer refused", "peer", r.ID, "reason", r.Refused)
	}
	cfg.Peers = adm.accept
	g.refused = adm.refuse
	var dropped int
	if cfg.Peers, dropped = usableTransit(cfg); dropped > 0 {
		g.log.Info("Transit routes left out: not from this cluster's external range, or not to another peer's pods", "routes", dropped)
	}
	if len(cfg.Peers) == 0 {
		err := g.teardown()
		g.applied = &cfg
		return err
	}
	g.fw.iface = cfg.iface()
	mtu := cfg.MTU
	if mtu == 0 {
		mtu = underlayMTU() - Overhead
	}
	if g.tunnel != nil && g.tunnel.name != cfg.iface() {
		g.closeTunnel()
	}
	if g.tunnel == nil {
		t, err := openTunnel(g.log, cfg.iface(), mtu, cfg.UAPI)
		if err != nil {
			return err
		}
		g.tunnel = t
	}
	// The interface, its routes and the translation come first, the
	// peers' sessions last: a packet a peer queued while it waited for the
	// session (its probes) arrives the moment the session is up, and must
	// meet the rules. One that came before them would make a conntrack
	// entry without translation, which the flow would keep.
	if err := setUpLink(cfg.iface(), TunnelAddress(cfg.ExternalCIDR)); err != nil {
		return err
	}
	link, err := netlink.LinkByName(cfg.iface())
	if err != nil {
		return fmt.Errorf("finding the tunnel interface %s: %w", cfg.iface(), err)
	}
	if link.Attrs().MTU != mtu {
		if err := netlink.LinkSetMTU(link, mtu); err != nil {
			return fmt.Errorf("setting the MTU of %s to %d: %w", cfg.iface(), mtu, err)
		}
	}
	var routes []noderouting.Route
	for _, p := range cfg.Peers {
		for _, dst := range []netip.Prefix{p.PodCIDR, p.ExternalCIDR} {
			routes = append(routes, noderouting.Route{Dst: dst, LinkIndex: link.Attrs().Index, Src: TunnelAddress(cfg.ExternalCIDR)})
		}
	}
	if err := routeTable(uint16(cfg.ListenPort)).Sync(routes); err != nil { //nolint:gosec // Validate checked it is a port
		return err
	}
	if err := g.fw.apply(cfg, g.changedTables(cfg)); err != nil {
		return err
	}
	if err := g.tunnel.configure(cfg.PrivateKey, cfg.ListenPort, cfg.Peers); err != nil {
		return err
	}
	if g.prober == nil {
		p, err := newProber(g.down)
		if err != nil {
			return err
		}
		g.prober = p
	}
	g.prober.setTargets(cfg.Peers)
	g.applied = &cfg
	return nil
}

// changedTables names the tables whose rules cfg changes: all of them
// after a start, else the gateway's when this cluster's ranges change and
// a peer's when its entry does.
func (g *Gateway) changedTables(cfg Config) map[string]bool {
	changed := map[string]bool{}
	prev := g.applied
	if prev == nil || prev.iface() != cfg.iface() || prev.PodCIDR != cfg.PodCIDR || prev.ExternalCIDR != cfg.ExternalCIDR {
		changed[GatewayTable] = true
		for _, p := range cfg.Peers {
			changed[PeerTable(p.ID)] = true
		}
		return changed
	}
	before := map[string]Peer{}
	for _, p := range prev.Peers {
		before[p.ID] = p
	}
	// A peer's rules are its four ranges and whether it reaches every
	// pod: a new key or endpoint leaves them, and its connections, as
	// they are; so do new exposed addresses, which change the elements
	// of its set alone.
	type rules struct {
		ranges       [4]netip.Prefix
		all, transit bool
	}
	ranges := func(p Peer) rules {
		return rules{[4]netip.Prefix{p.PodCIDR, p.ExternalCIDR, p.LocalPodCIDR, p.LocalExternalCIDR}, p.ReachAll, p.Transit}
	}
	for _, p := range cfg.Peers {
		if old, ok := before[p.ID]; !ok || ranges(old) != ranges(p) {
			changed[PeerTable(p.ID)] = true
		}
	}
	// The gateway's filter lets each transit peer's connections out
	// through the tunnel again: it follows who has transit, and their
	// ranges.
	if !slices.Equal(transitPeers(prev.Peers), transitPeers(cfg.Peers)) {
		changed[GatewayTable] = true
	}
	return changed
}

// transitPeers lists the ranges of the peers with transit, in order: what
// the gateway table's transit rules are made of.
func transitPeers(peers []Peer) [][3]netip.Prefix {
	var out [][3]netip.Prefix
	for _, p := range peers {
		if p.Transit {
			out = append(out, [3]netip.Prefix{p.PodCIDR, p.ExternalCIDR, p.LocalExternalCIDR})
		}
	}
	return out
}

// down is the prober telling that a peer does not answer: a client
// starts the session over (every probe interval until the peer first
// answered, then at most every other), and probes at once, so that a
// peer that came up after it, or restarted and forgot the session, is
// reached as soon as it can answer. A server waits for its client.
func (g *Gateway) down(peerID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tunnel == nil || g.applied == nil {
		return
	}
	for _, p := range g.applied.Peers {
		if p.ID == peerID && p.Client() {
			if err := g.tunnel.restart(p.PublicKey); err != nil {
				g.log.Error(err, "Restarting the session with a silent peer", "peer", peerID)
				continue
			}
			// The restart dropped what was queued for the old session:
			// a probe now opens the new one.
			if g.prober != nil {
				g.prober.probeNow(peerID)
			}
		}
	}
}

// PeerStatus is what the gateway knows of one peer's tunnel.
type PeerStatus struct {
	// ID is the peer's ClusterID.
	ID string `json:"id"`
	// Established is true while the peer's gateway answered a probe
	// through the tunnel in the last ProbeLosses intervals.
	Established bool `json:"established"`
	// Latency is the round-trip time of the last probe answered.
	Latency time.Duration `json:"latency,omitempty"`
	// LastHandshake is when the last WireGuard handshake completed.
	LastHandshake time.Time `json:"lastHandshake,omitzero"`
	// Endpoint is where the peer's packets come from (or go to).
	Endpoint string `json:"endpoint,omitempty"`
	// RxBytes and TxBytes count what WireGuard received from and sent to
	// the peer, encrypted.
	RxBytes uint64 `json:"rxBytes"`
	TxBytes uint64 `json:"txBytes"`
	// RxPackets and TxPackets count the packets that came out of the
	// tunnel from the peer and went into it to the peer.
	RxPackets uint64 `json:"rxPackets"`
	TxPackets uint64 `json:"txPackets"`
	// Refused says why the gateway left the peer out of its data plane;
	// empty for a peer it carries.
	Refused string `json:"refused,omitempty"`
	// RangesInUse are the node's addresses and routes that the peer's
	// ranges overlap, when that is why it was refused.
	RangesInUse []netip.Prefix `json:"rangesInUse,omitempty"`
}

// Status is the state of every peer's tunnel, in the order of the Config
// (the peers refused last), and the packets the gateway refused.
type Status struct {
	Peers []PeerStatus `json:"peers,omitempty"`
	// Refused counts packets out of the tunnel dropped for going anywhere
	// but this cluster's pods or the gateway's tunnel address, or opening
	// a connection to a pod not exposed to their peer.
	Refused uint64 `json:"refused"`
}

// Status reads the tunnels' state.
func (g *Gateway) Status() (Status, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var st Status
	if g.tunnel == nil || g.applied == nil {
		st.Peers = append(st.Peers, g.refused...)
		return st, nil
	}
	wg, err := g.tunnel.stats()
	if err != nil {
		return st, err
	}
	var errs []error
	for _, p := range g.applied.Peers {
		ps := PeerStatus{ID: p.ID}
		if s, ok := wg[p.PublicKey]; ok {
			ps.LastHandshake, ps.RxBytes, ps.TxBytes, ps.Endpoint = s.lastHandshake, s.rxBytes, s.txBytes, s.endpoint
		}
		if g.prober != nil {
			pr := g.prober.status(p.ID)
			ps.Established, ps.Latency = pr.established, pr.latency
		}
		in, out, err := g.fw.peerCounters(p.ID)
		if err != nil {
			errs = append(errs, err)
		}
		ps.RxPackets, ps.TxPackets = in.packets, out.packets
		st.Peers = append(st.Peers, ps)
	}
	st.Peers = append(st.Peers, g.refused...)
	refused, err := g.fw.refused(g.applied.Peers)
	if err != nil {
		errs = append(errs, err)
	}
	st.Refused = refused
	return st, errors.Join(errs...)
}

// Close removes everything the gateway made.
func (g *Gateway) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.teardown()
}

func (g *Gateway) teardown() error {
	if g.prober != nil {
		g.prober.close()
		g.prober = nil
	}
	g.closeTunnel()
	return errors.Join(routeTable(0).Remove(), g.fw.remove())
}

func (g *Gateway) closeTunnel() {
	if g.tunnel != nil {
		g.tunnel.close()
		g.tunnel = nil
	}
}
