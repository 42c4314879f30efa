// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Command liqo-controller-manager runs a cluster's Liqo controllers.
package main

import (
	"flag"
	"os"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/liqo-go/liqo/internal/controllermanager"
)

func main() {
	opts := controllermanager.NewOptions()
	opts.AddFlags(pflag.CommandLine)
	zapOpts := zap.Options{}
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
