// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/liqo-go/liqo/internal/network/ipam"
	"github.com/liqo-go/liqo/internal/network/wgkey"
)

// DefaultInterface is the name of the tunnel device.
const DefaultInterface = "liqo-tunnel"

// Overhead is what WireGuard adds to a packet in the worst case: an IPv6
// header (40), UDP (8) and its own header and tag (32). The tunnel's MTU
// is the underlay's minus this.
const Overhead = 80

// DefaultKeepalive is how often a client sends a keepalive when nothing
// else goes to the peer, so that NATs on the way keep the path open.
const DefaultKeepalive = 25 * time.Second

// Config is the state a gateway converges to: its key and port, this
// cluster's ranges, and one peer per remote cluster. Apply it whole; a
// peer missing from it is removed with everything made for it.
type Config struct {
	// Interface names the tunnel device; DefaultInterface when empty.
	Interface string `json:"interface,omitempty"`
	// PrivateKey is this gateway's WireGuard key. Keep it across restarts:
	// a new key means every peer must learn it again.
	PrivateKey wgkey.Key `json:"privateKey"`
	// ListenPort is the UDP port the tunnel listens on, on every address.
	ListenPort int `json:"listenPort"`
	// MTU of the tunnel device; 0 takes the MTU of the link of the
	// default route (1500 if there is none) minus Overhead.
	MTU int `json:"mtu,omitempty"`
	// PodCIDR is this cluster's pod range: all a peer may reach through
	// the tunnel.
	PodCIDR netip.Prefix `json:"podCIDR"`
	// ExternalCIDR is this cluster's range for addresses that are neither
	// its pods nor a peer's. Its first host is the gateway's own address
	// in the tunnel (TunnelAddress), which peers probe.
	ExternalCIDR netip.Prefix `json:"externalCIDR"`
	// UAPI serves the WireGuard configuration socket
	// (/var/run/wireguard/<interface>.sock), so `wg show` reads the
	// tunnel.
	UAPI bool `json:"uapi,omitempty"`
	// Peers are the remote clusters, each with its own tunnel.
	Peers []Peer `json:"peers,omitempty"`
}

// Peer is one remote cluster's gateway and the address spaces agreed with
// it. The ranges come in two views: how this cluster sees the peer (its
// own decision, which decides routes and the sources accepted from the
// peer) and how the peer sees this cluster (the peer's decision, which
// decides the translation this gateway applies).
type Peer struct {
	// ID is the peer's ClusterID: it names the peer's nftables table and
	// its metrics.
	ID string `json:"id"`
	// PublicKey is the peer gateway's WireGuard key: the only key whose
	// packets are taken as the peer's.
	PublicKey wgkey.Key `json:"publicKey"`
	// Endpoint is host:port of the peer's gateway when this gateway is the
	// client; empty when the peer is the client and comes to us.
	Endpoint string `json:"endpoint,omitempty"`
	// PodCIDR and ExternalCIDR are the peer's ranges as this cluster sees
	// them (remapped when they overlap a local range or another peer's).
	PodCIDR      netip.Prefix `json:"podCIDR"`
	ExternalCIDR netip.Prefix `json:"externalCIDR"`
	// LocalPodCIDR and LocalExternalCIDR are this cluster's ranges as the
	// peer sees them: traffic to the peer leaves translated into them, and
	// traffic from the peer to them is translated back.
	LocalPodCIDR      netip.Prefix `json:"localPodCIDR"`
	LocalExternalCIDR netip.Prefix `json:"localExternalCIDR"`
	// Keepalive is how often a client sends a keepalive; DefaultKeepalive
	// when zero. A server sends none.
	Keepalive time.Duration `json:"keepalive,omitempty"`
	// ReachAll lets the peer open connections to every pod of this
	// cluster; otherwise only to the addresses of Exposed (this
	// cluster's own view of its pods). Answers to connections this
	// cluster opened pass either way.
	ReachAll bool `json:"reachAll,omitempty"`
	// Exposed are this cluster's pod addresses the peer may open
	// connections to, as /32s.
	Exposed []netip.Prefix `json:"exposed,omitempty"`
	// Transit lets the peer, an aggregator's consumer, open connections
	// through this gateway to pods that run at other peers (the
	// aggregator's providers): to TransitRoutes alone, each an address of
	// this cluster's external range that leads to one such pod. Without
	// it, nothing the peer sends leaves through the tunnel again.
	Transit bool `json:"transit,omitempty"`
	// TransitRoutes are the peer's ways through: a route whose address is
	// not in this cluster's external range (or is the tunnel address), or
	// whose target is not in another peer's pod range, is left out.
	TransitRoutes []TransitRoute `json:"transitRoutes,omitempty"`
}

// TransitRoute leads a peer from an address of this cluster's external
// range (in this cluster's view; the peer reaches it in its own) to a pod
// of another peer, Via, at the address this cluster sees it at.
type TransitRoute struct {
	Address netip.Addr `json:"address"`
	Target  netip.Addr `json:"target"`
	Via     string     `json:"via"`
}

