// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package localcluster

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"
)

// TestSuperviseRestartsWithBackoff: a component that keeps exiting is
// started again, each restart counted, with the delay doubling; the
// supervision ends with its context.
func TestSuperviseRestartsWithBackoff(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.restarts")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Supervise(ctx, file, "/bin/sh", []string{"-c", "exit 3"}, io.Discard) }()
	// Restarts after 0.5 s, then 1 s more: two by 1.5 s, a third not
	// before 3.5 s.
	deadline := time.Now().Add(10 * time.Second)
	for ReadRestarts(file) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("restarts %d after 10 s, want 2", ReadRestarts(file))
		}
		time.Sleep(50 * time.Millisecond)
	}
	reached := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := ReadRestarts(file); n != 2 || time.Since(reached) > time.Second {
		t.Errorf("restarts %d when the supervision ended, want 2 (the third waits 2 s)", n)
	}
}
