// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package routeagent sends, from every node that does not run the
// gateway, the traffic for the peers' ranges to the node that does. The
// gateway routes those ranges into its tunnel on its own node; a pod
// elsewhere would send them to its node's default route. The Reconciler
// runs on each node (a host-network DaemonSet pod) and keeps one route per
// peer range, through the gateway's node, in the node's main table.
//
// What it routes comes from this cluster's own objects only: the ranges
// of the TunnelEndpoints (which this cluster's remapping chose, away from
// every range in use here) and the node of the gateway's pod. A peer
// writes neither.
package routeagent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/network/tunnelendpoint"
)

// Routes programs the node: Sync in production.
type Routes func(gw netip.Addr, ranges []netip.Prefix) (bool, error)

// Reconciler keeps the node's routes to the peers' ranges through the
// gateway's node.
type Reconciler struct {
	// Client reads TunnelEndpoints and the gateway's pods (cached).
	Client client.Client
	// Namespace is the Liqo namespace, where the gateway's pods run.
	Namespace string
	// NodeName is this node's: failures are reported as its events.
	NodeName string
	// Recorder, when set, records a Warning on the Node when the routes
	// cannot be installed, and a Normal event when they are again.
	Recorder events.EventRecorder
	// Routes programs the node.
	Routes Routes

	mu      sync.Mutex
	gateway netip.Addr
	failed  error
	routed  bool
}

var allKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "all"}}

// Reconcile makes the node's routes what the TunnelEndpoints and the
// gateway's pod say. With no gateway pod ready (a restart under way), the
// routes go on to the node it was on: the new pod usually comes back
// there, and a packet sent meanwhile would be lost either way.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var teps netv1alpha1.TunnelEndpointList
	if err := r.Client.List(ctx, &teps); err != nil {
		return ctrl.Result{}, err
	}
	var ranges []netip.Prefix
	for _, tep := range teps.Items {
		rs, err := tunnelendpoint.RemoteRanges(&tep)
		if err != nil {
			// The gateway refuses its whole configuration then (the
			// TunnelEndpoints say GatewayError); the other peers'
			// routes stay, harmless while it does.
			log.Error(err, "TunnelEndpoint left out", "tunnelEndpoint", tep.Name)
			continue
		}
		ranges = append(ranges, rs...)
	}
	slices.SortFunc(ranges, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	gw, err := r.gatewayNode(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if gw.IsValid() {
		if gw != r.gateway {
			log.Info("Gateway", "node", gw)
		}
		r.gateway = gw
	}
	routed, err := r.Routes(r.gateway, ranges)
	if routed != r.routed || (err == nil) != (r.failed == nil) {
		log.Info("Routes", "gateway", r.gateway, "ranges", ranges, "routed", routed, "error", err)
		r.event(err, routed, ranges)
	}
	r.routed, r.failed = routed, err
	return ctrl.Result{}, err
}

// gatewayNode is the node address of the gateway's ready pod (the newest,
// if a rollout briefly shows two); invalid when none is ready.
func (r *Reconciler) gatewayNode(ctx context.Context) (netip.Addr, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(r.Namespace),
		client.MatchingLabels{netv1alpha1.GatewayComponentLabel: netv1alpha1.GatewayComponentValue}); err != nil {
		return netip.Addr{}, err
	}
	var best *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if !p.DeletionTimestamp.IsZero() || p.Status.Phase != corev1.PodRunning || !ready(p) {
			continue
		}
		if best == nil || p.CreationTimestamp.After(best.CreationTimestamp.Time) {
			best = p
		}
	}
	if best == nil {
		return netip.Addr{}, nil
	}
	a, err := netip.ParseAddr(best.Status.HostIP)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("the gateway's pod %s: status.hostIP %q: %w", best.Name, best.Status.HostIP, err)
	}
	return a, nil
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (r *Reconciler) event(err error, routed bool, ranges []netip.Prefix) {
	if r.Recorder == nil || r.NodeName == "" {
		return
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.NodeName}}
	switch {
	case err != nil:
		r.Recorder.Eventf(node, nil, corev1.EventTypeWarning, "LiqoRoutesFailed", "Route",
			"The routes to the peers' ranges through the gateway's node %s could not be installed: %v", r.gateway, err)
	case routed:
		r.Recorder.Eventf(node, nil, corev1.EventTypeNormal, "LiqoRoutesReady", "Route",
			"The peers' ranges %v are routed through the gateway's node %s", ranges, r.gateway)
	}
}

// Healthy is a readiness check: the last routes were installed.
func (r *Reconciler) Healthy() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed != nil {
		return fmt.Errorf("routes: %w", r.failed)
	}
	return nil
}

// SetupWithManager registers the reconciler: any TunnelEndpoint and any
// gateway pod re-reads everything.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Namespace == "" || r.Routes == nil {
		return errors.New("routeagent: Client, Namespace and Routes are required")
	}
	toAll := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{allKey} })
	gatewayPods := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.Namespace && o.GetLabels()[netv1alpha1.GatewayComponentLabel] == netv1alpha1.GatewayComponentValue
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("routeagent").
		Watches(&netv1alpha1.TunnelEndpoint{}, toAll, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, toAll, builder.WithPredicates(gatewayPods)).
		Complete(r)
}
