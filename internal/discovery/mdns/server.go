// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package mdns

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/time/rate"

	"github.com/liqo-go/liqo/internal/discovery/dnssd"
)

// Handler receives what the browser finds and what the server drops.
// Calls come from the server's read loop, one at a time; they must not
// block for long.
type Handler interface {
	// Found is called for every instance of the browsed service in a
	// response, including goodbyes.
	Found(f dnssd.Found, from net.Addr)
	// Dropped is called for every packet or record dropped, with the
	// reason.
	Dropped(err *dnssd.DropError, from net.Addr)
}

// NopHandler ignores everything: for a server that only announces.
type NopHandler struct{}

// Found implements Handler.
func (NopHandler) Found(dnssd.Found, net.Addr) {}

// Dropped implements Handler.
func (NopHandler) Dropped(*dnssd.DropError, net.Addr) {}

// Server answers for one instance (when published) and browses for a
// service (when browsing), over one Conn.
type Server struct {
	conn    *Conn
	service string // browsed service FQDN
	handler Handler
	ttl     uint32
	limiter *rate.Limiter

	mu       sync.Mutex
	instance *dnssd.Instance
	browsing bool
}

// Options configure a Server.
type Options struct {
	// Service is the DNS-SD service type browsed and answered for, e.g.
	// dnssd.DefaultService; the domain is "local.".
	Service string
	// TTL of the records announced, in seconds.
	TTL uint32
	// Handler receives found instances and drops.
	Handler Handler
	// ResponsesPerSecond bounds how many responses the server sends;
	// defaults to 20 (with a burst of as many).
	ResponsesPerSecond int
}

// NewServer returns a server on conn; call Serve to run it.
func NewServer(conn *Conn, o Options) *Server {
	if o.ResponsesPerSecond == 0 {
		o.ResponsesPerSecond = 20
	}
	if o.TTL == 0 {
		o.TTL = 120
	}
	return &Server{
		conn:    conn,
		service: dnssd.ServiceFQDN(o.Service, "local."),
		handler: o.Handler,
		ttl:     o.TTL,
		limiter: rate.NewLimiter(rate.Limit(o.ResponsesPerSecond), o.ResponsesPerSecond),
	}
}

// Serve reads packets until ctx ends or the socket fails; it closes the
// socket on return.
func (s *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = s.conn.Close() })
	defer stop()
	defer s.conn.Close() // closing twice after ctx is harmless
	buf := make([]byte, MaxPacket+1)
	for {
		msg, from, err := s.conn.Read(buf)
		var de *dnssd.DropError
		switch {
		case errors.As(err, &de):
			s.handler.Dropped(de, from)
			continue
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if msg.Opcode != dns.OpcodeQuery {
			s.handler.Dropped(&dnssd.DropError{Reason: dnssd.ReasonMalformed, Detail: "not a standard query or response"}, from)
			continue
		}
		if msg.Response {
			s.handleResponse(msg, from)
		} else {
			s.handleQuery(msg)
		}
	}
}

func (s *Server) handleResponse(msg *dns.Msg, from net.Addr) {
	s.mu.Lock()
	browsing := s.browsing
	s.mu.Unlock()
	if !browsing {
		return
	}
	rrs := append(append([]dns.RR{}, msg.Answer...), msg.Extra...)
	found, drops := dnssd.Collect(rrs, s.service, dnssd.Multicast)
	for _, d := range drops {
		s.handler.Dropped(d, from)
	}
	for _, f := range found {
		s.handler.Found(f, from)
	}
}

func (s *Server) handleQuery(msg *dns.Msg) {
	s.mu.Lock()
	inst := s.instance
	s.mu.Unlock()
	if inst == nil {
		return
	}
	resp := new(dns.Msg)
	resp.Response, resp.Authoritative = true, true
	for _, q := range msg.Question {
		resp.Answer = append(resp.Answer, inst.Answer(q, s.ttl)...)
	}
	if len(resp.Answer) == 0 || !s.limiter.Allow() {
		return
	}
	// RFC 6763 §12: the records a browser needs next come along; not to
	// a mere enumeration of service types, whose next step is to browse
	// the type.
	if len(resp.Answer) != 1 || !dns.IsDuplicate(resp.Answer[0], inst.EnumerationRecord(s.ttl)) {
		for _, rr := range inst.Records(s.ttl) {
			if !contains(resp.Answer, rr) {
				resp.Extra = append(resp.Extra, rr)
			}
		}
	}
	_ = s.conn.Send(resp) // best effort: the browser asks again
}

func contains(rrs []dns.RR, rr dns.RR) bool {
	for _, r := range rrs {
		if dns.IsDuplicate(r, rr) {
			return true
		}
	}
	return false
}

// Publish starts answering for inst and announces it twice, one second
// apart (RFC 6762 §8.3), or until ctx ends.
func (s *Server) Publish(ctx context.Context, inst *dnssd.Instance) error {
	s.mu.Lock()
	s.instance = inst
	s.mu.Unlock()
	for i := range 2 {
		s.mu.Lock()
		current := s.instance == inst
		s.mu.Unlock()
		if !current {
			return nil // withdrawn or replaced meanwhile: no late announcement
		}
		if err := s.announce(inst, s.ttl); err != nil {
			return err
		}
		if i == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// Withdraw stops answering and sends a goodbye (TTL 0) so that browsers
// forget the instance at once.
func (s *Server) Withdraw() error {
	s.mu.Lock()
	inst := s.instance
	s.instance = nil
	s.mu.Unlock()
	if inst == nil {
		return nil
	}
	return s.announce(inst, 0)
}

// announce sends the instance's records; an announcement (not a goodbye)
// lists its service type too, as RFC 6763 §9 suggests. No goodbye is sent
// for that shared record: other clusters of the link state it as well.
func (s *Server) announce(inst *dnssd.Instance, ttl uint32) error {
	msg := new(dns.Msg)
	msg.Response, msg.Authoritative = true, true
	msg.Answer = inst.Records(ttl)
	if ttl > 0 {
		msg.Answer = append(msg.Answer, inst.EnumerationRecord(ttl))
	}
	return s.conn.Send(msg)
}

// SetBrowsing turns the handling of responses on or off.
func (s *Server) SetBrowsing(on bool) {
	s.mu.Lock()
	s.browsing = on
	s.mu.Unlock()
}

// Query asks the link for every instance of the browsed service.
func (s *Server) Query() error {
	msg := new(dns.Msg)
	msg.Id = 0 // RFC 6762 §18.1
	msg.RecursionDesired = false
	msg.Question = []dns.Question{{Name: s.service, Qtype: dns.TypePTR, Qclass: dns.ClassINET}}
	return s.conn.Send(msg)
}

// Addresses are the IPv4 addresses of the server's interface.
func (s *Server) Addresses() []net.IP { return s.conn.Addresses() }
