// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package publishing states this cluster's network parameters to each
// peer and learns how the peer sees them. For every peered cluster, the
// Reconciler writes a NetworkConfig (this cluster's pod and external
// ranges, its gateway's key, role and, for a server, endpoint) into this
// cluster's tenant namespace in the peer, with the identity the peering
// gave it there; reads back the peer's answer (how it sees those ranges)
// into the TunnelEndpoint of the peer, which the gateway applies; and
// reports the tunnel in the ForeignCluster's NetworkEstablished condition.
package publishing

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/clusterconfig"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/network/wgkey"
	"github.com/liqo-go/liqo/internal/remotewatch"
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=net.liqo.io,resources=tunnelendpoints,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.liqo.io,resources=foreignclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.liqo.io,resources=foreignclusters/status,verbs=get;update;patch

// DefaultRecheck is how often the parameters in a peer are checked when
// nothing wakes the reconciler: drift in the peer is repaired within it.
const DefaultRecheck = 30 * time.Second

// answerWatchLimit bounds one watch of the peer's answer; the recheck
// covers what comes after.
const answerWatchLimit = 2 * time.Minute

// Peer returns the REST config of the peer's API server with the identity
// this cluster holds in its tenant namespace there, and the role of this
// cluster's gateway towards it; nil when the peering has given none yet.
type Peer func(ctx context.Context, peerID string) (*rest.Config, netv1alpha1.GatewayRole, error)

// Endpoint returns where this cluster's gateway listens, as peers reach
// it; nil when it is not known yet (no gateway running).
type Endpoint func(ctx context.Context) (*netv1alpha1.GatewayEndpoint, error)

// Reconciler publishes this cluster's network parameters to its peers.
type Reconciler struct {
	// Client reads ForeignClusters and TunnelEndpoints (cached) and
	// writes locally.
	Client client.Client
	// LocalClusterID is this cluster's.
	LocalClusterID string
	// Namespace is the Liqo namespace, where the gateway's key is kept.
	Namespace string
	// Config returns the ClusterConfig in force: this cluster's ranges.
	Config func() *configv1alpha1.ClusterConfig
	// Changes receives a value when the ClusterConfig changed.
	Changes <-chan struct{}
	// Peer gives the client towards a peer.
	Peer Peer
	// Endpoint gives this cluster's gateway endpoint.
	Endpoint Endpoint
	// Recheck is DefaultRecheck when zero.
	Recheck time.Duration

	clients identity.Clients
	// answers watches, in each peer, the NetworkConfig this cluster
	// stated, until the peer answered.
	answers *remotewatch.Set
}

// Reconcile implements reconcile.Reconciler, for the ForeignCluster of a
// peer.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var fc discoveryv1alpha1.ForeignCluster
	if err := r.Client.Get(ctx, req.NamespacedName, &fc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	peerID := fc.Spec.ClusterIdentity.ClusterID
	if peerID == "" || !fc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	orig := fc.DeepCopy()
	result, cond, err := r.publish(ctx, peerID, peering(&fc))
	if cond != nil {
		r.report(ctx, &fc, cond)
		if perr := foreigncluster.PatchStatus(ctx, r.Client, nil, orig, &fc); perr != nil && !apierrors.IsNotFound(perr) {
			err = errors.Join(err, perr)
		}
	}
	return result, err
}

