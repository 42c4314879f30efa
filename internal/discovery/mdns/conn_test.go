// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package mdns

import (
	"errors"
	"testing"

	"github.com/miekg/dns"

	"github.com/liqo-go/liqo/internal/discovery/dnssd"
)

func TestDecodeClassifiesDrops(t *testing.T) {
	inst := &dnssd.Instance{Name: "abc", Service: dnssd.DefaultService, Domain: "local.", Host: "abc", Port: 1,
		Announcement: dnssd.Announcement{ClusterID: "abc", AuthURL: "https://x"}}
	msg := new(dns.Msg)
	msg.Response = true
	msg.Answer = inst.Records(120)
	packet, err := msg.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(packet); err != nil {
		t.Fatalf("a valid packet was dropped: %v", err)
	}
	tests := []struct {
		name   string
		packet []byte
		reason string
	}{
		{"cut in a record", packet[:len(packet)-7], dnssd.ReasonTruncated},
		{"header only", packet[:13], dnssd.ReasonTruncated},
		{"shorter than a header", packet[:5], dnssd.ReasonTruncated},
		{"text", []byte("this is not DNS at all, not even close"), dnssd.ReasonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.packet)
			var de *dnssd.DropError
			if !errors.As(err, &de) || de.Reason != tt.reason {
				t.Fatalf("Decode = %v, want a %s drop", err, tt.reason)
			}
		})
	}
}
