// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package dnssd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// DNSError is a resolution failure, as opposed to records that resolved
// but were dropped.
type DNSError struct {
	// Name is what was asked.
	Name string
	// Err is what went wrong: a transport error, or an Rcode.
	Err error
}

func (e *DNSError) Error() string { return fmt.Sprintf("resolving %s: %v", e.Name, e.Err) }

func (e *DNSError) Unwrap() error { return e.Err }

// Resolver browses DNS-SD in a unicast DNS domain.
type Resolver struct {
	// Server is the DNS server, host:port; empty means the first
	// nameserver of /etc/resolv.conf.
	Server string
	// Timeout bounds each query; defaults to 2 seconds.
	Timeout time.Duration
}

// Browse lists the instances of service in domain: the PTR records of
// <service>.<domain>, then each instance's TXT record. A domain that does
// not exist, or a server that does not answer, is a *DNSError; a domain
// that exists but lists nothing is an empty result, whether the server
// answers the service's name with no records or with NXDOMAIN (as
// servers do once the last instance is gone: the name has nothing left).
func (r *Resolver) Browse(ctx context.Context, domain, service string) ([]Found, []*DropError, error) {
	server, err := r.server()
	if err != nil {
		return nil, nil, err
	}
	name := ServiceFQDN(service, domain)
	resp, err := r.query(ctx, server, name, dns.TypePTR)
	var de *DNSError
	if errors.As(err, &de) && errors.Is(de.Err, errNXDomain) {
		// No such service name: an empty list if the domain itself
		// exists, the error otherwise (a typo, a zone not served).
		if _, derr := r.query(ctx, server, dns.Fqdn(domain), dns.TypeSOA); derr == nil {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, err
	}
	rrs := append(append([]dns.RR{}, resp.Answer...), resp.Extra...)
	// Ask for the TXT records the server did not send along.
	haveTXT := map[string]bool{}
	for _, rr := range rrs {
		if t, ok := rr.(*dns.TXT); ok {
			haveTXT[strings.ToLower(t.Hdr.Name)] = true
		}
	}
	for _, rr := range resp.Answer {
		ptr, ok := rr.(*dns.PTR)
		if !ok || haveTXT[strings.ToLower(ptr.Ptr)] {
			continue
		}
		txt, err := r.query(ctx, server, ptr.Ptr, dns.TypeTXT)
		if err != nil {
			var de *DNSError
			if errors.As(err, &de) && errors.Is(de.Err, errNXDomain) {
				continue // a dangling PTR: the instance is gone
			}
			return nil, nil, err
		}
		rrs = append(rrs, txt.Answer...)
	}
	found, drops := Collect(rrs, name, Unicast)
	// An instance without a TXT record cannot be used.
	kept := found[:0]
	for _, f := range found {
		if f.Announcement == nil && !f.Goodbye {
			drops = append(drops, drop(ReasonIncomplete, "instance %s has no TXT record", f.Instance))
			continue
		}
		kept = append(kept, f)
	}
	return kept, drops, nil
}

var errNXDomain = errors.New("NXDOMAIN: the name does not exist")

func (r *Resolver) query(ctx context.Context, server, name string, qtype uint16) (*dns.Msg, error) {
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(name), qtype)
	msg.SetEdns0(4096, false)
	c := &dns.Client{Timeout: timeout}
	resp, _, err := c.ExchangeContext(ctx, msg, server)
	if err == nil && resp.Truncated {
		c.Net = "tcp"
		resp, _, err = c.ExchangeContext(ctx, msg, server)
	}
	if err != nil {
		return nil, &DNSError{Name: name, Err: err}
	}
	switch resp.Rcode {
	case dns.RcodeSuccess:
		return resp, nil
	case dns.RcodeNameError:
		return nil, &DNSError{Name: name, Err: errNXDomain}
	default:
		return nil, &DNSError{Name: name, Err: fmt.Errorf("server answered %s", dns.RcodeToString[resp.Rcode])}
	}
}

func (r *Resolver) server() (string, error) {
	if r.Server != "" {
		return r.Server, nil
	}
	conf, err := dns.ClientConfigFromFile("/etc/resolv.conf")
	if err != nil || len(conf.Servers) == 0 {
		return "", fmt.Errorf("no DNS server configured and none in /etc/resolv.conf: %w", errors.Join(err, os.ErrNotExist))
	}
	return net.JoinHostPort(conf.Servers[0], conf.Port), nil
}