// usableTransit keeps, of each peer's transit routes, those whose
// address is this cluster's external range (not the tunnel address) and
// whose target is inside the pod range of the route's peer (Via: another
// accepted peer, not the transit peer itself); what is dropped is
// counted. A peer seen elsewhere takes none of another's routes.
func usableTransit(cfg Config) (peers []Peer, dropped int) {
	peers = slices.Clone(cfg.Peers)
	for i := range peers {
		p := &peers[i]
		if !p.Transit {
			dropped += len(p.TransitRoutes)
			p.TransitRoutes = nil
			continue
		}
		var keep []TransitRoute
		for _, r := range p.TransitRoutes {
			ok := cfg.ExternalCIDR.Contains(r.Address) && r.Address != TunnelAddress(cfg.ExternalCIDR) &&
				r.Via != p.ID && slices.ContainsFunc(peers, func(o Peer) bool { return o.ID == r.Via && o.PodCIDR.Contains(r.Target) })
			if ok {
				keep = append(keep, r)
			} else {
				dropped++
			}
		}
		p.TransitRoutes = keep
	}
	return peers, dropped
}

// TunnelAddress is the gateway's own address in the tunnel: the first host
// of the external range.
func TunnelAddress(external netip.Prefix) netip.Addr {
	return external.Masked().Addr().Next()
}

// ProbeAddress is the address, in this cluster's view, at which the
// peer's gateway answers probes: its tunnel address, translated.
func (p Peer) ProbeAddress() netip.Addr { return TunnelAddress(p.ExternalCIDR) }

// Client says whether this gateway opens the tunnel (it knows the peer's
// endpoint) rather than waits for the peer.
func (p Peer) Client() bool { return p.Endpoint != "" }

func (c Config) iface() string {
	if c.Interface == "" {
		return DefaultInterface
	}
	return c.Interface
}

// Validate says what is wrong with this cluster's part of c, naming the
// field: a missing key or range, ranges of the wrong size. The peers are
// checked one by one when c is applied (Gateway.Apply), so that one
// peer's bad parameters refuse that peer alone.
func (c Config) Validate() error {
	var errs []error
	if c.PrivateKey.IsZero() {
		errs = append(errs, errors.New("privateKey: required"))
	}
	if c.ListenPort < 1 || c.ListenPort > 65535 {
		errs = append(errs, fmt.Errorf("listenPort: %d is not a port", c.ListenPort))
	}
	if c.MTU != 0 && (c.MTU < 576 || c.MTU > 65535) {
		errs = append(errs, fmt.Errorf("mtu: %d is out of 576..65535", c.MTU))
	}
	if len(c.iface()) > 15 {
		errs = append(errs, fmt.Errorf("interface: %q is longer than 15 characters", c.iface()))
	}
	errs = append(errs, checkRange("podCIDR", c.PodCIDR), checkRange("externalCIDR", c.ExternalCIDR))
	if ipam.Overlaps(c.PodCIDR, c.ExternalCIDR) {
		errs = append(errs, fmt.Errorf("externalCIDR: %s overlaps podCIDR %s", c.ExternalCIDR, c.PodCIDR))
	}
	return errors.Join(errs...)
}

// checkRange refuses what is not a masked IPv4 range of /30 or larger.
func checkRange(field string, p netip.Prefix) error {
	switch {
	case !p.IsValid():
		return fmt.Errorf("%s: required", field)
	case !p.Addr().Is4():
		return fmt.Errorf("%s: %s is not IPv4", field, p)
	case p != p.Masked():
		return fmt.Errorf("%s: %s has host bits set (%s)", field, p, p.Masked())
	case p.Bits() > 30:
		return fmt.Errorf("%s: %s is smaller than a /30", field, p)
	}
	return nil
}

// admission decides, peer by peer, which of a configuration's peers the
// gateway carries. A peer is refused, alone, when its parameters would
// disturb this node or another peer: a key that is no key, this
// gateway's own or one an earlier peer holds; an endpoint that is not an
// address a gateway can be at (special, this node's, inside this
// cluster's ranges or the peer's own); ranges that overlap this
// cluster's, an earlier peer's, a special range (ipam.Special), or
// anything the node already uses (inUse: its addresses and its routes). Earlier means
// before in the configuration's order: the peer that was there first
// keeps what a later one claims too.
type admission struct {
	cfg    Config
	own    wgkey.Key
	inUse  []netip.Prefix
	ids    map[string]bool
	keys   map[wgkey.Key]string
	taken  []taken
	accept []Peer
	refuse []PeerStatus
}

type taken struct {
	p  netip.Prefix
	by string
}

func newAdmission(cfg Config, inUse []netip.Prefix) *admission {
	a := &admission{cfg: cfg, own: cfg.PrivateKey.Public(), inUse: inUse, ids: map[string]bool{}, keys: map[wgkey.Key]string{}}
	a.taken = []taken{{cfg.PodCIDR, "this cluster's pod range"}, {cfg.ExternalCIDR, "this cluster's external range"}}
	for _, s := range ipam.Special {
		a.taken = append(a.taken, taken{s, "a special range"})
	}
	return a
}

