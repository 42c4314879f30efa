// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package exposure decides what each peer may open connections to through
// the tunnel: by default what the peering exposes to it, the pods this
// cluster runs for it (as its provider) and this cluster's own pods in the
// namespaces it offloads to it (as its consumer: the endpoints of the
// Services the peer's copies point to); every pod, when an operator opted
// in on the peer's ForeignCluster (spec.networkReach: AllPods). The
// Reconciler writes the decision into the peer's TunnelEndpoint
// (spec.reach, spec.exposed), which the gateway enforces in its filter.
package exposure

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/sharing"
)

// +kubebuilder:rbac:groups=net.liqo.io,resources=tunnelendpoints,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=offloading.liqo.io,resources=namespaceoffloadings,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.liqo.io,resources=foreignclusters,verbs=get;list;watch

// Reconciler keeps each TunnelEndpoint's reach and exposed addresses.
type Reconciler struct {
	// Client reads TunnelEndpoints, pods, nodes, NamespaceOffloadings and
	// ForeignClusters (cached) and patches TunnelEndpoints.
	Client client.Client
	// Introducers returns the brokers that introduced a peer to this
	// cluster, as accepted now (peering.IntroducersOf); nil for none. The
	// peer also reaches the pods such a broker runs here for it.
	Introducers func(ctx context.Context, peer string) ([]string, error)
}

// Reconcile implements reconcile.Reconciler; the request names a peer's
// TunnelEndpoint.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var tep netv1alpha1.TunnelEndpoint
	if err := r.Client.Get(ctx, client.ObjectKey{Name: req.Name}, &tep); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	peer := tep.Name
	reach := netv1alpha1.ReachPeering
	fc, err := foreigncluster.Find(ctx, r.Client, peer)
	if err != nil {
		return ctrl.Result{}, err
	}
	if fc != nil && fc.Spec.NetworkReach == string(netv1alpha1.ReachAllPods) {
		reach = netv1alpha1.ReachAllPods
	}
	var exposed []string
	// Before the peer answered, no gateway applies the TunnelEndpoint:
	// nothing to list (and nothing to write while a burst of pods runs in
	// a cluster without a network).
	if reach == netv1alpha1.ReachPeering && tep.Spec.LocalSeenAs != nil {
		if exposed, err = r.exposed(ctx, peer); err != nil {
			return ctrl.Result{}, err
		}
	}
	if tep.Spec.Reach == reach && slices.Equal(tep.Spec.Exposed, exposed) {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(tep.DeepCopy())
	tep.Spec.Reach, tep.Spec.Exposed = reach, exposed
	if err := r.Client.Patch(ctx, &tep, patch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Exposed to peer", "peer", peer, "reach", reach, "addresses", len(exposed))
	return ctrl.Result{}, nil
}

// PodBatch is how long the exposure of a peer waits after a pod changed,
// so that the pods of a burst are written at once: a pod is reachable
// from the peer this long after it got its address, at most (a peer's
// connection attempt meanwhile is retried, as TCP does).
const PodBatch = time.Second

// maxExposed is how many addresses a TunnelEndpoint lists at most (its
// schema's bound).
const maxExposed = 16384

// exposed lists, sorted, the addresses of the pods this cluster runs for
// peer and of its own pods in the namespaces it offloads to peer: running
// (or about to), with an IPv4 address of their own (not the node's).
func (r *Reconciler) exposed(ctx context.Context, peer string) ([]string, error) {
	var addrs []netip.Addr
	add := func(p *corev1.Pod) {
		if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			return
		}
		for _, ip := range p.Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil && a.Unmap().Is4() {
				addrs = append(addrs, a.Unmap())
			}
		}
		if len(p.Status.PodIPs) == 0 {
			if a, err := netip.ParseAddr(p.Status.PodIP); err == nil && a.Unmap().Is4() {
				addrs = append(addrs, a.Unmap())
			}
		}
	}
	var forPeer corev1.PodList
	if err := r.Client.List(ctx, &forPeer, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: peer}); err != nil {
		return nil, fmt.Errorf("listing the pods run for %s: %w", peer, err)
	}
	for i := range forPeer.Items {
		add(&forPeer.Items[i])
	}
	// The pods a broker that introduced the peer runs here for it (the
	// broker's own pods, marked by the broker for that peer): the direct
	// data plane. A broker can open its own pods only.
	if r.Introducers != nil {
		brokers, err := r.Introducers(ctx, peer)
		if err != nil {
			return nil, fmt.Errorf("reading the introductions of %s: %w", peer, err)
		}
		for _, b := range brokers {
			var forIt corev1.PodList
			if err := r.Client.List(ctx, &forIt, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: b, offloadingv1alpha1.ForClusterLabel: peer}); err != nil {
				return nil, fmt.Errorf("listing the pods %s runs for %s: %w", b, peer, err)
			}
			for i := range forIt.Items {
				add(&forIt.Items[i])
			}
		}
	}
	var offloadings offloadingv1alpha1.NamespaceOffloadingList
	if err := r.Client.List(ctx, &offloadings); err != nil {
		return nil, fmt.Errorf("listing the offloaded namespaces: %w", err)
	}
	virtual := map[string]bool{}
	for _, no := range offloadings.Items {
		if !offloadsTo(&no, peer) {
			continue
		}
		var pods corev1.PodList
		if err := r.Client.List(ctx, &pods, client.InNamespace(no.Namespace)); err != nil {
			return nil, fmt.Errorf("listing the pods of %s: %w", no.Namespace, err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Spec.NodeName == "" {
				continue
			}
			v, known := virtual[p.Spec.NodeName]
			if !known {
				var node corev1.Node
				err := r.Client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node)
				if err != nil && !apierrors.IsNotFound(err) {
					return nil, err
				}
				v = err == nil && sharing.IsVirtual(&node)
				virtual[p.Spec.NodeName] = v
			}
			// A pod on a virtual node runs in a provider: its address is
			// the provider's, not this cluster's.
			if !v {
				add(p)
			}
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	if len(addrs) > maxExposed {
		ctrl.LoggerFrom(ctx).Info("Exposure cut short: the peer reaches the first addresses only", "peer", peer, "addresses", len(addrs), "listed", maxExposed)
		addrs = addrs[:maxExposed]
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, netip.PrefixFrom(a, 32).String())
	}
	if len(out) == 0 {
		out = nil
	}
	return out, nil
}

