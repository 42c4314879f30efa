// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package gateway

import (
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

// Validate says what is wrong with c, naming the field: a missing key or
// range, ranges of the wrong size, peers whose ranges overlap this
// cluster's or each other's (the tunnel could not tell them apart).
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
	checkRange := func(field string, p netip.Prefix) {
		switch {
		case !p.IsValid():
			errs = append(errs, fmt.Errorf("%s: required", field))
		case !p.Addr().Is4():
			errs = append(errs, fmt.Errorf("%s: %s is not IPv4", field, p))
		case p != p.Masked():
			errs = append(errs, fmt.Errorf("%s: %s has host bits set (%s)", field, p, p.Masked()))
		case p.Bits() > 30:
			errs = append(errs, fmt.Errorf("%s: %s is smaller than a /30", field, p))
		}
	}
	checkRange("podCIDR", c.PodCIDR)
	checkRange("externalCIDR", c.ExternalCIDR)
	if ipam.Overlaps(c.PodCIDR, c.ExternalCIDR) {
		errs = append(errs, fmt.Errorf("externalCIDR: %s overlaps podCIDR %s", c.ExternalCIDR, c.PodCIDR))
	}
	seen := map[string]bool{}
	keys := map[wgkey.Key]string{}
	var taken []netip.Prefix
	for i, p := range c.Peers {
		field := fmt.Sprintf("peers[%d]", i)
		if p.ID == "" {
			errs = append(errs, fmt.Errorf("%s.id: required", field))
		} else if seen[p.ID] {
			errs = append(errs, fmt.Errorf("%s.id: %s appears twice", field, p.ID))
		}
		seen[p.ID] = true
		if p.PublicKey.IsZero() {
			errs = append(errs, fmt.Errorf("%s.publicKey: required", field))
		} else if other, ok := keys[p.PublicKey]; ok {
			errs = append(errs, fmt.Errorf("%s.publicKey: the key of peer %s too", field, other))
		}
		keys[p.PublicKey] = p.ID
		if p.Endpoint != "" {
			if _, err := splitEndpoint(p.Endpoint); err != nil {
				errs = append(errs, fmt.Errorf("%s.endpoint: %w", field, err))
			}
		}
		checkRange(field+".podCIDR", p.PodCIDR)
		checkRange(field+".externalCIDR", p.ExternalCIDR)
		checkRange(field+".localPodCIDR", p.LocalPodCIDR)
		checkRange(field+".localExternalCIDR", p.LocalExternalCIDR)
		if p.LocalPodCIDR.IsValid() && p.LocalPodCIDR.Bits() != c.PodCIDR.Bits() {
			errs = append(errs, fmt.Errorf("%s.localPodCIDR: %s is not the size of podCIDR %s", field, p.LocalPodCIDR, c.PodCIDR))
		}
		if p.LocalExternalCIDR.IsValid() && p.LocalExternalCIDR.Bits() != c.ExternalCIDR.Bits() {
			errs = append(errs, fmt.Errorf("%s.localExternalCIDR: %s is not the size of externalCIDR %s", field, p.LocalExternalCIDR, c.ExternalCIDR))
		}
		for _, r := range []struct {
			name string
			p    netip.Prefix
		}{{"podCIDR", p.PodCIDR}, {"externalCIDR", p.ExternalCIDR}} {
			for _, local := range []netip.Prefix{c.PodCIDR, c.ExternalCIDR} {
				if ipam.Overlaps(r.p, local) {
					errs = append(errs, fmt.Errorf("%s.%s: %s overlaps the local range %s; it must be remapped", field, r.name, r.p, local))
				}
			}
			if i := slices.IndexFunc(taken, func(t netip.Prefix) bool { return ipam.Overlaps(t, r.p) }); i >= 0 {
				errs = append(errs, fmt.Errorf("%s.%s: %s overlaps %s, taken before", field, r.name, r.p, taken[i]))
			}
			taken = append(taken, r.p)
		}
	}
	return errors.Join(errs...)
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
