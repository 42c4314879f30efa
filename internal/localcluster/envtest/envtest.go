// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package envtest starts what a controller-level test needs: a real etcd
// and kube-apiserver from bin/, nothing else, stopped when the test ends.
// Such a test runs one reconciler against it, without the whole controller
// manager; -short skips it.
package envtest

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/liqo-go/liqo/internal/localcluster"
)

// Start starts an API server for tb (skipped with -short) and returns its
// admin configuration. Nothing but the API server runs: no namespace is
// finalized, no quota counted, no pod scheduled.
func Start(tb testing.TB, name string) *rest.Config {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts a real API server; skipped with -short")
	}
	c, err := localcluster.Start(tb.Context(), localcluster.Options{
		Name: name, Dir: tb.TempDir(), APIServerOnly: true, StartTimeout: time.Minute,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("stopping the API server: %v", err)
		}
	})
	return rest.CopyConfig(c.RESTConfig)
}

// Eventually polls cond until it returns nil, and fails tb with its last
// error after timeout.
func Eventually(tb testing.TB, timeout time.Duration, cond func(ctx context.Context) error) {
	tb.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(tb.Context(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = cond(ctx)
		return last == nil, nil
	}); err != nil {
		tb.Fatalf("not within %s: %v", timeout, last)
	}
}

// Consistently checks cond every 100 ms for duration and fails tb at the
// first error.
func Consistently(tb testing.TB, duration time.Duration, cond func(ctx context.Context) error) {
	tb.Helper()
	deadline := time.Now().Add(duration)
	for {
		if err := cond(tb.Context()); err != nil {
			tb.Fatalf("stopped holding before %s were over: %v", duration, err)
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
