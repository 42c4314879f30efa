// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package netlab

import (
	"errors"
	"fmt"
	"net/netip"
)

// LAN is a set of hosts on one bridge, for multicast: mDNS between
// namespaces.
type LAN struct {
	// Hosts are the namespaces' names, in order; host i has 10.213.0.<i+1>.
	Hosts []string
	// Bridge is the bridge's namespace.
	Bridge string

	namespaces []*Namespace
}

// Interface is the name of each host's interface on the LAN.
const Interface = "eth0"

// NewLAN creates n hosts on a bridge. On error, what was created is removed.
func NewLAN(n int) (*LAN, error) {
	lan := &LAN{}
	fail := func(err error) (*LAN, error) {
		return nil, errors.Join(err, lan.Close())
	}
	bridge, err := NewNamespace("lan-br")
	if err != nil {
		return nil, err
	}
	lan.namespaces, lan.Bridge = append(lan.namespaces, bridge), bridge.Name
	if err := bridge.IP("link", "add", "br0", "type", "bridge", "mcast_snooping", "0"); err != nil {
		return fail(err)
	}
	if err := bridge.IP("link", "set", "br0", "up"); err != nil {
		return fail(err)
	}
	for i := range n {
		host, err := NewNamespace(fmt.Sprintf("lan-%d", i+1))
		if err != nil {
			return fail(err)
		}
		lan.namespaces, lan.Hosts = append(lan.namespaces, host), append(lan.Hosts, host.Name)
		port := fmt.Sprintf("port%d", i+1)
		addr := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 213, 0, byte(i + 1)}), 24)
		if err := Veth(bridge, port, netip.Prefix{}, host, Interface, addr); err != nil {
			return fail(err)
		}
		if err := bridge.IP("link", "set", port, "master", "br0"); err != nil {
			return fail(err)
		}
		if err := host.IP("link", "set", Interface, "multicast", "on"); err != nil {
			return fail(err)
		}
	}
	return lan, nil
}

// Host is host i's namespace, to run commands in.
func (l *LAN) Host(i int) *Namespace { return l.namespaces[i+1] }

// Disconnect takes host i's bridge port down, as if its cable were pulled.
func (l *LAN) Disconnect(i int) error {
	return l.namespaces[0].IP("link", "set", fmt.Sprintf("port%d", i+1), "down")
}

// Connect brings host i's bridge port back up.
func (l *LAN) Connect(i int) error {
	return l.namespaces[0].IP("link", "set", fmt.Sprintf("port%d", i+1), "up")
}

// Close removes every namespace of the LAN.
func (l *LAN) Close() error {
	var errs []error
	for i := len(l.namespaces) - 1; i >= 0; i-- {
		errs = append(errs, l.namespaces[i].Close())
	}
	return errors.Join(errs...)
}
