// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package envtest starts what a controller-level test needs: a real etcd
// and kube-apiserver from bin/, nothing else, stopped when the test ends.
// Such a test runs one reconciler against it, without the whole controller
// manager; -short skips it.
package envtest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/liqo-go/liqo/api"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster"
)

// Start starts an API server for tb (skipped with -short) and returns its
// admin configuration. Nothing but the API server runs: no namespace is
// finalized, no quota counted, no pod scheduled.
func Start(tb testing.TB, name string) *rest.Config {
	tb.Helper()
	return rest.CopyConfig(StartCluster(tb, name).RESTConfig)
}

// StartInstalled is Start with what liqoctl install puts in a cluster
// before its controller manager runs (install.Install, default options:
// the CRDs, the namespace, the rights), and an admin client that knows
// Liqo's types.
func StartInstalled(tb testing.TB, name string) (*rest.Config, client.Client) {
	tb.Helper()
	cfg := Start(tb, name)
	if err := install.Install(tb.Context(), cfg, install.Options{}); err != nil {
		tb.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		tb.Fatal(err)
	}
	return cfg, c
}

// Eventually polls cond until it returns nil, and fails tb with its last
// error after timeout.
func Eventually(tb testing.TB, timeout time.Duration, cond func(ctx context.Context) error) {
	tb.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(tb.Context(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = latest(ctx, last, cond(ctx))
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

// StartManager runs a controller manager against cfg with only what setup
// adds to it (no metrics endpoint, no leader election), until tb ends.
// Each of opts changes the manager's options first (RunManager).
func StartManager(tb testing.TB, cfg *rest.Config, setup func(ctrl.Manager) error, opts ...func(*ctrl.Options)) ctrl.Manager {
	tb.Helper()
	mgr, stop, err := RunManager(cfg, setup, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := stop(); err != nil {
			tb.Errorf("manager: %v", err)
		}
	})
	return mgr
}

// RunManager starts a controller manager against cfg with only what setup
// adds to it, and returns the function that stops it; StartManager for a
// TestMain, whose manager serves every test of the package.
// Each of opts changes the manager's options first (its cache's, say).
func RunManager(cfg *rest.Config, setup func(ctrl.Manager) error, opts ...func(*ctrl.Options)) (ctrl.Manager, func() error, error) {
	o := ctrl.Options{
		Scheme:     api.NewScheme(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	for _, f := range opts {
		f(&o)
	}
	mgr, err := ctrl.NewManager(cfg, o)
	if err != nil {
		return nil, nil, err
	}
	if err := setup(mgr); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return mgr, func() error { cancel(); return <-done }, nil
}

// StartShared starts an API server for every test of a package, from its
// TestMain (tests that each create namespaces of their own can share one,
// and save a start each), in a temporary directory removed by stop.
func StartShared(name string) (cfg *rest.Config, stop func() error, err error) {
	dir, err := os.MkdirTemp("", "liqo-envtest-")
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := localcluster.Start(ctx, localcluster.Options{Name: name, Dir: dir, APIServerOnly: true, StartTimeout: time.Minute})
	if err != nil {
		return nil, nil, errors.Join(err, os.RemoveAll(dir))
	}
	return rest.CopyConfig(c.RESTConfig), func() error { return errors.Join(c.Stop(), os.RemoveAll(dir)) }, nil
}

// latest is the error to report: err, unless the deadline cut it short and
// an earlier error says more.
func latest(ctx context.Context, earlier, err error) error {
	if err != nil && ctx.Err() != nil && earlier != nil {
		return earlier
	}
	return err
}
