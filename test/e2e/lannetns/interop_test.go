// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package lannetns_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/liqo-go/liqo/internal/discovery/dnssd"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/netlab"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// The hosts of the LAN that run mDNS implementations this project did not
// write: Debian's avahi-daemon, and the npm package multicast-dns on Node.
const (
	avahiHost = 3
	nodeHost  = 4
)

// process is a command of a test, stopped (SIGTERM, then SIGKILL) and
// waited for when the test ends.
type process struct {
	cmd *exec.Cmd
	log string
}

// startProcess starts cmd with its output in a file of the test's, and
// stops it when the test ends.
func startProcess(t *testing.T, name string, cmd *exec.Cmd) *process {
	t.Helper()
	p := &process{cmd: cmd, log: filepath.Join(t.TempDir(), name+".log")}
	out, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = out.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			data, _ := os.ReadFile(p.log)
			t.Logf("%s's output:\n%s", name, data)
		}
	})
	return p
}

// output is what the process wrote so far.
func (p *process) output() string {
	data, _ := os.ReadFile(p.log)
	return string(data)
}

// avahi runs avahi-daemon in host's namespace, with a D-Bus of its own
// (no system bus, no service of the machine's), and returns the
// environment its clients (avahi-browse, avahi-publish) need. The daemon
// gets a private /run, so that its pid file is not the machine's.
func avahi(t *testing.T, host *netlab.Namespace) []string {
	t.Helper()
	for _, bin := range []string{"avahi-daemon", "avahi-browse", "avahi-publish", "dbus-daemon"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is missing (make system-deps installs it): %v", bin, err)
		}
	}
	dir := t.TempDir()
	bus := filepath.Join(dir, "bus")
	busConf := `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=` + bus + `</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
`
	avahiConf := `[server]
host-name=avahi-interop
use-ipv4=yes
use-ipv6=no
allow-interfaces=` + netlab.Interface + `
enable-dbus=yes
[wide-area]
enable-wide-area=no
[publish]
publish-hinfo=no
publish-workstation=no
`
	for name, content := range map[string]string{"bus.conf": busConf, "avahi-daemon.conf": avahiConf} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	startProcess(t, "dbus-daemon", host.Command(t.Context(), "dbus-daemon", "--nofork", "--config-file="+filepath.Join(dir, "bus.conf")))
	framework.Eventually(t, 10*time.Second, func() error {
		_, err := os.Stat(bus)
		return err
	})
	env := append(os.Environ(), "DBUS_SYSTEM_BUS_ADDRESS=unix:path="+bus)
	daemon := host.Command(t.Context(), "unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs tmpfs /run && exec avahi-daemon --no-drop-root --no-chroot --no-rlimits -f "$1"`, "sh", filepath.Join(dir, "avahi-daemon.conf"))
	daemon.Env = env
	d := startProcess(t, "avahi-daemon", daemon)
	framework.Eventually(t, 20*time.Second, func() error {
		if !strings.Contains(d.output(), "Server startup complete") {
			return errors.New("avahi-daemon not started yet")
		}
		return nil
	})
	return env
}

// TestAvahiSeesClustersAndIsSeen: Debian's avahi-daemon, in a namespace
// of its own on the LAN, lists every cluster's instance with avahi-browse
// -a, which finds service types by RFC 6763 §9's enumeration, and resolves
// each to its TXT record; an instance published with avahi-publish becomes
// a ForeignCluster in every cluster, and goes when avahi withdraws it.
func TestAvahiSeesClustersAndIsSeen(t *testing.T) {
	for _, m := range suite.Members {
		framework.LogOnFailure(t, m)
	}
	host := lan.Host(avahiHost)
	env := avahi(t, host)

	framework.Eventually(t, 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		browse := host.Command(ctx, "avahi-browse", "--all", "--resolve", "--parsable", "--terminate", "--no-db-lookup")
		browse.Env = env
		out, err := browse.Output()
		if err != nil {
			return fmt.Errorf("avahi-browse: %w", err)
		}
		// =;eth0;IPv4;<instance>;<type>;local;<host>;<address>;<port>;<txt>
		resolved := map[string]string{}
		for line := range strings.SplitSeq(string(out), "\n") {
			f := strings.SplitN(line, ";", 10)
			if len(f) == 10 && f[0] == "=" && f[4] == dnssd.DefaultService {
				resolved[f[3]] = f[9]
			}
		}
		for _, m := range suite.Members {
			txt, ok := resolved[m.ClusterID]
			if !ok {
				return fmt.Errorf("avahi-browse -a does not list %s (resolved: %v)", m.Name, resolved)
			}
			if !strings.Contains(txt, `"id=`+m.ClusterID+`"`) || !strings.Contains(txt, `"url=`+m.AuthURL+`"`) {
				return fmt.Errorf("avahi-browse resolved %s with TXT %s, want its id and url", m.Name, txt)
			}
		}
		return nil
	})

	// Avahi announces a peer. Its auth service is on loopback, where
	// nothing answers: the clusters dial nothing but loopback for it.
	const peerID = "avahi-peer"
	url := "https://" + unusedLoopbackAddress(t)
	publish := host.Command(t.Context(), "avahi-publish", "--service", peerID, dnssd.DefaultService, "30443",
		dnssd.KeyClusterID+"="+peerID, dnssd.KeyAuthURL+"="+url, dnssd.KeyClusterName+"=avahi")
	publish.Env = env
	pub := startProcess(t, "avahi-publish", publish)
	knownThenForgotten(t, peerID, url, pub, "avahi withdrew it")
}

