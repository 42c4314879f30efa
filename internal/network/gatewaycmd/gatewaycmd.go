// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package gatewaycmd wires the liqo-gateway program: a controller-runtime
// manager, in the network namespace of a node (a host-network pod), that
// applies the cluster's TunnelEndpoints to the gateway's data plane and
// reports the tunnels' state. cmd/liqo-gateway parses flags and calls Run.
package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/liqo-go/liqo/api"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/kubeauth"
	"github.com/liqo-go/liqo/internal/network/gateway"
	"github.com/liqo-go/liqo/internal/network/tunnelendpoint"
)

// Options are the gateway's command-line settings.
type Options struct {
	// Kubeconfig is the path of a kubeconfig; empty means in-cluster.
	Kubeconfig string
	// Namespace is the Liqo namespace, where the gateway's key is kept.
	Namespace string
	// ListenPort is the tunnel's UDP port.
	ListenPort int
	// MTU of the tunnel; 0 derives it from the underlay.
	MTU int
	// MetricsBindAddress serves Prometheus metrics; "0" disables it.
	MetricsBindAddress string
	// MetricsSecure serves them over HTTPS to callers the API server
	// authenticates and authorizes (kubeauth), as the controller
	// manager does: the gateway listens on the node's addresses.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key; a self-signed
	// certificate when empty.
	MetricsCertDir string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables it.
	HealthProbeBindAddress string
	// UAPI serves wireguard-go's configuration socket, so wg(8) reads the
	// tunnel on the node.
	UAPI bool
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{Namespace: install.DefaultNamespace, ListenPort: 51820, MetricsBindAddress: ":8082", MetricsSecure: true, HealthProbeBindAddress: ":8083", UAPI: true}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig; in-cluster configuration when empty")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "The Liqo namespace, where the gateway's key is kept")
	fs.IntVar(&o.ListenPort, "listen-port", o.ListenPort, "UDP port of the tunnel")
	fs.IntVar(&o.MTU, "mtu", o.MTU, "MTU of the tunnel (default: the default route's link MTU minus 80)")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of the Prometheus metrics endpoint; 0 disables it")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve metrics over HTTPS to callers allowed get on /metrics (bind the ClusterRole liqo-metrics-reader); false serves plain HTTP to anyone")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir, "Directory of tls.crt and tls.key for the metrics endpoint (default: a self-signed certificate)")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of the /healthz and /readyz endpoints; 0 disables them")
	fs.BoolVar(&o.UAPI, "uapi", o.UAPI, "Serve WireGuard's configuration socket, for wg show on the node")
}

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	switch {
	case o.Namespace == "":
		return errors.New("--namespace must not be empty")
	case o.ListenPort < 1 || o.ListenPort > 65535:
		return fmt.Errorf("--listen-port=%d is not a port", o.ListenPort)
	case o.MTU != 0 && (o.MTU < 576 || o.MTU > 65535):
		return fmt.Errorf("--mtu=%d is out of 576..65535", o.MTU)
	}
	return nil
}

// Run runs the gateway until ctx ends, then removes its data plane.
func Run(ctx context.Context, o *Options) (err error) {
	if err := o.Validate(); err != nil {
		return err
	}
	log := ctrl.Log.WithName("gateway")
	// Only the key Secret of the Liqo namespace is read: the chart grants
	// that one alone (a list by name).
	mgr, err := newManager(o.Kubeconfig, &corev1.Secret{}, cache.ByObject{
		Namespaces: map[string]cache.Config{o.Namespace: {}},
		Field:      fields.OneTermEqualSelector("metadata.name", netv1alpha1.GatewayKeySecret),
	}, o.metricsServer(), o.HealthProbeBindAddress)
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	dp := gateway.New(log)
	defer func() {
		if cerr := dp.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("removing the data plane: %w", cerr))
		}
	}()
	r := &tunnelendpoint.Reconciler{
		Client: mgr.GetClient(), Namespace: o.Namespace, DataPlane: dp, ListenPort: o.ListenPort, MTU: o.MTU, UAPI: o.UAPI,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.Add(&tunnelendpoint.Reporter{
		Client: mgr.GetClient(), Reconciler: r, Recorder: mgr.GetEventRecorder("liqo-gateway"),
	}); err != nil {
		return err
	}
	host, _ := os.Hostname()
	log.Info("Starting the gateway", "node", host, "port", o.ListenPort)
	return mgr.Start(ctx)
}

// newManager is the manager of either program: the API server of
// kubeconfig (in-cluster when empty), managed fields stripped, and kind
// cached only as by says (the rights the chart grants for it are that
// narrow).
func newManager(kubeconfig string, kind client.Object, by cache.ByObject, metrics metricsserver.Options, probe string) (ctrl.Manager, error) {
	cfg, err := ctrl.GetConfig()
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: api.NewScheme(),
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject:         map[client.Object]cache.ByObject{kind: by},
		},
		Metrics:                metrics,
		HealthProbeBindAddress: probe,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	return mgr, nil
}

// metricsServer is the metrics endpoint's options: by default HTTPS, with
// the caller authenticated and authorized by the API server.
func (o *Options) metricsServer() metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.MetricsBindAddress}
	if o.MetricsSecure {
		m.SecureServing, m.FilterProvider, m.CertDir = true, kubeauth.Filter, o.MetricsCertDir
	}
	return m
}