// offloadsTo says whether no offloads its namespace to peer.
func offloadsTo(no *offloadingv1alpha1.NamespaceOffloading, peer string) bool {
	return slices.ContainsFunc(no.Status.RemoteNamespaces, func(st offloadingv1alpha1.RemoteNamespaceStatus) bool {
		return st.ClusterID == peer
	})
}

// SetupWithManager registers the reconciler: a TunnelEndpoint, the pods
// that may be exposed to its peer (those run for it, those of the
// namespaces offloaded to it), those namespaces' offloadings, and its
// ForeignCluster.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		return errors.New("exposure: Client is required")
	}
	peerRequest := func(id string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Name: id}}
	}
	peersOf := func(ctx context.Context, o client.Object) []reconcile.Request {
		if id := o.GetLabels()[offloadingv1alpha1.OriginClusterLabel]; id != "" {
			reqs := []reconcile.Request{peerRequest(id)}
			if forID := o.GetLabels()[offloadingv1alpha1.ForClusterLabel]; forID != "" && forID != id {
				reqs = append(reqs, peerRequest(forID))
			}
			return reqs
		}
		var no offloadingv1alpha1.NamespaceOffloading
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
			return nil
		}
		return offloadingPeers(&no, peerRequest)
	}
	// Pods start by the hundred: a peer's addresses are written once per
	// PodBatch at most, not once per pod.
	later := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range peersOf(ctx, o) {
			q.AddAfter(req, PodBatch)
		}
	}
	podPeers := handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			later(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			later(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			later(ctx, e.Object, q)
		},
	}
	// A pod matters when it gets or loses an address, and when it goes.
	addressChanged := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
			return o.Status.PodIP != n.Status.PodIP || o.Status.Phase != n.Status.Phase || o.Spec.NodeName != n.Spec.NodeName
		},
		CreateFunc: func(e event.CreateEvent) bool { return e.Object.(*corev1.Pod).Status.PodIP != "" },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("exposure").
		For(&netv1alpha1.TunnelEndpoint{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, podPeers, builder.WithPredicates(addressChanged)).
		Watches(&offloadingv1alpha1.NamespaceOffloading{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return offloadingPeers(o.(*offloadingv1alpha1.NamespaceOffloading), peerRequest)
		})).
		// An introduction accepted or withdrawn: its consumer's reach.
		Watches(&discoveryv1alpha1.Introduction{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{peerRequest(o.GetName())}
		})).
		Watches(&discoveryv1alpha1.ForeignCluster{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if id := o.GetLabels()[discoveryv1alpha1.ClusterIDLabel]; id != "" {
				return []reconcile.Request{peerRequest(id)}
			}
			return nil
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

func offloadingPeers(no *offloadingv1alpha1.NamespaceOffloading, req func(string) reconcile.Request) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(no.Status.RemoteNamespaces))
	for _, st := range no.Status.RemoteNamespaces {
		out = append(out, req(st.ClusterID))
	}
	return out
}
