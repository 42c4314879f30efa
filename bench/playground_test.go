// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package bench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// startPlayground builds the controller manager from the working tree and
// starts a playground with opts (Dir and ControllerManagerBin are filled
// in), stopped when the benchmark ends; its logs are kept when it fails.
func startPlayground(b *testing.B, opts playground.Options, timeout time.Duration) *playground.Playground {
	b.Helper()
	// controller-runtime's clients log through this; without it they warn.
	ctrllog.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "liqo-bench-") //nolint:usetesting // kept, with the logs, when the benchmark fails
	if err != nil {
		b.Fatal(err)
	}
	if opts.ControllerManagerBin, err = framework.BuildControllerManager(dir); err != nil {
		b.Fatal(err)
	}
	opts.Dir = dir + "/pg"
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	p, err := playground.Up(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = p.Stop()
		if b.Failed() {
			b.Logf("logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return p
}
