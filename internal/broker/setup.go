// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/internal/kubeauth"
	"github.com/liqo-go/liqo/internal/virtualkubelet/node"
)

// Options are what the broker runs with.
type Options struct {
	// Modes are the services on: at least one.
	Modes Modes
	// BindAddress is where the HTTP API listens (host:port).
	BindAddress string
	// PublicCatalog lets anonymous callers read the catalog.
	PublicCatalog bool
	// Namespace is the Liqo namespace, where the broker keeps its
	// introductions and reads the providers' Measurements.
	Namespace string
	// FailoverAfter is how long a provider must fail the health checks
	// before a policy counts it failed.
	FailoverAfter time.Duration
}

// ParseModes parses a comma-separated subset of the broker's services
// (liqoctl's --broker), in order, without repeats.
func ParseModes(list string) ([]string, error) {
	var modes []string
	for _, m := range strings.Split(list, ",") {
		m = strings.TrimSpace(m)
		switch m {
		case "catalog", "orchestrator", "aggregator":
		default:
			return nil, fmt.Errorf("--broker %q: want a comma-separated list of catalog, orchestrator, aggregator", list)
		}
		if !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	return modes, nil
}

// Setup adds the broker to mgr: its HTTP API, and the controllers of the
// modes on. It returns the API server, whose listener is open.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) (*Server, error) {
	if !o.Modes.Catalog && !o.Modes.Orchestrator && !o.Modes.Aggregator {
		return nil, errors.New("the broker needs at least one mode: --with-catalog, --with-orchestrator or --with-aggregator")
	}
	if err := node.IndexPods(ctx, mgr); err != nil {
		return nil, err
	}
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), HTTPClient: mgr.GetHTTPClient()})
	if err != nil {
		return nil, err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.BindAddress)
	if err != nil {
		return nil, fmt.Errorf("--http-bind-address %q: %w", o.BindAddress, err)
	}
	s := &Server{
		Reader: mgr.GetClient(), Writer: direct, Reviewer: kubeauth.NewReviewer(direct),
		Modes: o.Modes, PublicCatalog: o.PublicCatalog, Listener: ln, Namespace: o.Namespace,
	}
	exportKPIs(s)
	if err := mgr.Add(s); err != nil {
		_ = ln.Close()
		return nil, err
	}
	if err := (&Introducer{Client: mgr.GetClient(), Namespace: o.Namespace}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the introducer: %w", err)
	}
	// The aggregator is the orchestrator's machinery serving consumers
	// whose Selection aggregates: alone, it gives every new consumer
	// such a Selection; beside the orchestrator, the broker's operator
	// aggregates a consumer by setting spec.aggregate.
	if o.Modes.Orchestrator || o.Modes.Aggregator {
		if err := (&Orchestrator{Client: mgr.GetClient(), Live: direct, Namespace: o.Namespace, FailoverAfter: o.FailoverAfter,
			AggregateNew: o.Modes.Aggregator && !o.Modes.Orchestrator}).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("setting up the orchestrator: %w", err)
		}
	}
	return s, nil
}
