// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package mdns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/liqo-go/liqo/internal/discovery/dnssd"
)

// DefaultPort is the mDNS port. Tests use another one per suite, so that
// suites running at the same time on one host do not see each other.
const DefaultPort = 5353

// MaxPacket is the largest mDNS message accepted (RFC 6762 §17).
const MaxPacket = 9000

var group = net.IPv4(224, 0, 0, 251)

// Conn is a multicast DNS socket on one interface.
type Conn struct {
	pc    *ipv4.PacketConn
	raw   net.PacketConn
	iface *net.Interface
	ips   []net.IP
	dst   *net.UDPAddr
}

// ListenInNamespace is Listen inside the network namespace at netns (a
// path, or a name under /var/run/netns as `ip netns` makes them); the
// socket stays in that namespace, the process does not move. An empty
// netns is Listen. It is how a cluster's mDNS joins a LAN made of network
// namespaces while the rest of the process stays on the host's loopback.
func ListenInNamespace(ctx context.Context, netns, ifaceName string, port int) (*Conn, error) {
	if netns == "" {
		return Listen(ctx, ifaceName, port)
	}
	if !filepath.IsAbs(netns) {
		netns = filepath.Join("/var/run/netns", netns)
	}
	type result struct {
		conn *Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		// The thread enters the namespace only to create the socket. If it
		// cannot come back, it stays locked and dies with this goroutine.
		runtime.LockOSThread()
		back, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			done <- result{err: fmt.Errorf("opening the current network namespace: %w", err)}
			return
		}
		defer back.Close()
		target, err := os.Open(netns) //nolint:gosec // the namespace the operator configured (a flag)
		if err != nil {
			done <- result{err: fmt.Errorf("opening network namespace %s: %w", netns, err)}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("entering network namespace %s: %w", netns, err)}
			return
		}
		conn, err := Listen(ctx, ifaceName, port)
		if unix.Setns(int(back.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- result{conn, err}
	}()
	r := <-done
	return r.conn, r.err
}

// Listen opens an mDNS socket on the named interface and port. The
// interface must have an IPv4 address; it is the source of what is sent.
func Listen(ctx context.Context, ifaceName string, port int) (*Conn, error) {
	if ifaceName == "" {
		return nil, errors.New("no mDNS interface named: set spec.discoveryConfig.mdnsInterface of the ClusterConfig")
	}
	iface, err := net.InterfaceByName(ifaceName)
	if err != nil {
		return nil, fmt.Errorf("mDNS interface %q: %w", ifaceName, err)
	}
	ips, err := ipv4Of(iface)
	if err != nil {
		return nil, err
	}
	src := ips[0]
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			for _, o := range []struct{ level, opt, v int }{
				{unix.SOL_SOCKET, unix.SO_REUSEADDR, 1},
				{unix.SOL_SOCKET, unix.SO_REUSEPORT, 1},
				{unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0},
			} {
				if serr = unix.SetsockoptInt(int(fd), o.level, o.opt, o.v); serr != nil {
					return
				}
			}
			var a [4]byte
			copy(a[:], src.To4())
			serr = unix.SetsockoptIPMreqn(int(fd), unix.IPPROTO_IP, unix.IP_MULTICAST_IF,
				&unix.IPMreqn{Address: a, Ifindex: int32(iface.Index)}) //nolint:gosec // interface indexes are small
		})
		if err != nil {
			return err
		}
		return serr
	}}
	raw, err := lc.ListenPacket(ctx, "udp4", fmt.Sprintf("%s:%d", group, port))
	if err != nil {
		return nil, fmt.Errorf("binding mDNS socket on %s port %d: %w", ifaceName, port, err)
	}
	pc := ipv4.NewPacketConn(raw)
	fail := func(what string, err error) (*Conn, error) {
		_ = raw.Close()
		return nil, fmt.Errorf("%s on %s: %w", what, ifaceName, err)
	}
	if err := pc.JoinGroup(iface, &net.UDPAddr{IP: group}); err != nil {
		return fail("joining the mDNS group", err)
	}
	if err := pc.SetMulticastLoopback(true); err != nil {
		return fail("enabling multicast loopback", err)
	}
	if err := pc.SetMulticastTTL(255); err != nil { // RFC 6762 §11
		return fail("setting the multicast TTL", err)
	}
	if err := pc.SetControlMessage(ipv4.FlagInterface, true); err != nil {
		return fail("asking for the arrival interface", err)
	}
	return &Conn{pc: pc, raw: raw, iface: iface, ips: ips, dst: &net.UDPAddr{IP: group, Port: port}}, nil
}

func ipv4Of(iface *net.Interface) ([]net.IP, error) {
	addrs, err := iface.Addrs()
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", iface.Name, err)
	}
	var ips []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			ips = append(ips, n.IP.To4())
		}
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("interface %s has no IPv4 address", iface.Name)
	}
	return ips, nil
}

// Addresses are the interface's IPv4 addresses, as of Listen.
func (c *Conn) Addresses() []net.IP { return c.ips }

// Close closes the socket; a blocked Read returns.
func (c *Conn) Close() error { return c.raw.Close() }

// Send multicasts msg on the interface.
func (c *Conn) Send(msg *dns.Msg) error {
	b, err := msg.Pack()
	if err != nil {
		return fmt.Errorf("packing mDNS message: %w", err)
	}
	if len(b) > MaxPacket {
		return fmt.Errorf("mDNS message of %d bytes is over %d", len(b), MaxPacket)
	}
	_, err = c.pc.WriteTo(b, nil, c.dst)
	return err
}

// Read blocks for the next packet that arrived on the interface and decodes
// it. A packet that does not decode is returned as a *dnssd.DropError; any
// other error means the socket is closed.
func (c *Conn) Read(buf []byte) (*dns.Msg, net.Addr, error) {
	for {
		n, cm, src, err := c.pc.ReadFrom(buf)
		if err != nil {
			return nil, nil, err
		}
		if cm != nil && cm.IfIndex != c.iface.Index {
			continue // another interface's traffic: not ours to see
		}
		if n >= len(buf) || n > MaxPacket {
			return nil, src, &dnssd.DropError{Reason: dnssd.ReasonOversized, Detail: fmt.Sprintf("packet of %d bytes or more", n)}
		}
		msg, err := Decode(buf[:n])
		return msg, src, err
	}
}

// Decode unpacks a packet, or says why it was dropped: truncated when it
// ends before what its header announces, malformed otherwise.
func Decode(packet []byte) (*dns.Msg, error) {
	msg := new(dns.Msg)
	if err := msg.Unpack(packet); err != nil {
		reason := dnssd.ReasonMalformed
		if errors.Is(err, dns.ErrBuf) || strings.Contains(err.Error(), "overflow") || strings.Contains(err.Error(), "too small") {
			reason = dnssd.ReasonTruncated
		}
		return nil, &dnssd.DropError{Reason: reason, Detail: err.Error()}
	}
	return msg, nil
}

// SendRaw multicasts bytes as they are: for tools and tests that need to
// send what Send would refuse to build.
func (c *Conn) SendRaw(packet []byte) error {
	_, err := c.pc.WriteTo(packet, nil, c.dst)
	return err
}
