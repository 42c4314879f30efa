// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Command liqo-controller-manager runs a cluster's Liqo controllers.
package main

import (
	"flag"
	"os"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/liqo-go/liqo/internal/controllermanager"
)

func main() {
	opts := controllermanager.NewOptions()
	opts.AddFlags(pflag.CommandLine)
	// Times to the nanosecond (--zap-time-encoding overrides): a peering
	// or a pod start takes well under a second, and its steps cannot be
	// told apart in whole seconds.
	zapOpts := zap.Options{TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
	goFlags := flag.NewFlagSet("zap", flag.ExitOnError)
	zapOpts.BindFlags(goFlags)
	pflag.CommandLine.AddGoFlagSet(goFlags)
	pflag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := controllermanager.Run(ctrl.SetupSignalHandler(), opts); err != nil {
		ctrl.Log.Error(err, "liqo-controller-manager failed")
		os.Exit(1)
	}
}
