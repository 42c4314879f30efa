// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/network/routeagent"
)

// RouteAgentOptions are the route agent's command-line settings
// (`liqo-gateway route-agent`).
type RouteAgentOptions struct {
	// Kubeconfig is the path of a kubeconfig; empty means in-cluster.
	Kubeconfig string
	// Namespace is the Liqo namespace, where the gateway's pods run.
	Namespace string
	// NodeName is this node's name, for its events.
	NodeName string
	// MetricsBindAddress serves Prometheus metrics; "0" disables it.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables it.
	HealthProbeBindAddress string
}

// NewRouteAgentOptions returns the defaults: the node name from $NODE_NAME
// (the chart sets it from spec.nodeName).
func NewRouteAgentOptions() *RouteAgentOptions {
	return &RouteAgentOptions{Namespace: install.DefaultNamespace, NodeName: os.Getenv("NODE_NAME"),
		MetricsBindAddress: "0", HealthProbeBindAddress: ":8084"}
}

// AddFlags registers the options on fs.
func (o *RouteAgentOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig; in-cluster configuration when empty")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "The Liqo namespace, where the gateway's pods run")
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "This node's name, for its events (default $NODE_NAME)")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of the /healthz and /readyz endpoints; 0 disables them")
}

// RunRouteAgent keeps this node's routes to the peers through the
// gateway's node until ctx ends, then removes them.
func RunRouteAgent(ctx context.Context, o *RouteAgentOptions) (err error) {
	if o.Namespace == "" {
		return errors.New("--namespace must not be empty")
	}
	log := ctrl.Log.WithName("route-agent")
	// Only the gateway's pods are watched, in the Liqo namespace.
	mgr, err := newManager(o.Kubeconfig, &corev1.Pod{}, cache.ByObject{
		Namespaces: map[string]cache.Config{o.Namespace: {}},
		Label:      labels.SelectorFromSet(labels.Set{netv1alpha1.GatewayComponentLabel: netv1alpha1.GatewayComponentValue}),
	}, metricsserver.Options{BindAddress: o.MetricsBindAddress}, o.HealthProbeBindAddress)
	if err != nil {
		return err
	}
	r := &routeagent.Reconciler{
		Client: mgr.GetClient(), Namespace: o.Namespace, NodeName: o.NodeName,
		Recorder: mgr.GetEventRecorder("liqo-route-agent"), Routes: routeagent.Sync,
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("routes", func(*http.Request) error { return r.Healthy() }); err != nil {
		return err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	defer func() {
		// Stopped (uninstalled, or moved): nothing of the agent stays.
		if _, cerr := routeagent.Sync(netip.Addr{}, nil); cerr != nil {
			err = errors.Join(err, fmt.Errorf("removing the routes: %w", cerr))
		}
	}()
	log.Info("Starting the route agent", "node", o.NodeName)
	return mgr.Start(ctx)
}
