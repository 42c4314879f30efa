// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package dnssd

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func valid() *Announcement {
	return &Announcement{ClusterID: "abc-123", ClusterName: "rome", AuthURL: "https://auth.example:8443", Namespace: "liqo"}
}

func TestTXTRoundTrip(t *testing.T) {
	a := valid()
	got, err := ParseTXT(a.TXT())
	if err != nil {
		t.Fatalf("ParseTXT(TXT()) = %v", err)
	}
	if *got != *a {
		t.Fatalf("round trip: got %+v, want %+v", got, a)
	}
}

func TestParseTXTRejects(t *testing.T) {
	long := strings.Repeat("a", 300)
	tests := []struct {
		name   string
		txt    []string
		reason string
	}{
		{"not key=value", []string{"id=abc", "garbage", "url=https://x"}, ReasonMalformed},
		{"empty key", []string{"=abc"}, ReasonMalformed},
		{"duplicate key", []string{"id=abc", "id=def", "url=https://x"}, ReasonDuplicate},
		{"duplicate key, other case", []string{"id=abc", "ID=abc", "url=https://x"}, ReasonDuplicate},
		{"missing id", []string{"url=https://x"}, ReasonMissing},
		{"missing url", []string{"id=abc"}, ReasonMissing},
		{"id not a DNS label", []string{"id=Not_Valid", "url=https://x"}, ReasonInvalid},
		{"http url", []string{"id=abc", "url=http://x"}, ReasonInvalid},
		{"url without host", []string{"id=abc", "url=https://"}, ReasonInvalid},
		{"url with credentials", []string{"id=abc", "url=https://u:p@x"}, ReasonInvalid},
		{"bad namespace", []string{"id=abc", "url=https://x", "ns=UPPER"}, ReasonInvalid},
		{"oversized string", []string{"id=abc", "url=https://x", "name=" + long}, ReasonOversized},
		{"too many strings", make([]string, 17), ReasonOversized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTXT(tt.txt)
			var de *DropError
			if !errors.As(err, &de) {
				t.Fatalf("ParseTXT(%q) = %v, want a DropError", tt.txt, err)
			}
			if de.Reason != tt.reason {
				t.Fatalf("reason = %s (%s), want %s", de.Reason, de.Detail, tt.reason)
			}
		})
	}
}

func TestParseTXTIgnoresUnknownKeys(t *testing.T) {
	got, err := ParseTXT([]string{"id=abc", "url=https://x", "future=1"})
	if err != nil || got.ClusterID != "abc" {
		t.Fatalf("ParseTXT = %+v, %v", got, err)
	}
}

func instance() *Instance {
	return &Instance{Name: "abc-123", Service: DefaultService, Domain: "local.", Host: "abc-123", Port: 8443,
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Announcement: *valid()}
}

func TestCollectReadsBackRecords(t *testing.T) {
	inst := instance()
	found, drops := Collect(inst.Records(120), inst.ServiceFQDN(), Multicast)
	if len(drops) != 0 || len(found) != 1 {
		t.Fatalf("Collect = %+v, drops %v", found, drops)
	}
	if f := found[0]; f.Goodbye || f.TTL != 120 || f.Announcement == nil || *f.Announcement != inst.Announcement {
		t.Fatalf("found %+v", f)
	}
	found, _ = Collect(inst.Records(0), inst.ServiceFQDN(), Multicast)
	if len(found) != 1 || !found[0].Goodbye {
		t.Fatalf("goodbye not recognised: %+v", found)
	}
	found, _ = Collect(inst.Records(120), ServiceFQDN("_other._tcp", "local."), Multicast)
	if len(found) != 0 {
		t.Fatalf("another service's records were collected: %+v", found)
	}
}

// TestCollectUnicastTTLZeroIsNoGoodbye: over unicast DNS a TTL of 0 says
// "do not cache" (dnsmasq serves its records so by default), and the
// instance is read as present; over multicast DNS the same records are a
// goodbye.
func TestCollectUnicastTTLZeroIsNoGoodbye(t *testing.T) {
	inst := instance()
	found, drops := Collect(inst.Records(0), inst.ServiceFQDN(), Unicast)
	if len(drops) != 0 || len(found) != 1 {
		t.Fatalf("Collect = %+v, drops %v", found, drops)
	}
	if f := found[0]; f.Goodbye || f.Announcement == nil || *f.Announcement != inst.Announcement {
		t.Fatalf("unicast records with TTL 0 read as %+v, want the instance present", f)
	}
}

func TestCollectDropsConflictingTXT(t *testing.T) {
	inst := instance()
	rrs := inst.Records(120)
	other := *valid()
	other.ClusterName = "milan"
	rrs = append(rrs, &dns.TXT{Hdr: dns.RR_Header{Name: inst.InstanceFQDN(), Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 120}, Txt: other.TXT()})
	found, drops := Collect(rrs, inst.ServiceFQDN(), Unicast)
	if len(found) != 0 || len(drops) != 1 || drops[0].Reason != ReasonDuplicate {
		t.Fatalf("Collect = %+v, drops %+v; want one duplicate drop", found, drops)
	}
}

func TestAnswer(t *testing.T) {
	inst := instance()
	ptr := inst.Answer(dns.Question{Name: strings.ToUpper(inst.ServiceFQDN()), Qtype: dns.TypePTR, Qclass: dns.ClassINET}, 120)
	if len(ptr) != 1 || ptr[0].Header().Rrtype != dns.TypePTR {
		t.Fatalf("PTR question answered with %v", ptr)
	}
	if got := inst.Answer(dns.Question{Name: "other.local.", Qtype: dns.TypeANY, Qclass: dns.ClassINET}, 120); got != nil {
		t.Fatalf("unrelated question answered with %v", got)
	}
	// RFC 6763 §9: the service type enumeration lists the instance's type.
	types := inst.Answer(dns.Question{Name: "_services._dns-sd._udp.local.", Qtype: dns.TypePTR, Qclass: dns.ClassINET}, 120)
	if len(types) != 1 || types[0].(*dns.PTR).Ptr != inst.ServiceFQDN() {
		t.Fatalf("service type enumeration answered with %v, want one PTR to %s", types, inst.ServiceFQDN())
	}
	// Its record is no instance of the type to a browser.
	if found, drops := Collect(types, inst.ServiceFQDN(), Multicast); len(found) != 0 || len(drops) != 0 {
		t.Fatalf("the enumeration record read as instances %v, drops %v", found, drops)
	}
}
