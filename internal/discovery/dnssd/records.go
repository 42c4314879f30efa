// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package dnssd

import (
	"errors"
	"net"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// Instance is one cluster's DNS-SD service instance.
type Instance struct {
	// Name is the instance label; clusters use their ClusterID.
	Name string
	// Service is the service type, e.g. DefaultService.
	Service string
	// Domain is "local." for mDNS, or the DNS domain browsed.
	Domain string
	// Host is the target host's name, relative to Domain when not absolute.
	Host string
	// Port is the auth service's port.
	Port uint16
	// IPs are the host's IPv4 addresses, announced as A records.
	IPs []net.IP
	// Announcement is what the TXT record carries.
	Announcement Announcement
}

// ServiceFQDN is the name browsed for: <service>.<domain>.
func ServiceFQDN(service, domain string) string {
	return dns.Fqdn(strings.TrimSuffix(service, ".") + "." + strings.TrimPrefix(dns.Fqdn(domain), "."))
}

// ServiceFQDN is the name of the instance's service type.
func (i *Instance) ServiceFQDN() string { return ServiceFQDN(i.Service, i.Domain) }

// InstanceFQDN is the instance's own name: <name>.<service>.<domain>.
func (i *Instance) InstanceFQDN() string { return dns.Fqdn(i.Name + "." + i.ServiceFQDN()) }

// HostFQDN is the SRV target.
func (i *Instance) HostFQDN() string {
	if dns.IsFqdn(i.Host) {
		return i.Host
	}
	return dns.Fqdn(i.Host + "." + strings.TrimPrefix(dns.Fqdn(i.Domain), "."))
}

// Records returns the PTR, SRV, TXT and A records of the instance. A ttl of
// 0 makes them a goodbye: RFC 6762 §10.1 withdrawal.
func (i *Instance) Records(ttl uint32) []dns.RR {
	hdr := func(name string, t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
	}
	rrs := []dns.RR{
		&dns.PTR{Hdr: hdr(i.ServiceFQDN(), dns.TypePTR), Ptr: i.InstanceFQDN()},
		&dns.SRV{Hdr: hdr(i.InstanceFQDN(), dns.TypeSRV), Target: i.HostFQDN(), Port: i.Port},
		&dns.TXT{Hdr: hdr(i.InstanceFQDN(), dns.TypeTXT), Txt: i.Announcement.TXT()},
	}
	for _, ip := range i.IPs {
		if v4 := ip.To4(); v4 != nil {
			rrs = append(rrs, &dns.A{Hdr: hdr(i.HostFQDN(), dns.TypeA), A: v4})
		}
	}
	return rrs
}

// ServiceTypeEnumeration is the name under which every service type on
// a link or in a domain is listed (RFC 6763 §9): avahi-browse -a and
// similar tools ask it first.
const ServiceTypeEnumeration = "_services._dns-sd._udp"

// EnumerationRecord lists the instance's service type under
// ServiceTypeEnumeration. It is a shared record: every instance of the
// type states the same one.
func (i *Instance) EnumerationRecord(ttl uint32) dns.RR {
	return &dns.PTR{
		Hdr: dns.RR_Header{Name: ServiceFQDN(ServiceTypeEnumeration, i.Domain), Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ttl},
		Ptr: i.ServiceFQDN(),
	}
}

// Answer returns the records that answer q, or nil: the instance's own
// records, and its service type to a service type enumeration.
func (i *Instance) Answer(q dns.Question, ttl uint32) []dns.RR {
	if q.Qclass&0x7fff != dns.ClassINET && q.Qclass != dns.ClassANY {
		return nil
	}
	var out []dns.RR
	for _, rr := range append(i.Records(ttl), i.EnumerationRecord(ttl)) {
		h := rr.Header()
		if strings.EqualFold(h.Name, q.Name) && (q.Qtype == dns.TypeANY || q.Qtype == h.Rrtype) {
			out = append(out, rr)
		}
	}
	return out
}

// Found is an instance read back from records.
type Found struct {
	// Instance is the instance's FQDN.
	Instance string
	// Announcement is its parsed TXT record; nil for a goodbye.
	Announcement *Announcement
	// TTL is the smallest TTL of its records, in seconds.
	TTL uint32
	// Goodbye is true when the instance withdrew itself (TTL 0 over
	// multicast DNS; never over unicast DNS).
	Goodbye bool
}

// Transport is how records were received, which decides what a TTL of 0
// means.
type Transport int

const (
	// Multicast DNS: a TTL of 0 is a goodbye, the instance withdrawing
	// itself (RFC 6762 §10.1).
	Multicast Transport = iota
	// Unicast DNS: a TTL of 0 only says not to cache the record (RFC 1035
	// §3.2.1; dnsmasq serves its local records so by default); the
	// instance is there as long as the zone lists it.
	Unicast
)

// Collect reads the instances of serviceFQDN out of a set of records (a
// response's answers and additional records together) received over
// transport. Instances whose records are invalid are returned as drops,
// one per instance; records of other services are ignored.
func Collect(rrs []dns.RR, serviceFQDN string, transport Transport) ([]Found, []*DropError) {
	serviceFQDN = strings.ToLower(dns.Fqdn(serviceFQDN))
	type partial struct {
		ttl     uint32
		goodbye bool
		txt     *dns.TXT
		dup     bool
	}
	var order []string
	instances := map[string]*partial{}
	get := func(name string) *partial {
		p, ok := instances[name]
		if !ok {
			p = &partial{ttl: ^uint32(0)}
			instances[name] = p
			order = append(order, name)
		}
		return p
	}
	for _, rr := range rrs {
		h := rr.Header()
		switch r := rr.(type) {
		case *dns.PTR:
			if strings.ToLower(h.Name) != serviceFQDN {
				continue
			}
			name := strings.ToLower(r.Ptr)
			if !strings.HasSuffix(name, "."+serviceFQDN) {
				continue
			}
			p := get(name)
			p.ttl = min(p.ttl, h.Ttl)
			if h.Ttl == 0 && transport == Multicast {
				p.goodbye = true
			}
		case *dns.TXT:
			name := strings.ToLower(h.Name)
			if !strings.HasSuffix(name, "."+serviceFQDN) {
				continue
			}
			p := get(name)
			if p.txt != nil && !slices.Equal(p.txt.Txt, r.Txt) {
				p.dup = true
			}
			p.txt = r
			p.ttl = min(p.ttl, h.Ttl)
			if h.Ttl == 0 && transport == Multicast {
				p.goodbye = true
			}
		}
	}
	var found []Found
	var drops []*DropError
	for _, name := range order {
		p := instances[name]
		label := strings.TrimSuffix(name, "."+serviceFQDN)
		switch {
		case len(label) > maxInstanceName:
			drops = append(drops, drop(ReasonOversized, "instance label %q is over %d bytes", label, maxInstanceName))
		case p.goodbye:
			found = append(found, Found{Instance: name, Goodbye: true})
		case p.dup:
			drops = append(drops, drop(ReasonDuplicate, "instance %s has two different TXT records", name))
		case p.txt == nil:
			// A PTR whose TXT did not come along; the caller asks for it.
			found = append(found, Found{Instance: name, TTL: p.ttl})
		default:
			a, err := ParseTXT(p.txt.Txt)
			var de *DropError
			if errors.As(err, &de) {
				de.Detail = name + ": " + de.Detail
				drops = append(drops, de)
				continue
			}
			found = append(found, Found{Instance: name, Announcement: a, TTL: p.ttl})
		}
	}
	return found, drops
}
