// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package browser

import (
	"strings"
	"testing"
)

// TestNewUnderALongTestName starts the browser from a subtest whose name
// is longer than a Unix socket's path may be: the browser's directory
// must not be named after the test (Chromium exited without a word when
// it was).
func TestNewUnderALongTestName(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	t.Run(strings.Repeat("a subtest with a long name, ", 5), func(t *testing.T) {
		p := New(t)
		if got := Eval[int](p, `6 * 7`); got != 42 {
			t.Fatalf("6 * 7 in the page = %d, want 42", got)
		}
	})
}
