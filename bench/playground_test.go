// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package bench

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// startPlayground builds the controller manager from the working tree and
// starts a playground with opts (Dir and ControllerManagerBin are filled
// in), stopped when the benchmark ends; its logs are kept when it fails,
// or always with LIQO_BENCH_KEEP_LOGS set. LIQO_BENCH_DEBUG=1 runs the
// controller managers with debug logs.
func startPlayground(b *testing.B, opts playground.Options, timeout time.Duration) *playground.Playground {
	b.Helper()
	p, stop := startStoppablePlayground(b, opts, timeout)
	b.Cleanup(stop)
	return p
}

// startStoppablePlayground is startPlayground for a benchmark that starts
// several in turn: stop ends this one (it is also called when the
// benchmark ends; calling it twice is fine).
func startStoppablePlayground(b *testing.B, opts playground.Options, timeout time.Duration) (*playground.Playground, func()) {
	b.Helper()
	// controller-runtime's clients log through this; without it they warn.
	ctrllog.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "liqo-bench-") //nolint:usetesting // kept, with the logs, when the benchmark fails
	if err != nil {
		b.Fatal(err)
	}
	if opts.ControllerManagerBin, err = framework.BuildControllerManager(b.Context(), dir); err != nil {
		b.Fatal(err)
	}
	opts.Dir = dir + "/pg"
	if os.Getenv("LIQO_BENCH_DEBUG") != "" {
		// Each step's duration is logged at debug level (kept with
		// LIQO_BENCH_KEEP_LOGS).
		argsFor := opts.ControllerManagerArgsFor
		opts.ControllerManagerArgsFor = func(name string) []string {
			var args []string
			if argsFor != nil {
				args = argsFor(name)
			}
			return append(args, "--zap-log-level=debug")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	p, err := playground.Up(ctx, opts)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			if p != nil {
				_ = p.Stop()
			}
			if b.Failed() || os.Getenv("LIQO_BENCH_KEEP_LOGS") != "" {
				b.Logf("logs kept in %s", dir)
				return
			}
			_ = os.RemoveAll(dir)
		})
	}
	b.Cleanup(stop)
	if err != nil {
		b.Fatal(err)
	}
	return p, stop
}
