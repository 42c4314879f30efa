// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package dnstest is an authoritative DNS server for tests and benchmarks:
// it serves, on 127.0.0.1, a zone whose records the test adds and removes
// while it runs.
package dnstest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/miekg/dns"

	"github.com/liqo-go/liqo/internal/discovery/dnssd"
)

// Server serves one zone over UDP and TCP on the same loopback port.
type Server struct {
	// Addr is host:port.
	Addr string

	zone    string
	mu      sync.RWMutex
	records map[string][]dns.RR // by lower-case owner name
	udp     *dns.Server
	tcp     *dns.Server
}

// Start serves zone (e.g. "liqo.test.") until Close.
func Start(zone string) (*Server, error) {
	pc, l, err := ListenBoth()
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: pc.LocalAddr().String(), zone: strings.ToLower(dns.Fqdn(zone)), records: map[string][]dns.RR{}}
	s.udp = &dns.Server{PacketConn: pc, Handler: s}
	s.tcp = &dns.Server{Listener: l, Handler: s}
	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		<-started
	}
	return s, nil
}

// ListenBoth finds a loopback port free for both UDP and TCP, as a DNS
// server listens: the kernel picks the UDP one, and the TCP one may be
// taken, so it tries a few.
func ListenBoth() (net.PacketConn, net.Listener, error) {
	var last error
	for range 20 {
		var lc net.ListenConfig
		pc, err := lc.ListenPacket(context.Background(), "udp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		l, err := lc.Listen(context.Background(), "tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, l, nil
		}
		_ = pc.Close()
		last = err
	}
	return nil, nil, fmt.Errorf("no loopback port free for both UDP and TCP: %w", last)
}

// Close stops the server.
func (s *Server) Close() {
	_ = s.udp.Shutdown()
	_ = s.tcp.Shutdown()
}

// Register adds (or replaces) a cluster's DNS-SD records.
func (s *Server) Register(inst *dnssd.Instance, ttl uint32) {
	s.Deregister(inst)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rr := range inst.Records(ttl) {
		name := strings.ToLower(rr.Header().Name)
		s.records[name] = append(s.records[name], rr)
	}
}

// Deregister removes a cluster's records.
func (s *Server) Deregister(inst *dnssd.Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	svc := strings.ToLower(inst.ServiceFQDN())
	kept := s.records[svc][:0]
	for _, rr := range s.records[svc] {
		if !strings.EqualFold(rr.(*dns.PTR).Ptr, inst.InstanceFQDN()) {
			kept = append(kept, rr)
		}
	}
	s.records[svc] = kept
	if len(kept) == 0 {
		// As real servers do: with its last instance, the service's name
		// is gone too (NXDOMAIN).
		delete(s.records, svc)
	}
	delete(s.records, strings.ToLower(inst.InstanceFQDN()))
	delete(s.records, strings.ToLower(inst.HostFQDN()))
}

// ServeDNS implements dns.Handler.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.Authoritative = true
	if len(req.Question) != 1 {
		resp.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(resp)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	if !strings.HasSuffix(name, s.zone) {
		resp.Rcode = dns.RcodeRefused
		_ = w.WriteMsg(resp)
		return
	}
	s.mu.RLock()
	rrs, exists := s.records[name]
	s.mu.RUnlock()
	if !exists && name != s.zone {
		resp.Rcode = dns.RcodeNameError
	}
	for _, rr := range rrs {
		if q.Qtype == dns.TypeANY || rr.Header().Rrtype == q.Qtype {
			resp.Answer = append(resp.Answer, dns.Copy(rr))
		}
	}
	_ = w.WriteMsg(resp)
}

// String describes the server.
func (s *Server) String() string { return fmt.Sprintf("dnstest %s on %s", s.zone, s.Addr) }
