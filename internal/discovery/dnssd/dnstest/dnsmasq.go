// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package dnstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/liqo-go/liqo/internal/discovery/dnssd"
)

// Dnsmasq runs Debian's dnsmasq (package dnsmasq-base) on a loopback
// port, as a DNS server this project did not write: it serves the local
// records it is given the way dnsmasq does by default (TTL 0), and
// forwards the zones it is told to forward, without caching. Records are
// changed by restarting it on the same port.
type Dnsmasq struct {
	// Addr is 127.0.0.1:port, over UDP and TCP.
	Addr string

	dir     string
	forward map[string]string
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
}

// DnsmasqBinary is where dnsmasq is looked for, in this order.
var DnsmasqBinary = []string{"dnsmasq", "/usr/sbin/dnsmasq"}

// StartDnsmasq starts dnsmasq with no local records, forwarding each zone
// of forward to its server (host:port). Close stops it.
func StartDnsmasq(forward map[string]string) (*Dnsmasq, error) {
	bin, err := dnsmasqPath()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "liqo-dnsmasq-")
	if err != nil {
		return nil, err
	}
	pc, l, err := listenBoth()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	d := &Dnsmasq{Addr: pc.LocalAddr().String(), dir: dir, forward: forward}
	_, _ = pc.Close(), l.Close()
	if err := d.start(bin, nil); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func dnsmasqPath() (string, error) {
	for _, name := range DnsmasqBinary {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("dnsmasq not found: install Debian's dnsmasq-base (make system-deps)")
}

// Serve restarts dnsmasq serving instances, and lines (dnsmasq
// configuration, e.g. a malformed txt-record) besides.
func (d *Dnsmasq) Serve(instances []*dnssd.Instance, lines ...string) error {
	bin, err := dnsmasqPath()
	if err != nil {
		return err
	}
	d.stop()
	for _, inst := range instances {
		lines = append(lines, InstanceConfig(inst)...)
	}
	return d.start(bin, lines)
}

// InstanceConfig is the dnsmasq configuration that serves an instance's
// PTR, SRV, TXT and A records.
func InstanceConfig(inst *dnssd.Instance) []string {
	name := func(fqdn string) string { return strings.TrimSuffix(fqdn, ".") }
	quoted := make([]string, 0, len(inst.Announcement.TXT()))
	for _, s := range inst.Announcement.TXT() {
		quoted = append(quoted, strconv.Quote(s))
	}
	out := []string{
		"ptr-record=" + name(inst.ServiceFQDN()) + "," + name(inst.InstanceFQDN()),
		fmt.Sprintf("srv-host=%s,%s,%d", name(inst.InstanceFQDN()), name(inst.HostFQDN()), inst.Port),
		"txt-record=" + name(inst.InstanceFQDN()) + "," + strings.Join(quoted, ","),
	}
	for _, ip := range inst.IPs {
		out = append(out, "host-record="+name(inst.HostFQDN())+","+ip.String())
	}
	return out
}

func (d *Dnsmasq) start(bin string, records []string) error {
	_, port, _ := net.SplitHostPort(d.Addr)
	conf := []string{
		"port=" + port,
		"listen-address=127.0.0.1",
		"bind-interfaces",
		"no-resolv",
		"no-hosts",
		"no-poll",
		"cache-size=0",
		"user=root",
		"log-facility=" + filepath.Join(d.dir, "dnsmasq.log"),
	}
	for zone, server := range d.forward {
		host, p, err := net.SplitHostPort(server)
		if err != nil {
			return fmt.Errorf("forwarding %s: %w", zone, err)
		}
		conf = append(conf, fmt.Sprintf("server=/%s/%s#%s", strings.TrimSuffix(zone, "."), host, p))
	}
	conf = append(conf, records...)
	path := filepath.Join(d.dir, "dnsmasq.conf")
	if err := os.WriteFile(path, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(bin, "--keep-in-foreground", "--pid-file", "--conf-file="+path) //nolint:gosec // the test's own dnsmasq
	out, err := os.Create(filepath.Join(d.dir, "dnsmasq.out"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting dnsmasq: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	d.mu.Lock()
	d.cmd, d.exited = cmd, exited
	d.mu.Unlock()
	return d.waitReady(exited)
}

// waitReady asks dnsmasq a question until it answers, for at most 10 s.
func (d *Dnsmasq) waitReady(exited chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	msg := new(dns.Msg)
	msg.SetQuestion("ready.liqo-dnsmasq.", dns.TypeA)
	for {
		if _, _, err := c.ExchangeContext(ctx, msg, d.Addr); err == nil {
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(d.dir, "dnsmasq.out"))
			return fmt.Errorf("dnsmasq exited: %s", strings.TrimSpace(string(log)))
		case <-ctx.Done():
			return fmt.Errorf("dnsmasq on %s does not answer (logs in %s)", d.Addr, d.dir)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (d *Dnsmasq) stop() {
	d.mu.Lock()
	cmd, exited := d.cmd, d.exited
	d.cmd = nil
	d.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Close stops dnsmasq and removes its files.
func (d *Dnsmasq) Close() {
	d.stop()
	_ = os.RemoveAll(d.dir)
}

func (d *Dnsmasq) String() string { return "dnsmasq on " + d.Addr }
