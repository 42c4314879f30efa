// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package dnsproxy answers, in a provider, the DNS queries of one
// consumer's offloaded pods with the consumer's namespace names.
//
// Under the DefaultName mapping a consumer's namespace O is a provider
// namespace of another name, N. A pod that asks the provider's cluster DNS
// for svc.O.svc.cluster.local gets nothing back: the Service is at
// svc.N.svc.cluster.local there. The proxy asks the cluster DNS with the
// names the consumer uses translated to the provider's (only the
// namespace label under svc.<domain> and pod.<domain>, only for that
// consumer's own namespaces) and restores the consumer's names in the
// answer (owner names, and the names PTR, SRV, CNAME records point to).
// One proxy serves one consumer: which one is the caller's choice (in the
// provider, each consumer reaches the proxy at an address of its own), so
// no query of one consumer is ever translated with another's names.
//
// See docs/decisions.md, "DefaultName: a pod asks with its consumer's
// names".
package dnsproxy

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Names is one consumer's namespaces: each name the consumer uses, mapped
// to the provider namespace that holds it.
type Names map[string]string

// Handler serves one consumer's queries: it forwards each to Upstream with
// the consumer's namespace names translated, and answers with them
// restored. Queries that name none of the consumer's namespaces are
// forwarded as they are.
type Handler struct {
	// Domain is the cluster's DNS domain, "cluster.local." unless set.
	Domain string
	// Names returns the consumer's namespaces now (nil: none).
	Names func() Names
	// Upstream is the cluster DNS, host:port.
	Upstream string
	// Timeout bounds one exchange with Upstream; 2 s unless set.
	Timeout time.Duration
	// MaxInFlight bounds the queries forwarded at once (each holds a
	// socket to Upstream): one consumer's flood is answered REFUSED,
	// counted, and cannot take the proxy's sockets and memory from the
	// other consumers. 256 unless set.
	MaxInFlight int
	// Foreign says whether a query's source address is a pod made for
	// another consumer: such queries are answered REFUSED and counted,
	// before they count against MaxInFlight, so that one consumer's pods
	// cannot spend another's budget. Nil: none is.
	Foreign func(netip.Addr) bool

	inFlight atomic.Int64

	// failed counts the queries Upstream did not answer, dropped the
	// messages that were no DNS query, refused those over MaxInFlight,
	// foreign those from another consumer's pods.
	failed, dropped, refused, foreign atomic.Int64
}

// ForeignQueries is how many queries came from another consumer's pods
// (answered REFUSED).
func (h *Handler) ForeignQueries() int64 { return h.foreign.Load() }

// Refused is how many queries were answered REFUSED, over MaxInFlight.
func (h *Handler) Refused() int64 { return h.refused.Load() }

// Failed is how many queries Upstream did not answer (the client got
// SERVFAIL).
func (h *Handler) Failed() int64 { return h.failed.Load() }

// Dropped is how many messages Serve did not take for a query: too short
// or unreadable (dropped unanswered), or no standard query (a response,
// another opcode, not one question: answered FORMERR or NOTIMP).
func (h *Handler) Dropped() int64 { return h.dropped.Load() }

// Serve answers on pc (UDP) and l (TCP) until ctx is done, then closes
// both.
func (h *Handler) Serve(ctx context.Context, pc net.PacketConn, l net.Listener) error {
	invalid := func([]byte, error) { h.dropped.Add(1) }
	accept := func(dh dns.Header) dns.MsgAcceptAction {
		action := dns.DefaultMsgAcceptFunc(dh)
		if action != dns.MsgAccept {
			h.dropped.Add(1)
		}
		return action
	}
	servers := []*dns.Server{
		{PacketConn: pc, Handler: h, MsgInvalidFunc: invalid, MsgAcceptFunc: accept},
		{Listener: l, Handler: h, MsgInvalidFunc: invalid, MsgAcceptFunc: accept},
	}
	errs := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errs <- s.ActivateAndServe() }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	for _, s := range servers {
		_ = s.Shutdown()
	}
	_, _ = pc.Close(), l.Close()
	return err
}

