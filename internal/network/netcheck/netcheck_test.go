// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package netcheck

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestParseResults: the client's JSON lines, whatever else its log holds.
func TestParseResults(t *testing.T) {
	logs := []byte(`starting
{"url":"http://10.0.0.1:8080/","ok":true,"answer":"a","latency":1000}
not json
{"url":"http://10.0.0.2:8080/","ok":false,"error":"timeout"}
{"ok":true}
`)
	got := ParseResults(logs)
	if len(got) != 2 || !got[0].OK || got[0].Answer != "a" || got[1].OK || got[1].Error != "timeout" {
		t.Fatalf("ParseResults = %+v", got)
	}
}

// TestParseResultsOfLargeAnswers: a line holding the largest answer the
// server sends (1 MiB) is read like any other.
func TestParseResultsOfLargeAnswers(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	logs := []byte(`{"url":"http://10.0.0.1:8080/bytes/1048576","ok":true,"answer":"` + big + `"}
{"url":"http://10.0.0.2:8080/","ok":true,"answer":"b"}
`)
	got := ParseResults(logs)
	if len(got) != 2 || got[0].Answer != big || got[1].Answer != "b" {
		t.Fatalf("ParseResults read %d results", len(got))
	}
}

// TestGetAsksDNS: `check get dns://HOST:PORT/NAME` asks a DNS server on
// loopback and prints its response code and addresses, a refusal as an
// answer too.
func TestGetAsksDNS(t *testing.T) {
	pc, err := new(net.ListenConfig).ListenPacket(t.Context(), "udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		if req.Question[0].Name != "web.shop.svc.cluster.local." {
			m.SetRcode(req, dns.RcodeRefused)
			_ = w.WriteMsg(m)
			return
		}
		m.SetReply(req)
		for _, ip := range []string{"10.96.0.2", "10.96.0.1"} {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(ip)})
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	addr := pc.LocalAddr().String()
	var out bytes.Buffer
	ok, refused := "dns://"+addr+"/web.shop.svc.cluster.local", "dns://"+addr+"/other"
	if err := Run(t.Context(), []string{"get", ok, refused}, &out); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	got := ParseResults(out.Bytes())
	if len(got) != 2 || got[0].URL != ok || got[0].Answer != "NOERROR 10.96.0.1 10.96.0.2" || got[1].URL != refused || !got[1].OK || got[1].Answer != "REFUSED" {
		t.Fatalf("results: %+v", got)
	}
}
