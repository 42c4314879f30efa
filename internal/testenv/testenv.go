// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package testenv decides what a test does on a machine that lacks what
// it needs (root, network namespaces, real nodes, a tool): elsewhere it
// skips, but in CI (CI=true) it fails, so that CI can never go green
// without the tests that need the machine's capabilities.
package testenv

import (
	"os"
	"strconv"
	"testing"
)

// InCI says whether the process runs in CI: CI is set to a true value,
// as CI services set it.
func InCI() bool {
	ci, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && ci
}

// Unsupported skips tb because the machine cannot run it (why says what
// is missing), or fails it in CI.
func Unsupported(tb testing.TB, why string) {
	tb.Helper()
	if InCI() {
		tb.Fatalf("CI=true and this machine cannot run this test: %s", why)
	}
	tb.Skipf("this machine cannot run this test: %s", why)
}
