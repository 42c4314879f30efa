// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Command liqoctl is Liqo's command-line tool.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/liqo-go/liqo/internal/ctl"
)

func main() {
	// The clients liqoctl builds report what fails as errors, which it
	// prints; controller-runtime's own log would only warn, after 30 s,
	// that nobody set it.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := ctl.NewCommand(ctx).Execute()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
