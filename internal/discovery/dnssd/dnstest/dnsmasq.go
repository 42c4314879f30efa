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
	*server
	forward map[string]string
}

// server runs a DNS server binary on a loopback port of its own, and
// restarts it on the same port with new configuration.
type server struct {
	// Addr is 127.0.0.1:port, over UDP and TCP.
	Addr string

	name   string
	dir    string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// newServer picks a free loopback port and a directory for name.
func newServer(name string) (*server, error) {
	dir, err := os.MkdirTemp("", "liqo-"+name+"-")
	if err != nil {
		return nil, err
	}
	pc, l, err := listenBoth()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &server{Addr: pc.LocalAddr().String(), name: name, dir: dir}
	_, _ = pc.Close(), l.Close()
	return s, nil
}

func (s *server) port() string {
	_, port, _ := net.SplitHostPort(s.Addr)
	return port
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
	srv, err := newServer("dnsmasq")
	if err != nil {
		return nil, err
	}
	d := &Dnsmasq{server: srv, forward: forward}
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
	conf := []string{
		"port=" + d.port(),
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
	return d.run("ready.liqo-dnstest.", bin, "--keep-in-foreground", "--pid-file", "--conf-file="+path)
}

// run starts bin with args and waits until it answers on Addr a question
// for the SOA of ready: with NOERROR when ready is a zone it serves (it
// has loaded it), with anything otherwise.
func (s *server) run(ready string, bin string, args ...string) error {
	cmd := exec.Command(bin, args...) //nolint:gosec // the test's own DNS server
	out, err := os.Create(filepath.Join(s.dir, s.name+".out"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return s.waitReady(ready, exited)
}

// waitReady asks the server for the SOA of ready until it answers (with
// NOERROR if ready is not ready.liqo-dnstest.), for at most 10 s.
func (s *server) waitReady(ready string, exited chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(ready), dns.TypeSOA)
	for {
		resp, _, err := c.ExchangeContext(ctx, msg, s.Addr)
		if err == nil && (ready == "ready.liqo-dnstest." || resp.Rcode == dns.RcodeSuccess) {
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(s.dir, s.name+".out"))
			return fmt.Errorf("%s exited: %s", s.name, strings.TrimSpace(string(log)))
		case <-ctx.Done():
			return fmt.Errorf("%s on %s does not answer (logs in %s)", s.name, s.Addr, s.dir)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *server) stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
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

// Close stops the server and removes its files.
func (s *server) Close() {
	s.stop()
	_ = os.RemoveAll(s.dir)
}

func (s *server) String() string { return s.name + " on " + s.Addr }
