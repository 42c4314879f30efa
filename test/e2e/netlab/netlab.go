// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package netlab builds small networks of network namespaces for tests: a
// LAN is a bridge in a namespace of its own and one namespace per host,
// each with an interface eth0 on the bridge. Nothing touches the host's own
// network namespace, and Close removes everything (removing a namespace
// removes its interfaces). It needs root and iproute2.
package netlab

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// LAN is a set of hosts on one bridge.
type LAN struct {
	// Hosts are the namespaces' names, in order; host i has 10.213.0.<i+1>.
	Hosts []string
	// Bridge is the bridge's namespace.
	Bridge string
}

// Interface is the name of each host's interface on the LAN.
const Interface = "eth0"

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput() //nolint:noctx // a short ip(8) call, bounded by the kernel
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NewLAN creates n hosts on a bridge. On error, what was created is removed.
func NewLAN(n int) (*LAN, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	prefix := "liqo-lab-" + hex.EncodeToString(b)
	lan := &LAN{Bridge: prefix + "-br"}
	fail := func(err error) (*LAN, error) {
		return nil, errors.Join(err, lan.Close())
	}
	if err := ip("netns", "add", lan.Bridge); err != nil {
		return fail(err)
	}
	steps := [][]string{
		{"-n", lan.Bridge, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"},
		{"-n", lan.Bridge, "link", "set", "br0", "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return fail(err)
		}
	}
	for i := range n {
		host := fmt.Sprintf("%s-%d", prefix, i+1)
		if err := ip("netns", "add", host); err != nil {
			return fail(err)
		}
		lan.Hosts = append(lan.Hosts, host)
		port := fmt.Sprintf("port%d", i+1)
		steps := [][]string{
			{"-n", lan.Bridge, "link", "add", port, "type", "veth", "peer", "name", Interface, "netns", host},
			{"-n", lan.Bridge, "link", "set", port, "master", "br0", "up"},
			{"-n", host, "addr", "add", fmt.Sprintf("10.213.0.%d/24", i+1), "dev", Interface},
			{"-n", host, "link", "set", Interface, "up", "multicast", "on"},
			{"-n", host, "link", "set", "lo", "up"},
		}
		for _, s := range steps {
			if err := ip(s...); err != nil {
				return fail(err)
			}
		}
	}
	return lan, nil
}

// Disconnect takes host i's bridge port down, as if its cable were pulled.
func (l *LAN) Disconnect(i int) error {
	return ip("-n", l.Bridge, "link", "set", fmt.Sprintf("port%d", i+1), "down")
}

// Connect brings host i's bridge port back up.
func (l *LAN) Connect(i int) error {
	return ip("-n", l.Bridge, "link", "set", fmt.Sprintf("port%d", i+1), "up")
}

// Close removes every namespace of the LAN.
func (l *LAN) Close() error {
	var errs []error
	for _, ns := range append(append([]string{}, l.Hosts...), l.Bridge) {
		if ns == "" {
			continue
		}
		if err := ip("netns", "delete", ns); err != nil && !strings.Contains(err.Error(), "No such file") {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
