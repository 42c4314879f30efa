// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package wan

import (
	"strings"
	"testing"

	"github.com/liqo-go/liqo/internal/discovery/dnssd"
)

// TestDropSummary: the condition counts what was dropped by reason, with
// the first detail of each, quoted and bounded (it is what a DNS server
// served).
func TestDropSummary(t *testing.T) {
	got := dropSummary([]*dnssd.DropError{
		{Reason: dnssd.ReasonMissing, Detail: "a._liqo_auth._tcp.liqo.test.: key id is missing"},
		{Reason: dnssd.ReasonInvalid, Detail: "b: url \x1b[31m" + strings.Repeat("x", 500)},
		{Reason: dnssd.ReasonMissing, Detail: "c: key url is missing"},
	})
	for _, want := range []string{
		"3 dropped: ",
		`1 invalid ("b: url \x1b[31mxxx`,
		`2 missing ("a._liqo_auth._tcp.liqo.test.: key id is missing")`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "c: key url") || strings.ContainsRune(got, '\x1b') || len(got) > 600 {
		t.Errorf("summary %q: want the first detail of each reason only, quoted and bounded", got)
	}
}
