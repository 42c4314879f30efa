// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Command liqo-gateway runs a cluster's end of the network fabric: the
// WireGuard tunnels to its peers, their routes and address translation.
// `liqo-gateway route-agent` runs on every node and routes the peers'
// ranges to the gateway's node; `liqo-gateway dns` answers, in a
// provider, the DNS queries of each consumer's offloaded pods with that
// consumer's namespace names; `liqo-gateway check` is the probe of
// `liqoctl test network`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/liqo-go/liqo/internal/network/gatewaycmd"
	"github.com/liqo-go/liqo/internal/network/netcheck"
	"github.com/liqo-go/liqo/internal/offloading/dnsproxy"
)

func main() {
	// `liqo-gateway check ...`: the pods of `liqoctl test network`.
	if len(os.Args) > 1 && os.Args[1] == "check" {
		if err := netcheck.Run(ctrl.SetupSignalHandler(), os.Args[2:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "check:", err)
			os.Exit(1)
		}
		return
	}
	zapOpts := zap.Options{TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
	goFlags := flag.NewFlagSet("zap", flag.ExitOnError)
	zapOpts.BindFlags(goFlags)
	pflag.CommandLine.AddGoFlagSet(goFlags)
	// `liqo-gateway route-agent ...`: on every node, the routes to the
	// peers through the gateway's node.
	if len(os.Args) > 1 && os.Args[1] == "route-agent" {
		opts := gatewaycmd.NewRouteAgentOptions()
		opts.AddFlags(pflag.CommandLine)
		_ = pflag.CommandLine.Parse(os.Args[2:])
		ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
		if err := gatewaycmd.RunRouteAgent(ctrl.SetupSignalHandler(), opts); err != nil {
			ctrl.Log.Error(err, "liqo route agent failed")
			os.Exit(1)
		}
		return
	}
	// `liqo-gateway dns ...`: each consumer's DNS, in a provider.
	if len(os.Args) > 1 && os.Args[1] == "dns" {
		opts := dnsproxy.NewOptions()
		opts.AddFlags(pflag.CommandLine)
		_ = pflag.CommandLine.Parse(os.Args[2:])
		ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
		if err := dnsproxy.Run(ctrl.SetupSignalHandler(), opts); err != nil {
			ctrl.Log.Error(err, "liqo DNS proxy failed")
			os.Exit(1)
		}
		return
	}
	opts := gatewaycmd.NewOptions()
	opts.AddFlags(pflag.CommandLine)
	pflag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := gatewaycmd.Run(ctrl.SetupSignalHandler(), opts); err != nil {
		ctrl.Log.Error(err, "liqo-gateway failed")
		os.Exit(1)
	}
}
