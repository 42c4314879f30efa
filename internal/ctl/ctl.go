// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package ctl assembles liqoctl: one sub-package per verb, each with its own
// NewCommand.
package ctl

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/liqo-go/liqo/internal/ctl/add"
	"github.com/liqo-go/liqo/internal/ctl/broker"
	"github.com/liqo-go/liqo/internal/ctl/generateaddcommand"
	"github.com/liqo-go/liqo/internal/ctl/install"
	"github.com/liqo-go/liqo/internal/ctl/offload"
	"github.com/liqo-go/liqo/internal/ctl/playground"
	"github.com/liqo-go/liqo/internal/ctl/remove"
	"github.com/liqo-go/liqo/internal/ctl/status"
	"github.com/liqo-go/liqo/internal/ctl/testnetwork"
	"github.com/liqo-go/liqo/internal/ctl/trust"
	"github.com/liqo-go/liqo/internal/ctl/uninstall"
	"github.com/liqo-go/liqo/internal/ctl/version"
)

// NewCommand returns the liqoctl root command.
func NewCommand(ctx context.Context) *cobra.Command {
	cmd := &cobra.Command{
		Use:           "liqoctl",
		Short:         "Manage Liqo: peer Kubernetes clusters and offload workloads between them",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.AddCommand(install.NewCommand(ctx), uninstall.NewCommand(ctx), version.NewCommand(ctx),
		playground.NewCommand(ctx), generateaddcommand.NewCommand(ctx), add.NewCommand(ctx),
		remove.NewCommand(ctx), status.NewCommand(ctx), offload.NewCommand(ctx), testnetwork.NewCommand(ctx),
		broker.NewCommand(ctx))
	cmd.AddCommand(trust.NewCommands(ctx)...)
	return cmd
}