// publish writes the NetworkConfig in the peer and records its answer. It
// returns the NetworkEstablished condition to set, or nil when there is no
// peering (and so no condition).
func (r *Reconciler) publish(ctx context.Context, peerID string, peered bool) (ctrl.Result, *metav1.Condition, error) {
	cfg, role, err := r.Peer(ctx, peerID)
	if err != nil || cfg == nil {
		r.answers.Stop(peerID)
		// No identity in the peer: none while there is no peering; while
		// one is under way, its credentials are about to be stored.
		if peered {
			return ctrl.Result{RequeueAfter: 2 * time.Second}, nil, err
		}
		return ctrl.Result{}, nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 10 * time.Second
	remote, err := r.clients.For(cfg, r.Client.Scheme())
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	waiting := func(reason, msg string) *metav1.Condition {
		return &metav1.Condition{Type: discoveryv1alpha1.ConditionNetworkEstablished, Status: metav1.ConditionFalse, Reason: reason, Message: msg}
	}
	want, err := r.parameters(ctx, role)
	if err != nil {
		return ctrl.Result{RequeueAfter: 5 * time.Second}, waiting("ParametersUnknown", err.Error()), nil
	}
	nc := &netv1alpha1.NetworkConfig{ObjectMeta: metav1.ObjectMeta{
		Namespace: discoveryv1alpha1.TenantNamespace(r.LocalClusterID), Name: netv1alpha1.NetworkConfigName(r.LocalClusterID),
	}}
	// A peer that fails is said in the condition and tried again: not a
	// failure of this reconcile.
	unreachable := func(doing string, err error) (ctrl.Result, *metav1.Condition, error) {
		return ctrl.Result{RequeueAfter: 5 * time.Second}, waiting("PeerUnreachable", doing+" this cluster's network parameters in the peer failed: "+err.Error()), nil
	}
	err = remote.Get(ctx, client.ObjectKeyFromObject(nc), nc)
	switch {
	case apierrors.IsNotFound(err):
		nc.Spec = *want
		if err := remote.Create(ctx, nc); err != nil {
			return unreachable("Stating", err)
		}
	case err != nil:
		return unreachable("Reading", err)
	case !equality.Semantic.DeepEqual(nc.Spec, *want):
		nc.Spec = *want
		if err := remote.Update(ctx, nc); err != nil {
			return unreachable("Updating", err)
		}
	}

	seenAs, answer := peerAnswer(nc, want)
	if seenAs == nil {
		// The answer wakes this reconciler (a watch of the one object in
		// the peer); the recheck covers a watch that ended.
		r.watchAnswer(ctx, peerID, cfg, nc.Generation)
		return ctrl.Result{RequeueAfter: r.recheck()}, waiting(netv1alpha1.ReasonWaitingForPeer, answer), nil
	}
	r.answers.Stop(peerID)
	var tep netv1alpha1.TunnelEndpoint
	if err := r.Client.Get(ctx, client.ObjectKey{Name: peerID}, &tep); err != nil {
		if apierrors.IsNotFound(err) {
			// Made (by remapping) when the peer's parameters arrive: the
			// TunnelEndpoint's creation wakes this reconciler.
			return ctrl.Result{RequeueAfter: r.recheck()}, waiting(netv1alpha1.ReasonWaitingForPeer, "Waiting for the peer's network parameters"), nil
		}
		return ctrl.Result{}, nil, err
	}
	local := &netv1alpha1.Ranges{PodCIDR: want.PodCIDR, ExternalCIDR: want.ExternalCIDR}
	if tep.Spec.LocalSeenAs == nil || *tep.Spec.LocalSeenAs != *seenAs || tep.Spec.Local == nil || *tep.Spec.Local != *local {
		patch := client.MergeFrom(tep.DeepCopy())
		tep.Spec.Local, tep.Spec.LocalSeenAs = local, seenAs
		if err := r.Client.Patch(ctx, &tep, patch); err != nil {
			return ctrl.Result{}, nil, fmt.Errorf("recording how %s sees this cluster: %w", peerID, err)
		}
	}
	return ctrl.Result{RequeueAfter: r.recheck()}, established(&tep), nil
}

// watchAnswer watches, in the peer, the NetworkConfig this cluster stated
// (its identity there may read it by name, nothing else), and wakes the
// reconciler of the peer's ForeignCluster when the peer answered for
// generation. One watch per peer at most.
func (r *Reconciler) watchAnswer(ctx context.Context, peerID string, cfg *rest.Config, generation int64) {
	r.answers.Start(ctx, peerID, func(ctx context.Context) (watch.Interface, error) {
		return remotewatch.ByName(ctx, cfg, r.Client.Scheme(), &netv1alpha1.NetworkConfigList{},
			discoveryv1alpha1.TenantNamespace(r.LocalClusterID), netv1alpha1.NetworkConfigName(r.LocalClusterID))
	}, func(_ context.Context, obj runtime.Object) ([]client.Object, bool) {
		nc, ok := obj.(*netv1alpha1.NetworkConfig)
		cond := (*metav1.Condition)(nil)
		if ok {
			cond = meta.FindStatusCondition(nc.Status.Conditions, netv1alpha1.ConditionProcessed)
		}
		answered := cond != nil && cond.ObservedGeneration >= generation
		return []client.Object{&discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: peerID}}}, answered
	})
}

