// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package discovery_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/liqo-go/liqo/internal/discovery/dnssd"
	"github.com/liqo-go/liqo/internal/discovery/mdns"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// rawSender multicasts hand-made packets on the suite's mDNS port.
type rawSender struct{ conn *mdns.Conn }

func (r rawSender) response(t *testing.T, txt []string) []byte {
	t.Helper()
	const name = "intruder"
	inst := &dnssd.Instance{Name: name, Service: dnssd.DefaultService, Domain: "local.", Host: name, Port: 1}
	msg := new(dns.Msg)
	msg.Response = true
	msg.Answer = inst.Records(120)
	for _, rr := range msg.Answer {
		if tr, ok := rr.(*dns.TXT); ok {
			tr.Txt = txt
		}
	}
	b, err := msg.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMalformedInputIsDroppedAndCounted sends truncated, garbage,
// oversized, duplicated and invalid mDNS input to the clusters: each is
// dropped and counted by reason, no process dies, and nothing is recorded.
func TestMalformedInputIsDroppedAndCounted(t *testing.T) {
	m := member(0)
	framework.LogOnFailure(t, m)
	conn, err := mdns.Listen(t.Context(), "lo", suite.MDNSPort)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s := rawSender{conn}

	valid := s.response(t, []string{"id=intruder", "url=https://127.0.0.1:1"})
	dupKey := s.response(t, []string{"id=intruder", "id=other", "url=https://127.0.0.1:1"})
	badURL := s.response(t, []string{"id=intruder", "url=ftp://127.0.0.1:1"})
	badID := s.response(t, []string{"id=NOT_A_LABEL", "url=https://127.0.0.1:1"})
	tooMany := s.response(t, append([]string{"id=intruder", "url=https://127.0.0.1:1"}, strings.Split(strings.Repeat("k=v,", 15), ",")...))
	update := new(dns.Msg)
	update.Opcode = dns.OpcodeUpdate
	updatePacket, err := update.Pack()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		reason  string
		packets [][]byte
	}{
		{dnssd.ReasonTruncated, [][]byte{valid[:len(valid)-7], valid[:13], {0xff, 0xff, 0xff}}},
		{dnssd.ReasonMalformed, [][]byte{[]byte("this is not DNS at all, not even close"), updatePacket}},
		{dnssd.ReasonDuplicate, [][]byte{dupKey}},
		{dnssd.ReasonInvalid, [][]byte{badURL, badID}},
		{dnssd.ReasonOversized, [][]byte{tooMany, append(append([]byte{}, valid...), make([]byte, mdns.MaxPacket)...)}},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			labels := map[string]string{"source": dnssd.SourceMDNS, "reason": tc.reason}
			before := framework.Metric(t, m, "liqo_discovery_dropped_total", labels)
			for _, p := range tc.packets {
				if err := conn.SendRaw(p); err != nil {
					t.Fatalf("sending: %v", err)
				}
			}
			framework.Eventually(t, 5*time.Second, func() error {
				if got := framework.Metric(t, m, "liqo_discovery_dropped_total", labels); got < before+float64(len(tc.packets)) {
					return fmt.Errorf("dropped{reason=%s} went from %v to %v, want +%d", tc.reason, before, got, len(tc.packets))
				}
				return nil
			})
		})
	}

	for _, mm := range suite.Members {
		if !controllerManagerRunning(mm) {
			t.Fatalf("the controller manager of %s is gone", mm.Name)
		}
		if fc, err := foreigncluster.Find(t.Context(), framework.Client(t, mm), "intruder"); err != nil || fc != nil {
			t.Fatalf("%s recorded the intruder from invalid input (%v)", mm.Name, err)
		}
	}
	// Still working: a cluster is still recorded after all that.
	for _, other := range suite.Members[1:] {
		framework.Eventually(t, 5*time.Second, func() error { _, err := foreignClusterOf(t, m, other); return err })
	}
}
