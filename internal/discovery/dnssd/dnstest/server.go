// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package dnstest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// server runs a DNS server binary this project did not write (dnsmasq,
// named) on a loopback port of its own, and restarts it on the same port
// with new configuration.
type server struct {
	// Addr is 127.0.0.1:port, over UDP and TCP.
	Addr string

	name   string
	bin    string
	dir    string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// newServer finds binary (in PATH or /usr/sbin, where Debian's package
// pkg puts it), a free loopback port and a directory.
func newServer(binary, pkg string) (*server, error) {
	bin, err := exec.LookPath(binary)
	if err != nil {
		if bin, err = exec.LookPath(filepath.Join("/usr/sbin", binary)); err != nil {
			return nil, fmt.Errorf("%s not found: install Debian's %s (make system-deps)", binary, pkg)
		}
	}
	dir, err := os.MkdirTemp("", "liqo-"+binary+"-")
	if err != nil {
		return nil, err
	}
	pc, l, err := ListenBoth()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &server{Addr: pc.LocalAddr().String(), name: binary, bin: bin, dir: dir}
	_, _ = pc.Close(), l.Close()
	return s, nil
}

func (s *server) port() string {
	_, port, _ := net.SplitHostPort(s.Addr)
	return port
}

// restart stops the running server, if any, starts it again with args and
// waits until it answers: with NOERROR for the SOA of zone when zone is
// set (it loaded the zone), with anything otherwise.
func (s *server) restart(zone string, args ...string) error {
	s.stop()
	cmd := exec.Command(s.bin, args...) //nolint:noctx // the test's own DNS server, stopped by stop(), not by a context
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
	return s.waitReady(zone, exited)
}

// waitReady asks the server until it answers as restart says, for at
// most 10 s.
func (s *server) waitReady(zone string, exited chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	msg := new(dns.Msg)
	if zone != "" {
		msg.SetQuestion(dns.Fqdn(zone), dns.TypeSOA)
	} else {
		msg.SetQuestion("ready.liqo-dnstest.", dns.TypeSOA)
	}
	for {
		resp, _, err := c.ExchangeContext(ctx, msg, s.Addr)
		if err == nil && (zone == "" || resp.Rcode == dns.RcodeSuccess) {
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
