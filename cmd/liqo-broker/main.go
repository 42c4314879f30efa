// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Command liqo-broker runs a broker beside Liqo on a broker cluster: the
// catalog and the orchestrator (docs/broker.md).
package main

import (
	"flag"
	"os"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/liqo-go/liqo/internal/broker/brokercmd"
)

func main() {
	opts := brokercmd.NewOptions()
	opts.AddFlags(pflag.CommandLine)
	zapOpts := zap.Options{TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
	goFlags := flag.NewFlagSet("zap", flag.ExitOnError)
	zapOpts.BindFlags(goFlags)
	pflag.CommandLine.AddGoFlagSet(goFlags)
	pflag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := brokercmd.Run(ctrl.SetupSignalHandler(), opts); err != nil {
		ctrl.Log.Error(err, "liqo-broker failed")
		os.Exit(1)
	}
}
