// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package brokercmd is liqo-broker's command line: its flags and Run.
package brokercmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/liqo-go/liqo/api"
	"github.com/liqo-go/liqo/internal/broker"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/kubeauth"
)

// Options are liqo-broker's flags.
type Options struct {
	Kubeconfig             string
	Namespace              string
	Broker                 broker.Options
	MetricsBindAddress     string
	MetricsSecure          bool
	MetricsCertDir         string
	HealthProbeBindAddress string
	LeaderElect            bool
	KubeAPIQPS             float32
	KubeAPIBurst           int
}

// NewOptions returns the defaults: the original broker's ports.
func NewOptions() *Options {
	return &Options{
		Namespace:              install.DefaultNamespace,
		Broker:                 broker.Options{BindAddress: ":8000"},
		MetricsBindAddress:     ":8080",
		MetricsSecure:          true,
		HealthProbeBindAddress: ":8081",
		KubeAPIQPS:             100,
		KubeAPIBurst:           200,
	}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig; in-cluster configuration when empty")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "The Liqo namespace (leader election)")
	fs.BoolVar(&o.Broker.Modes.Catalog, "with-catalog", o.Broker.Modes.Catalog, "Offer the catalog: the clusters peered with the broker, their offers and what is free")
	fs.BoolVar(&o.Broker.Modes.Orchestrator, "with-orchestrator", o.Broker.Modes.Orchestrator, "Orchestrate consumers' pods over the providers each consumer selected")
	fs.BoolVar(&o.Broker.Modes.Aggregator, "with-aggregator", o.Broker.Modes.Aggregator, "Resell the providers as one pool; without --with-orchestrator, every new consumer is aggregated (docs/broker.md)")
	fs.DurationVar(&o.Broker.FailoverAfter, "failover-after", broker.DefaultFailoverAfter, "How long a provider's API server must fail the broker's health checks before consumers' policies count it failed and their pods there are recreated elsewhere")
	fs.StringVar(&o.Broker.BindAddress, "http-bind-address", o.Broker.BindAddress, "Address the broker's HTTP API listens on")
	fs.BoolVar(&o.Broker.PublicCatalog, "public-catalog", o.Broker.PublicCatalog, "Let anonymous callers read the catalog; otherwise callers need get on catalog.broker.liqo.io (ClusterRole liqo-broker-catalog-reader)")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of the Prometheus metrics endpoint; 0 disables it")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve metrics over HTTPS, only to callers allowed get on /metrics (e.g. by the ClusterRole liqo-metrics-reader); false serves plain HTTP to anyone")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir, "Directory with tls.crt and tls.key for the metrics endpoint (default: a self-signed certificate)")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of the /healthz and /readyz endpoints; 0 disables them")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader among replicas before running the orchestrator")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Queries per second to the API server")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of queries to the API server")
}

func (o *Options) restConfig() (*rest.Config, error) {
	if o.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", o.Kubeconfig, err)
		}
		return cfg, nil
	}
	return ctrl.GetConfig()
}

// Run runs the broker until ctx ends.
func Run(ctx context.Context, o *Options) error {
	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	m := metricsserver.Options{BindAddress: o.MetricsBindAddress}
	if o.MetricsSecure {
		m.SecureServing, m.FilterProvider, m.CertDir = true, kubeauth.Filter, o.MetricsCertDir
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  api.NewScheme(),
		Metrics:                 m,
		HealthProbeBindAddress:  o.HealthProbeBindAddress,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        "liqo-broker",
		LeaderElectionNamespace: o.Namespace,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// Ready once the caches the API answers from are filled.
	if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("the caches are not synced yet")
		}
		return nil
	}); err != nil {
		return err
	}
	o.Broker.Namespace = o.Namespace
	if _, err := broker.Setup(ctx, mgr, o.Broker); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
