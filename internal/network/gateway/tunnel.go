// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package gateway

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/liqo-go/liqo/internal/network/wgkey"
)

// tunnel is the WireGuard device: a TUN interface and wireguard-go's
// device over it, in the network namespace of the process.
type tunnel struct {
	name string
	dev  *device.Device
	uapi net.Listener
	// peers is each peer's last configuration, as sent to the device.
	peers map[wgkey.Key]string
}

// openTunnel creates the TUN interface and the device; the device is up
// and listening once configure has set its key and port.
func openTunnel(log logr.Logger, name string, mtu int, serveUAPI bool) (*tunnel, error) {
	tdev, err := tun.CreateTUN(name, mtu)
	if err != nil {
		return nil, fmt.Errorf("creating the TUN device %s: %w", name, err)
	}
	wglog := &device.Logger{
		Verbosef: func(string, ...any) {},
		Errorf: func(format string, args ...any) {
			log.V(1).Info("WireGuard", "message", fmt.Sprintf(format, args...))
		},
	}
	t := &tunnel{name: name, dev: device.NewDevice(tdev, conn.NewDefaultBind(), wglog)}
	if serveUAPI {
		f, err := ipc.UAPIOpen(name)
		if err != nil {
			t.dev.Close()
			return nil, fmt.Errorf("opening the WireGuard configuration socket of %s: %w", name, err)
		}
		l, err := ipc.UAPIListen(name, f)
		if err != nil {
			t.dev.Close()
			return nil, fmt.Errorf("listening on the WireGuard configuration socket of %s: %w", name, err)
		}
		t.uapi = l
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go t.dev.IpcHandle(c)
			}
		}()
	}
	return t, nil
}

// configure sets the key, the port and the peers, replacing any peer not
// listed. The peers' endpoints are addresses (admission resolved them).
func (t *tunnel) configure(key wgkey.Key, port int, peers []Peer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "private_key=%s\nlisten_port=%d\nreplace_peers=true\n", key.Hex(), port)
	resolved := map[wgkey.Key]string{}
	for _, p := range peers {
		text := peerConfig(p)
		resolved[p.PublicKey] = text
		b.WriteString(text)
	}
	if err := t.dev.IpcSet(b.String()); err != nil {
		return fmt.Errorf("configuring WireGuard on %s: %w", t.name, err)
	}
	if err := t.dev.Up(); err != nil {
		return fmt.Errorf("bringing WireGuard up on %s: %w", t.name, err)
	}
	t.peers = resolved
	return nil
}

// peerConfig is a peer's part of the configuration protocol.
func peerConfig(p Peer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "public_key=%s\nreplace_allowed_ips=true\n", p.PublicKey.Hex())
	if p.Client() {
		keepalive := p.Keepalive
		if keepalive == 0 {
			keepalive = DefaultKeepalive
		}
		fmt.Fprintf(&b, "endpoint=%s\npersistent_keepalive_interval=%d\n", p.Endpoint, int(keepalive.Seconds()))
	}
	fmt.Fprintf(&b, "allowed_ip=%s\nallowed_ip=%s\n", p.PodCIDR, p.ExternalCIDR)
	return b.String()
}

// resolveEndpoint turns host:port into ip:port, refusing addresses a
// tunnel has no business sending to: loopback, link-local, multicast and
// unspecified ones.
func resolveEndpoint(ctx context.Context, endpoint string) (netip.AddrPort, error) {
	host, err := splitEndpoint(endpoint)
	if err != nil {
		return netip.AddrPort{}, err
	}
	_, portText, _ := net.SplitHostPort(endpoint)
	port, _ := strconv.ParseUint(portText, 10, 16)
	addr, err := netip.ParseAddr(host)
	if err != nil {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("resolving the endpoint %s: %w", endpoint, err)
		}
		if len(addrs) == 0 {
			return netip.AddrPort{}, fmt.Errorf("resolving the endpoint %s: no address", endpoint)
		}
		addr = addrs[0]
	}
	addr = addr.Unmap()
	if addr.IsLoopback() || addr.IsLinkLocalUnicast() || addr.IsMulticast() || addr.IsUnspecified() || addr.IsLinkLocalMulticast() {
		return netip.AddrPort{}, fmt.Errorf("the endpoint %s is %s, which is not an address a gateway can be at", endpoint, addr)
	}
	return netip.AddrPortFrom(addr, uint16(port)), nil
}

// peerStats is what the device knows of a peer.
type peerStats struct {
	lastHandshake    time.Time
	rxBytes, txBytes uint64
	endpoint         string
}

// stats reads every peer's counters through the configuration protocol,
// keyed by public key.
func (t *tunnel) stats() (map[wgkey.Key]peerStats, error) {
	text, err := t.dev.IpcGet()
	if err != nil {
		return nil, fmt.Errorf("reading the WireGuard state of %s: %w", t.name, err)
	}
	out := map[wgkey.Key]peerStats{}
	var cur *peerStats
	var sec, nsec int64
	flush := func(k wgkey.Key) {
		if cur != nil && sec != 0 {
			cur.lastHandshake = time.Unix(sec, nsec)
		}
		if cur != nil {
			out[k] = *cur
		}
	}
	var curKey wgkey.Key
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		switch k {
		case "public_key":
			flush(curKey)
			cur, sec, nsec = &peerStats{}, 0, 0
			if curKey, err = wgkey.ParseHex(v); err != nil {
				return nil, err
			}
		case "last_handshake_time_sec":
			sec, _ = strconv.ParseInt(v, 10, 64)
		case "last_handshake_time_nsec":
			nsec, _ = strconv.ParseInt(v, 10, 64)
		case "rx_bytes":
			if cur != nil {
				cur.rxBytes, _ = strconv.ParseUint(v, 10, 64)
			}
		case "tx_bytes":
			if cur != nil {
				cur.txBytes, _ = strconv.ParseUint(v, 10, 64)
			}
		case "endpoint":
			if cur != nil {
				cur.endpoint = v
			}
		}
	}
	flush(curKey)
	return out, nil
}

// restart starts the peer's session over: the peer is removed (its
// session and whatever waited for one go) and added again with its last
// configuration, so the next packet to it opens a handshake at once.
// wireguard-go alone would wait five seconds between two handshake
// attempts, and up to fifteen before it notices that a peer which
// restarted has forgotten the session.
func (t *tunnel) restart(k wgkey.Key) error {
	text, ok := t.peers[k]
	if !ok {
		return nil
	}
	if err := t.dev.IpcSet("public_key=" + k.Hex() + "\nremove=true\n" + text); err != nil {
		return fmt.Errorf("restarting the session with %s: %w", k, err)
	}
	return nil
}

// close removes the device (the TUN interface goes with it, and the routes
// through it) and the configuration socket.
func (t *tunnel) close() {
	if t.uapi != nil {
		_ = t.uapi.Close()
	}
	t.dev.Close()
}