// parameters are this cluster's, for a peer towards which its gateway has
// role.
func (r *Reconciler) parameters(ctx context.Context, role netv1alpha1.GatewayRole) (*netv1alpha1.NetworkConfigSpec, error) {
	cc := r.Config()
	if cc == nil || cc.Spec.NetworkConfig.PodCIDR == "" {
		return nil, errors.New("this cluster's pod range is not known: set spec.networkConfig.podCIDR of the ClusterConfig")
	}
	external := cc.Spec.NetworkConfig.ExternalCIDR
	if external == "" {
		external = configv1alpha1.DefaultExternalCIDR
	}
	key, err := EnsureKey(ctx, r.Client, r.Namespace)
	if err != nil {
		return nil, err
	}
	spec := &netv1alpha1.NetworkConfigSpec{
		ClusterID: r.LocalClusterID, PodCIDR: cc.Spec.NetworkConfig.PodCIDR, ExternalCIDR: external,
		Gateway: netv1alpha1.GatewayParameters{Role: role, PublicKey: key.Public().String()},
	}
	if role == netv1alpha1.GatewayServer {
		ep, err := r.Endpoint(ctx)
		if err != nil {
			return nil, err
		}
		if ep == nil {
			return nil, errors.New("waiting for this cluster's gateway to run: its endpoint is not known")
		}
		spec.Gateway.Endpoint = ep
	}
	return spec, nil
}

// peerAnswer reads how the peer sees this cluster from the status of the
// NetworkConfig in it; nil, and what is awaited, until the peer answered
// for the parameters written. The ranges must be of the sizes of this
// cluster's: anything else is not an answer this gateway can apply.
func peerAnswer(nc *netv1alpha1.NetworkConfig, want *netv1alpha1.NetworkConfigSpec) (*netv1alpha1.Ranges, string) {
	cond := meta.FindStatusCondition(nc.Status.Conditions, netv1alpha1.ConditionProcessed)
	switch {
	case cond == nil || cond.ObservedGeneration < nc.Generation:
		return nil, "Waiting for the peer to take this cluster's network parameters"
	case cond.Status != metav1.ConditionTrue:
		return nil, fmt.Sprintf("The peer did not take this cluster's network parameters (%s): %s", cond.Reason, cond.Message)
	}
	for _, c := range []struct{ ours, seen string }{{want.PodCIDR, nc.Status.RemappedPodCIDR}, {want.ExternalCIDR, nc.Status.RemappedExternalCIDR}} {
		ours, err1 := netip.ParsePrefix(c.ours)
		seen, err2 := netip.ParsePrefix(c.seen)
		if err1 != nil || err2 != nil || !seen.Addr().Is4() || seen != seen.Masked() || seen.Bits() != ours.Bits() {
			return nil, fmt.Sprintf("The peer's answer cannot be used: it sees %s as %q", c.ours, c.seen)
		}
	}
	return &netv1alpha1.Ranges{PodCIDR: nc.Status.RemappedPodCIDR, ExternalCIDR: nc.Status.RemappedExternalCIDR}, ""
}

