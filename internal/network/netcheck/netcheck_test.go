// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package netcheck

import (
	"strings"
	"testing"
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
