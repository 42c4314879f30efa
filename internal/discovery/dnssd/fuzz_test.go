// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package dnssd

import (
	"errors"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// FuzzParseTXT: any TXT strings either parse into an announcement that
// validates and round-trips, or are dropped with a reason; never a panic.
func FuzzParseTXT(f *testing.F) {
	f.Add("id=abc\x00url=https://x:1\x00name=n\x00ns=liqo")
	f.Add("id=abc\x00id=abc")
	f.Add("=\x00\x00garbage")
	f.Fuzz(func(t *testing.T, joined string) {
		txt := strings.Split(joined, "\x00")
		a, err := ParseTXT(txt)
		if err != nil {
			var de *DropError
			if !errors.As(err, &de) || de.Reason == "" {
				t.Fatalf("error without a drop reason: %v", err)
			}
			return
		}
		if err := a.Validate(); err != nil {
			t.Fatalf("parsed announcement does not validate: %v", err)
		}
		again, err := ParseTXT(a.TXT())
		if err != nil || *again != *a {
			t.Fatalf("round trip of %+v: %+v, %v", a, again, err)
		}
	})
}

// FuzzCollect: any packet either fails to unpack, or its records are
// collected without a panic into valid announcements and drops.
func FuzzCollect(f *testing.F) {
	inst := instance()
	msg := new(dns.Msg)
	msg.Response = true
	msg.Answer = inst.Records(120)
	packed, err := msg.Pack()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(packed)
	f.Add(packed[:len(packed)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		var m dns.Msg
		if m.Unpack(b) != nil {
			return
		}
		found, drops := Collect(append(m.Answer, m.Extra...), inst.ServiceFQDN(), Multicast)
		for _, fd := range found {
			if fd.Announcement != nil {
				if err := fd.Announcement.Validate(); err != nil {
					t.Fatalf("collected an invalid announcement: %v", err)
				}
			}
		}
		for _, d := range drops {
			if d.Reason == "" {
				t.Fatal("drop without a reason")
			}
		}
	})
}
