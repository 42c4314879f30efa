// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package printer

import (
	"bytes"
	"testing"
)

func TestSafe(t *testing.T) {
	for in, want := range map[string]string{
		"rome":            "rome",
		"Zürich · 東京":     "Zürich · 東京",
		"a\tb":            `"a\tb"`,
		"a\nfake row":     `"a\nfake row"`,
		"\x1b[2Jcleared":  `"\x1b[2Jcleared"`,
		"left\u202eright": `"left\u202eright"`,
		"bell\a":          `"bell\a"`,
		"":                "",
	} {
		if got := Safe(in); got != want {
			t.Errorf("Safe(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestRow(t *testing.T) {
	var out bytes.Buffer
	Row(&out, "p-1", "a\tb", "ok")
	if got, want := out.String(), "p-1\t\"a\\tb\"\tok\n"; got != want {
		t.Errorf("Row = %q, want %q", got, want)
	}
}