// sourceAddr is a's IP address, unmapped from IPv4-in-IPv6 (a socket
// open on every address says so of IPv4 clients); the zero Addr if a is
// none.
func sourceAddr(a net.Addr) netip.Addr {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.UDPAddr:
		ap = a.AddrPort()
	case *net.TCPAddr:
		ap = a.AddrPort()
	default:
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

func (h *Handler) domain() string {
	if h.Domain == "" {
		return "cluster.local."
	}
	return dns.Fqdn(strings.ToLower(h.Domain))
}

// ServeDNS implements dns.Handler.
func (h *Handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	if h.Foreign != nil && h.Foreign(sourceAddr(w.RemoteAddr())) {
		h.foreign.Add(1)
		refuse := new(dns.Msg)
		refuse.SetRcode(req, dns.RcodeRefused)
		_ = w.WriteMsg(refuse)
		return
	}
	limit := int64(h.MaxInFlight)
	if limit <= 0 {
		limit = 256
	}
	if h.inFlight.Add(1) > limit {
		h.inFlight.Add(-1)
		h.refused.Add(1)
		busy := new(dns.Msg)
		busy.SetRcode(req, dns.RcodeRefused)
		_ = w.WriteMsg(busy)
		return
	}
	// The slot is the upstream's: free once it answered (or failed), before
	// the client hears back, so that a client asking again at once is
	// not refused for its own query before.
	var freed sync.Once
	free := func() { freed.Do(func() { h.inFlight.Add(-1) }) }
	defer free()
	var names Names
	if h.Names != nil {
		names = h.Names()
	}
	t := newTranslator(h.domain(), names)
	out := t.query(req)
	timeout := h.Timeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// Over the client's transport: an answer too long for UDP comes back
	// truncated, and the client asks again over TCP.
	c := &dns.Client{Net: w.RemoteAddr().Network(), Timeout: timeout}
	resp, _, err := c.ExchangeContext(ctx, out, h.Upstream)
	free()
	if err != nil || resp == nil {
		h.failed.Add(1)
		fail := new(dns.Msg)
		fail.SetRcode(req, dns.RcodeServerFailure)
		_ = w.WriteMsg(fail)
		return
	}
	out = t.answer(req, resp)
	// As compact as the cluster DNS's, and within what the client takes
	// over UDP (its EDNS0 size, or 512 bytes): truncated, it asks again
	// over TCP.
	out.Compress = true
	if w.RemoteAddr().Network() == "udp" {
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = int(opt.UDPSize())
		}
		out.Truncate(size)
	}
	_ = w.WriteMsg(out)
}

// translator maps names between the consumer's namespaces and the
// provider's, for one query.
type translator struct {
	domain   string
	toHere   Names // consumer's name → provider's
	toThere  Names // provider's name → consumer's
	suffixes []string
}

func newTranslator(domain string, names Names) *translator {
	t := &translator{domain: domain, toHere: Names{}, toThere: Names{},
		suffixes: []string{".svc." + domain, ".pod." + domain}}
	for theirs, ours := range names {
		theirs, ours = strings.ToLower(theirs), strings.ToLower(ours)
		if theirs == "" || ours == "" {
			continue
		}
		t.toHere[theirs], t.toThere[ours] = ours, theirs
	}
	return t
}

// rename returns name with its namespace label (the one right before
// svc.<domain> or pod.<domain>) replaced as m says, lower-cased; name as
// it is when m has no such namespace.
func (t *translator) rename(name string, m Names) string {
	lower := strings.ToLower(dns.Fqdn(name))
	for _, suffix := range t.suffixes {
		if !strings.HasSuffix(lower, suffix) {
			continue
		}
		head := lower[:len(lower)-len(suffix)] // "[labels.]namespace"
		ns, prefix := head, ""
		if i := strings.LastIndexByte(head, '.'); i >= 0 {
			ns, prefix = head[i+1:], head[:i+1]
		}
		if to, ok := m[ns]; ok {
			return prefix + to + suffix
		}
		return name
	}
	return name
}

// query is req with its question names the provider's.
func (t *translator) query(req *dns.Msg) *dns.Msg {
	out := req.Copy()
	for i := range out.Question {
		out.Question[i].Name = t.rename(out.Question[i].Name, t.toHere)
	}
	return out
}

// answer is resp, as the provider's DNS gave it for req's translated
// question, with the consumer's names: the question as the client asked
// it, every record's owner and the names records point to.
func (t *translator) answer(req, resp *dns.Msg) *dns.Msg {
	out := resp.Copy()
	out.Id = req.Id
	out.Question = append([]dns.Question(nil), req.Question...)
	// A name as the client asked it comes back spelled so; a name of the
	// provider's namespaces of this consumer, as the consumer names it.
	asked := map[string]string{}
	for _, q := range req.Question {
		asked[strings.ToLower(dns.Fqdn(t.rename(q.Name, t.toHere)))] = q.Name
	}
	back := func(name string) string {
		if n, ok := asked[strings.ToLower(dns.Fqdn(name))]; ok {
			return n
		}
		return t.rename(name, t.toThere)
	}
	for _, section := range [][]dns.RR{out.Answer, out.Ns, out.Extra} {
		for _, rr := range section {
			h := rr.Header()
			if h.Rrtype == dns.TypeOPT {
				continue
			}
			h.Name = back(h.Name)
			switch r := rr.(type) {
			case *dns.PTR:
				r.Ptr = back(r.Ptr)
			case *dns.SRV:
				r.Target = back(r.Target)
			case *dns.CNAME:
				r.Target = back(r.Target)
			case *dns.DNAME:
				r.Target = back(r.Target)
			case *dns.NS:
				r.Ns = back(r.Ns)
			case *dns.MX:
				r.Mx = back(r.Mx)
			}
		}
	}
	return out
}
