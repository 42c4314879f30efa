// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package localcluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
)

// UnderlayCIDR is the address space of the underlay that real nodes share:
// cluster k's API server is reached at 10.254.k.1 and its real nodes are
// 10.254.k.10 and up. It lives only inside network namespaces the harness
// makes; the host never routes it.
const UnderlayCIDR = "10.254.0.0/16"

// NetnsPrefix starts the name of every network namespace the harness
// makes, so that a check can find leftovers.
const NetnsPrefix = "liqo-h-"

// Network is the underlay the real nodes of one or more clusters are
// attached to, as the machines of a data centre share a LAN: a network
// namespace holding a bridge, with no route out. Clusters attached to the
// same Network reach each other's API servers and node ports, which is
// how peered clusters with real nodes talk.
type Network struct {
	// Name is the network namespace, under /run/netns.
	Name string

	mu       sync.Mutex
	clusters int
	closed   bool
}

// NewNetwork makes an empty underlay. Close removes it.
func NewNetwork() (*Network, error) {
	if err := realNodePrerequisites(""); err != nil {
		return nil, err
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	n := &Network{Name: NetnsPrefix + "net-" + hex.EncodeToString(suffix)}
	err := runAll(
		[]string{"ip", "netns", "add", n.Name},
		[]string{"ip", "-n", n.Name, "link", "set", "lo", "up"},
		[]string{"ip", "-n", n.Name, "link", "add", "br0", "type", "bridge"},
		[]string{"ip", "-n", n.Name, "link", "set", "br0", "up"},
	)
	if err != nil {
		_ = deleteNetns(n.Name)
		return nil, err
	}
	return n, nil
}

// Path is the namespace's file.
func (n *Network) Path() string { return "/run/netns/" + n.Name }

// attach gives a cluster its index, from 1.
func (n *Network) attach() (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return 0, errors.New("the network is closed")
	}
	if n.clusters == 250 {
		return 0, errors.New("the network holds 250 clusters already")
	}
	n.clusters++
	return n.clusters, nil
}

// Close removes the namespace, and with it the bridge and the host ends of
// the nodes' links.
func (n *Network) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	return deleteNetns(n.Name)
}

// DeleteNetwork removes the underlay named name (a Network's Name), from
// any process: a playground's, after the one that made it is gone.
func DeleteNetwork(name string) error { return deleteNetns(name) }

// apiServerVIP is the address cluster k's API server is reached at on the
// underlay.
func apiServerVIP(k int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 254, byte(k), 1}) //nolint:gosec // k ≤ 250 (Network.attach)
}

// realNodeIP is the underlay address of cluster k's i-th real node.
func realNodeIP(k, i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 254, byte(k), byte(10 + i)}) //nolint:gosec // k ≤ 250 (Network.attach), i < 200 (Options.complete)
}

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput() //nolint:noctx // fixed tools with arguments the harness builds; each returns at once
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func runAll(cmds ...[]string) error {
	for _, c := range cmds {
		if err := run(c...); err != nil {
			return err
		}
	}
	return nil
}

// deleteNetns removes a namespace the harness made; a missing one is fine.
func deleteNetns(name string) error {
	if !strings.HasPrefix(name, NetnsPrefix) {
		return fmt.Errorf("refusing to delete network namespace %q: not the harness's", name)
	}
	out, err := exec.Command("ip", "netns", "del", name).CombinedOutput() //nolint:noctx // returns at once
	if err != nil && !strings.Contains(string(out), "No such file") {
		return fmt.Errorf("ip netns del %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
