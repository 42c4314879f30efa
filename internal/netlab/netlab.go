// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package netlab builds networks of network namespaces for tests and
// benchmarks: namespaces joined by veth pairs, sysctls and sockets inside
// them. Everything stays inside the namespaces it makes: nothing is added
// to the host's namespace, sockets opened through a Namespace live in it,
// and Close removes the namespace with every interface, route and
// nftables table in it. It needs root and iproute2.
package netlab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
)

// Prefix begins the name of every namespace netlab makes;
// hack/check-no-leftovers.sh looks for it.
const Prefix = "liqo-lab-"

// Supported says why namespaces cannot be made here, or nil.
func Supported() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("network namespaces need ip(8) from iproute2")
	}
	return nil
}

// Namespace is a network namespace made by NewNamespace.
type Namespace struct {
	// Name is the namespace's name under /run/netns.
	Name string
}

// NewNamespace makes a namespace named Prefix, role and a random suffix,
// with its loopback up.
func NewNamespace(role string) (*Namespace, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	n := &Namespace{Name: Prefix + role + "-" + hex.EncodeToString(b)}
	if err := run("ip", "netns", "add", n.Name); err != nil {
		return nil, err
	}
	if err := n.IP("link", "set", "lo", "up"); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return n, nil
}

// ForTest is NewNamespace for a test or benchmark: it fails tb when the
// namespace cannot be made, and removes it when tb ends.
func ForTest(tb testing.TB, role string) *Namespace {
	tb.Helper()
	n, err := NewNamespace(role)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := n.Close(); err != nil {
			tb.Error(err)
		}
	})
	return n
}

// Path is the namespace's file, for nsenter --net.
func (n *Namespace) Path() string { return filepath.Join("/run/netns", n.Name) }

// Close removes the namespace; what is in it goes with it.
func (n *Namespace) Close() error {
	if err := run("ip", "netns", "delete", n.Name); err != nil && !strings.Contains(err.Error(), "No such file") {
		return err
	}
	return nil
}

// IP runs ip(8) on the namespace: IP("route", "add", ...).
func (n *Namespace) IP(args ...string) error {
	return run("ip", append([]string{"-n", n.Name}, args...)...)
}

// Command is a command that runs inside the namespace.
func (n *Namespace) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Sysctl sets a network sysctl of the namespace (a key under
// /proc/sys/net, such as "ipv4/ip_forward"); the host's are not touched.
func (n *Namespace) Sysctl(key, value string) error {
	if strings.Contains(key, "..") {
		return fmt.Errorf("sysctl key %q", key)
	}
	return n.Do(func() error {
		return os.WriteFile(filepath.Join("/proc/sys/net", key), []byte(value), 0o644)
	})
}

// Do runs f on a thread that is inside the namespace. Sockets f opens
// belong to the namespace for their whole life, whichever thread uses them
// later. The thread goes back to its own namespace after f; if it cannot,
// it stays locked and dies with the goroutine. (Letting every such thread
// die is no option: a child process started with Pdeathsig from that
// thread earlier would be killed with it.)
func (n *Namespace) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("reading the thread's namespace: %w", err)
			return
		}
		defer home.Close()
		h, err := netns.GetFromName(n.Name)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("opening namespace %s: %w", n.Name, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- fmt.Errorf("entering namespace %s: %w", n.Name, err)
			return
		}
		err = f()
		if netns.Set(home) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// Listen opens a listener inside the namespace.
func (n *Namespace) Listen(network, address string) (net.Listener, error) {
	var l net.Listener
	err := n.Do(func() error {
		var err error
		l, err = (&net.ListenConfig{}).Listen(context.Background(), network, address)
		return err
	})
	return l, err
}

// ListenPacket opens a packet socket inside the namespace.
func (n *Namespace) ListenPacket(network, address string) (net.PacketConn, error) {
	var c net.PacketConn
	err := n.Do(func() error {
		var err error
		c, err = (&net.ListenConfig{}).ListenPacket(context.Background(), network, address)
		return err
	})
	return c, err
}

// Dial connects from inside the namespace.
func (n *Namespace) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// Veth joins two namespaces with a veth pair, aIf in a and bIf in b, each
// with its address (an invalid prefix for none), both up.
func Veth(a *Namespace, aIf string, aAddr netip.Prefix, b *Namespace, bIf string, bAddr netip.Prefix) error {
	tmp := make([]byte, 3)
	if _, err := rand.Read(tmp); err != nil {
		return err
	}
	// Made in a, its peer moved to b under its final name.
	if err := a.IP("link", "add", aIf, "type", "veth", "peer", "name", "lab"+hex.EncodeToString(tmp), "netns", b.Name); err != nil {
		return err
	}
	if err := b.IP("link", "set", "lab"+hex.EncodeToString(tmp), "name", bIf); err != nil {
		return err
	}
	for _, end := range []struct {
		ns   *Namespace
		name string
		addr netip.Prefix
	}{{a, aIf, aAddr}, {b, bIf, bAddr}} {
		if end.addr.IsValid() {
			if err := end.ns.IP("addr", "add", end.addr.String(), "dev", end.name); err != nil {
				return err
			}
		}
		if err := end.ns.IP("link", "set", end.name, "up"); err != nil {
			return err
		}
	}
	return nil
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput() //nolint:noctx // a short ip(8) call, bounded by the kernel
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