// admit decides on p, resolving its endpoint: a peer that is taken comes
// back with its endpoint as an address.
func (a *admission) admit(ctx context.Context, p Peer) {
	if conflicts, err := a.check(ctx, &p); err != nil {
		a.refuse = append(a.refuse, PeerStatus{ID: p.ID, Refused: err.Error(), RangesInUse: conflicts})
		return
	}
	a.ids[p.ID] = true
	a.keys[p.PublicKey] = p.ID
	a.taken = append(a.taken, taken{p.PodCIDR, "the pod range of peer " + p.ID}, taken{p.ExternalCIDR, "the external range of peer " + p.ID})
	a.accept = append(a.accept, p)
}

func (a *admission) check(ctx context.Context, p *Peer) ([]netip.Prefix, error) {
	switch {
	case p.ID == "":
		return nil, errors.New("id: required")
	case a.ids[p.ID]:
		return nil, fmt.Errorf("id: %s appears twice", p.ID)
	case p.PublicKey.IsZero():
		return nil, errors.New("publicKey: required")
	case p.PublicKey == a.own:
		return nil, errors.New("publicKey: this gateway's own key")
	case a.keys[p.PublicKey] != "":
		return nil, fmt.Errorf("publicKey: the key of peer %s, which had it first", a.keys[p.PublicKey])
	}
	var errs []error
	for _, r := range []struct {
		field string
		p     netip.Prefix
		bits  int
	}{{"podCIDR", p.PodCIDR, 0}, {"externalCIDR", p.ExternalCIDR, 0}, {"localPodCIDR", p.LocalPodCIDR, a.cfg.PodCIDR.Bits()}, {"localExternalCIDR", p.LocalExternalCIDR, a.cfg.ExternalCIDR.Bits()}} {
		if err := checkRange(r.field, r.p); err != nil {
			errs = append(errs, err)
		} else if r.bits != 0 && r.p.Bits() != r.bits {
			errs = append(errs, fmt.Errorf("%s: %s is not the size of this cluster's range (/%d)", r.field, r.p, r.bits))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if ipam.Overlaps(p.PodCIDR, p.ExternalCIDR) {
		return nil, fmt.Errorf("externalCIDR: %s overlaps podCIDR %s", p.ExternalCIDR, p.PodCIDR)
	}
	var conflicts []netip.Prefix
	for _, r := range []struct {
		field string
		p     netip.Prefix
	}{{"podCIDR", p.PodCIDR}, {"externalCIDR", p.ExternalCIDR}} {
		if i := slices.IndexFunc(a.taken, func(t taken) bool { return ipam.Overlaps(t.p, r.p) }); i >= 0 {
			errs = append(errs, fmt.Errorf("%s: %s overlaps %s (%s)", r.field, r.p, a.taken[i].p, a.taken[i].by))
		}
		var here []netip.Prefix
		for _, u := range a.inUse {
			if ipam.Overlaps(u, r.p) {
				here = append(here, u)
			}
		}
		if len(here) > 0 {
			errs = append(errs, fmt.Errorf("%s: %s overlaps what this node uses (%v): it would take the node's own traffic", r.field, r.p, here))
			conflicts = append(conflicts, here...)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return conflicts, err
	}
	if p.Endpoint != "" {
		ep, err := resolveEndpoint(ctx, p.Endpoint)
		if err != nil {
			return nil, fmt.Errorf("endpoint: %w", err)
		}
		// Not checked against the other peers': an endpoint is no range
		// of the peer's (the tunnel's own packets never enter a tunnel,
		// see noderouting.Table.SourcePort), so two peers may share one
		// (behind one NAT), and no peer can refuse another by naming its
		// address.
		at := netip.PrefixFrom(ep.Addr(), 32)
		for _, t := range []taken{
			{a.cfg.PodCIDR, "this cluster's pod range"}, {a.cfg.ExternalCIDR, "this cluster's external range"},
			{p.PodCIDR, "the peer's own pod range"}, {p.ExternalCIDR, "the peer's own external range"},
		} {
			if t.p.Overlaps(at) {
				return nil, fmt.Errorf("endpoint: %s is inside %s (%s)", ep.Addr(), t.p, t.by)
			}
		}
		if slices.Contains(a.inUse, at) {
			return nil, fmt.Errorf("endpoint: %s is an address of this node", ep.Addr())
		}
		p.Endpoint = ep.String()
	}
	return nil, nil
}

// splitEndpoint checks host:port; the host may be a name, resolved when
// the tunnel is configured.
func splitEndpoint(endpoint string) (string, error) {
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		return "", fmt.Errorf("%q is not host:port: %w", endpoint, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q: port %q is not a port", endpoint, port)
	}
	if host == "" {
		return "", fmt.Errorf("%q has no host", endpoint)
	}
	return host, nil
}