// peering says whether fc shows a peering, in either direction, accepted
// or under way.
func peering(fc *discoveryv1alpha1.ForeignCluster) bool {
	return fc.Status.IncomingPeering || meta.IsStatusConditionTrue(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
}

// established is the ForeignCluster's NetworkEstablished condition from
// what the gateway reports in the TunnelEndpoint.
func established(tep *netv1alpha1.TunnelEndpoint) *metav1.Condition {
	cond := meta.FindStatusCondition(tep.Status.Conditions, netv1alpha1.ConditionEstablished)
	out := &metav1.Condition{Type: discoveryv1alpha1.ConditionNetworkEstablished, Status: metav1.ConditionFalse,
		Reason: "WaitingForGateway", Message: "Both sides agreed on the ranges; waiting for this cluster's gateway to open the tunnel"}
	if cond != nil && cond.ObservedGeneration == tep.Generation {
		out.Status, out.Reason, out.Message = cond.Status, cond.Reason, cond.Message
	}
	return out
}

func (r *Reconciler) report(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster, cond *metav1.Condition) {
	cond.ObservedGeneration = fc.Generation
	if meta.SetStatusCondition(&fc.Status.Conditions, *cond) {
		ctrl.LoggerFrom(ctx).V(1).Info("Network", "status", cond.Status, "reason", cond.Reason, "message", cond.Message)
	}
}

func (r *Reconciler) recheck() time.Duration {
	if r.Recheck == 0 {
		return DefaultRecheck
	}
	return r.Recheck
}

// EnsureKey returns the gateway's private key, made and kept in the Secret
// GatewayKeySecret of namespace the first time: a gateway that restarts,
// or moves, keeps its key, so its peers need learn nothing new.
func EnsureKey(ctx context.Context, c client.Client, namespace string) (wgkey.Key, error) {
	key := client.ObjectKey{Namespace: namespace, Name: netv1alpha1.GatewayKeySecret}
	var secret corev1.Secret
	err := c.Get(ctx, key, &secret)
	if apierrors.IsNotFound(err) {
		k, err := wgkey.Generate()
		if err != nil {
			return wgkey.Key{}, err
		}
		secret = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: netv1alpha1.GatewayKeySecret},
			Data:       map[string][]byte{netv1alpha1.GatewayKeyField: []byte(k.String())},
		}
		if err := c.Create(ctx, &secret); err != nil {
			// Made by another at the same time, the error says so: that
			// one is the key, read on the next try.
			return wgkey.Key{}, fmt.Errorf("keeping the gateway's key: %w", err)
		}
		return k, nil
	}
	if err != nil {
		return wgkey.Key{}, fmt.Errorf("reading the gateway's key: %w", err)
	}
	k, err := wgkey.Parse(string(secret.Data[netv1alpha1.GatewayKeyField]))
	if err != nil {
		return wgkey.Key{}, fmt.Errorf("the gateway's key in %s/%s: %w", namespace, netv1alpha1.GatewayKeySecret, err)
	}
	return k, nil
}

// SetupWithManager registers the reconciler: ForeignClusters (the
// peering's progress shows there), the TunnelEndpoints (the gateway's
// reports) and the ClusterConfig's changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Config == nil || r.Peer == nil || r.Endpoint == nil || r.LocalClusterID == "" || r.Namespace == "" {
		return errors.New("publishing: Client, Config, Peer, Endpoint, LocalClusterID and Namespace are required")
	}
	all := func(ctx context.Context, _ client.Object) []reconcile.Request {
		var l discoveryv1alpha1.ForeignClusterList
		if err := r.Client.List(ctx, &l); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(l.Items))
		for _, fc := range l.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: fc.Name}})
		}
		return reqs
	}
	// The ForeignCluster of a peer is named after its ClusterID.
	byPeer := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetName()}}}
	})
	r.answers = remotewatch.New(answerWatchLimit)
	return ctrl.NewControllerManagedBy(mgr).
		Named("publishing").
		For(&discoveryv1alpha1.ForeignCluster{}, builder.WithPredicates(peeringMoved)).
		Watches(&netv1alpha1.TunnelEndpoint{}, byPeer).
		WatchesRawSource(clusterconfig.ChangeSource(mgr, r.Changes, &discoveryv1alpha1.ForeignCluster{}, handler.EnqueueRequestsFromMapFunc(all))).
		WatchesRawSource(source.Channel(r.answers.Events, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// peeringMoved passes ForeignCluster changes that may open or close a
// channel to the peer: its peering conditions, not its own network
// condition or liveness.
var peeringMoved = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*discoveryv1alpha1.ForeignCluster)
	n, ok2 := e.ObjectNew.(*discoveryv1alpha1.ForeignCluster)
	if !ok1 || !ok2 {
		return true
	}
	for _, t := range []string{discoveryv1alpha1.ConditionPeeringRequested, discoveryv1alpha1.ConditionAdvertisementAccepted, discoveryv1alpha1.ConditionVirtualNodeReady} {
		a, b := meta.FindStatusCondition(o.Status.Conditions, t), meta.FindStatusCondition(n.Status.Conditions, t)
		if (a == nil) != (b == nil) || a != nil && (a.Status != b.Status || a.Reason != b.Reason) {
			return true
		}
	}
	return o.Generation != n.Generation || o.Status.IncomingPeering != n.Status.IncomingPeering
}}