// TestMulticastDNSPackageSeesClustersAndIsSeen: the npm package
// multicast-dns, run with Node in a namespace of its own on the LAN, finds
// the clusters' service type by enumeration and every cluster's instance
// with its TXT record; an instance it announces becomes a ForeignCluster
// in every cluster, and goes after its goodbye.
func TestMulticastDNSPackageSeesClustersAndIsSeen(t *testing.T) {
	for _, m := range suite.Members {
		framework.LogOnFailure(t, m)
	}
	dir := nodeModules(t)
	host := lan.Host(nodeHost)
	address := fmt.Sprintf("10.213.0.%d", nodeHost+1)

	framework.Eventually(t, 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		browse := host.Command(ctx, "node", filepath.Join(dir, "peer.js"), "browse", address, dnssd.DefaultService)
		out, err := browse.Output()
		if err != nil {
			return fmt.Errorf("node peer.js browse: %w", err)
		}
		type line struct {
			Types    []string
			Instance string
			TXT      []string
		}
		found := map[string]line{}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				return fmt.Errorf("node printed %q: %w", sc.Text(), err)
			}
			id, _, _ := strings.Cut(l.Instance, ".")
			found[id] = l
		}
		for _, m := range suite.Members {
			l, ok := found[m.ClusterID]
			if !ok {
				return fmt.Errorf("multicast-dns did not find %s (found %v)", m.Name, found)
			}
			if !strings.Contains(strings.Join(l.Types, " "), dnssd.DefaultService+".local") {
				return fmt.Errorf("multicast-dns found %s without its type in the enumeration: %v", m.Name, l.Types)
			}
			if !slices.Contains(l.TXT, dnssd.KeyClusterID+"="+m.ClusterID) || !slices.Contains(l.TXT, dnssd.KeyAuthURL+"="+m.AuthURL) {
				return fmt.Errorf("multicast-dns read %s's TXT as %v", m.Name, l.TXT)
			}
		}
		return nil
	})

	const peerID = "node-peer"
	url := "https://" + unusedLoopbackAddress(t)
	announce := startProcess(t, "multicast-dns announce", host.Command(t.Context(), "node", filepath.Join(dir, "peer.js"), "announce", address,
		dnssd.DefaultService, peerID, "30443", dnssd.KeyClusterID+"="+peerID, dnssd.KeyAuthURL+"="+url))
	knownThenForgotten(t, peerID, url, announce, "its goodbye")
}

// knownThenForgotten waits until every cluster has a ForeignCluster for
// peerID at url, announced by p; then stops p (SIGTERM: the instance is
// withdrawn) and waits until every cluster forgot it.
func knownThenForgotten(t *testing.T, peerID, url string, p *process, withdrawal string) {
	t.Helper()
	for _, m := range suite.Members {
		framework.Eventually(t, 20*time.Second, func() error {
			fc, err := foreigncluster.Find(t.Context(), framework.Client(t, m), peerID)
			switch {
			case err != nil:
				return err
			case fc == nil:
				return fmt.Errorf("%s has no ForeignCluster for the announcement of %s (its output: %s)", m.Name, peerID, p.output())
			case fc.Spec.ForeignAuthURL != url:
				return fmt.Errorf("%s knows %s at %s, want %s", m.Name, peerID, fc.Spec.ForeignAuthURL, url)
			}
			return nil
		})
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	for _, m := range suite.Members {
		framework.Eventually(t, 30*time.Second, func() error {
			fc, err := foreigncluster.Find(t.Context(), framework.Client(t, m), peerID)
			if err == nil && fc != nil {
				return fmt.Errorf("%s still knows %s after %s", m.Name, peerID, withdrawal)
			}
			return err
		})
	}
}

// nodeModules installs mdnsjs's locked dependencies (multicast-dns) with
// npm ci into a directory of the test's, next to a copy of peer.js.
func nodeModules(t *testing.T) string {
	t.Helper()
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is missing: %v", bin, err)
		}
	}
	dir := t.TempDir()
	for _, name := range []string{"package.json", "package-lock.json", "peer.js"} {
		data, err := os.ReadFile(filepath.Join("mdnsjs", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	return dir
}

// unusedLoopbackAddress is a loopback address and port where nothing
// listens.
func unusedLoopbackAddress(t *testing.T) string {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
