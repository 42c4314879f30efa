// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package remapping decides how this cluster sees each peer's ranges. A
// peer states its pod and external ranges and its gateway in a
// NetworkConfig in its tenant namespace here; the Reconciler checks it,
// keeps the ranges as they are when they overlap nothing in use here, or
// picks ranges of the same size from the remapping pool when they do,
// answers in the NetworkConfig's status, and writes the peer's side of its
// TunnelEndpoint, which the gateway applies. The decision is kept in the
// TunnelEndpoint: a peer that writes its NetworkConfig again gets the same
// answer, and decisions survive restarts.
package remapping

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/clusterconfig"
	"github.com/liqo-go/liqo/internal/network/ipam"
	"github.com/liqo-go/liqo/internal/network/wgkey"
)

// +kubebuilder:rbac:groups=net.liqo.io,resources=networkconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=net.liqo.io,resources=networkconfigs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=net.liqo.io,resources=tunnelendpoints,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch

// Reconciler answers the peers' NetworkConfigs.
type Reconciler struct {
	// Client reads the NetworkConfigs, nodes and the API server's
	// EndpointSlices (cached) and writes.
	Client client.Client
	// APIReader lists the TunnelEndpoints uncached: two peers decided one
	// after the other must not get one range because the cache lagged.
	APIReader client.Reader
	// Config returns the ClusterConfig in force: the local ranges, the
	// reserved subnets, the pool.
	Config func() *configv1alpha1.ClusterConfig
	// Changes receives a value when the ClusterConfig changed: every peer
	// is decided again.
	Changes <-chan struct{}
}

// Reconcile implements reconcile.Reconciler. The controller runs one
// reconcile at a time, so decisions are taken one after the other.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	peer, ok := strings.CutPrefix(req.Namespace, discoveryv1alpha1.TenantNamespace(""))
	if !ok || peer == "" {
		return ctrl.Result{}, nil
	}
	var nc netv1alpha1.NetworkConfig
	if err := r.Client.Get(ctx, req.NamespacedName, &nc); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		// The peer's parameters are gone (the peering with them): so is
		// the tunnel.
		if req.Name != netv1alpha1.NetworkConfigName(peer) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, &netv1alpha1.TunnelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: peer}}))
	}
	if !nc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	local, err := r.localRanges()
	if err != nil {
		return ctrl.Result{}, r.answer(ctx, &nc, "", "", metav1.ConditionFalse, netv1alpha1.ReasonInvalid, err.Error())
	}
	remote, endpoint, err := r.check(ctx, peer, &nc, local)
	if err != nil {
		return ctrl.Result{}, r.answer(ctx, &nc, "", "", metav1.ConditionFalse, netv1alpha1.ReasonInvalid, err.Error())
	}
	seen, err := r.decide(ctx, peer, nc.Spec.Gateway.PublicKey, remote, endpoint, local)
	if errors.Is(err, errKeyTaken) {
		return ctrl.Result{}, r.answer(ctx, &nc, "", "", metav1.ConditionFalse, netv1alpha1.ReasonInvalid, err.Error())
	}
	if errors.Is(err, ipam.ErrPoolExhausted) {
		return ctrl.Result{}, r.answer(ctx, &nc, "", "", metav1.ConditionFalse, netv1alpha1.ReasonPoolExhausted,
			fmt.Sprintf("The peer's ranges overlap ranges in use here and the remapping pool has no room: %v", err))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	tep := &netv1alpha1.TunnelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: peer}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, tep, func() error {
		tep.Spec.ClusterID = peer
		tep.Spec.PublicKey = nc.Spec.Gateway.PublicKey
		tep.Spec.Endpoint = endpoint
		tep.Spec.Remote = netv1alpha1.Ranges{PodCIDR: remote.pod.String(), ExternalCIDR: remote.external.String()}
		tep.Spec.RemoteSeenAs = netv1alpha1.Ranges{PodCIDR: seen.pod.String(), ExternalCIDR: seen.external.String()}
		if tep.Labels == nil {
			tep.Labels = map[string]string{}
		}
		tep.Labels[discoveryv1alpha1.ClusterIDLabel] = peer
		// Kept: the gateway reports only what is in the way of the
		// ranges it was last given, and a decision that forgot the
		// earlier ones could go back to them.
		if known := formatRanges(nodeRanges(tep)); known != "" {
			metav1.SetMetaDataAnnotation(&tep.ObjectMeta, netv1alpha1.NodeRangesAnnotation, known)
		}
		return nil
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the TunnelEndpoint of %s: %w", peer, err)
	}
	msg := fmt.Sprintf("Pods seen as %s, the external range as %s", seen.pod, seen.external)
	if seen == remote {
		msg = "Seen as they are: no overlap with a range in use here"
	}
	return ctrl.Result{}, r.answer(ctx, &nc, seen.pod.String(), seen.external.String(), metav1.ConditionTrue, netv1alpha1.ReasonRemapped, msg)
}

// ranges are a pod and an external range.
type ranges struct{ pod, external netip.Prefix }

// localRanges are this cluster's: what a peer's ranges must not overlap,
// what a peer's endpoint must not be in, and where remapped ranges come
// from.
type localRanges struct {
	cluster  []netip.Prefix // pods, services, external
	reserved []netip.Prefix
	pool     []netip.Prefix
}

// used is every range a peer must not be seen in.
func (l localRanges) used() []netip.Prefix {
	return append(append([]netip.Prefix(nil), l.cluster...), l.reserved...)
}

func (r *Reconciler) localRanges() (localRanges, error) {
	cc := r.Config()
	if cc == nil {
		return localRanges{}, errors.New("this cluster's ClusterConfig is not read yet")
	}
	nc := cc.Spec.NetworkConfig
	if nc.PodCIDR == "" {
		return localRanges{}, errors.New("this cluster's pod range is not known: set spec.networkConfig.podCIDR of the ClusterConfig")
	}
	external := nc.ExternalCIDR
	if external == "" {
		external = configv1alpha1.DefaultExternalCIDR
	}
	cidrs := []string{nc.PodCIDR, external}
	if nc.ServiceCIDR != "" {
		cidrs = append(cidrs, nc.ServiceCIDR)
	}
	var l localRanges
	var err error
	if l.cluster, err = ipam.ParsePrefixes(cidrs); err != nil {
		return localRanges{}, fmt.Errorf("this cluster's ClusterConfig: %w", err)
	}
	if l.reserved, err = ipam.ParsePrefixes(nc.ReservedSubnets); err != nil {
		return localRanges{}, fmt.Errorf("this cluster's ClusterConfig, spec.networkConfig.reservedSubnets: %w", err)
	}
	l.pool = ipam.DefaultPool
	if len(nc.RemappingPool) > 0 {
		if l.pool, err = ipam.ParsePrefixes(nc.RemappingPool); err != nil {
			return localRanges{}, fmt.Errorf("this cluster's ClusterConfig, spec.networkConfig.remappingPool: %w", err)
		}
	}
	return l, nil
}

// check reads what the peer states and refuses what it may not: a
// NetworkConfig speaking for another cluster, in a namespace this cluster
// did not make for the peer, or a gateway endpoint that would have this
// cluster's gateway send to itself or into this cluster.
func (r *Reconciler) check(ctx context.Context, peer string, nc *netv1alpha1.NetworkConfig, local localRanges) (ranges, *netv1alpha1.GatewayEndpoint, error) {
	var ns corev1.Namespace
	if err := r.Client.Get(ctx, client.ObjectKey{Name: nc.Namespace}, &ns); err != nil {
		return ranges{}, nil, fmt.Errorf("reading namespace %s: %w", nc.Namespace, err)
	}
	if ns.Labels[discoveryv1alpha1.TenantLabel] != "true" || ns.Labels[discoveryv1alpha1.ClusterIDLabel] != peer {
		return ranges{}, nil, fmt.Errorf("namespace %s is not the tenant namespace of %s", nc.Namespace, peer)
	}
	if nc.Name != netv1alpha1.NetworkConfigName(peer) {
		return ranges{}, nil, fmt.Errorf("metadata.name: the NetworkConfig of %s is named %s", peer, netv1alpha1.NetworkConfigName(peer))
	}
	if nc.Spec.ClusterID != peer {
		return ranges{}, nil, fmt.Errorf("spec.clusterID: %s, but this is the tenant namespace of %s", nc.Spec.ClusterID, peer)
	}
	var remote ranges
	for _, f := range []struct {
		field, cidr string
		into        *netip.Prefix
	}{{"spec.podCIDR", nc.Spec.PodCIDR, &remote.pod}, {"spec.externalCIDR", nc.Spec.ExternalCIDR, &remote.external}} {
		p, err := netip.ParsePrefix(f.cidr)
		if err != nil || !p.Addr().Is4() || p != p.Masked() || p.Bits() > 30 {
			return ranges{}, nil, fmt.Errorf("%s: %q is not a masked IPv4 range of /30 or larger", f.field, f.cidr)
		}
		*f.into = p
	}
	if ipam.Overlaps(remote.pod, remote.external) {
		return ranges{}, nil, fmt.Errorf("spec.externalCIDR: %s overlaps spec.podCIDR %s", remote.external, remote.pod)
	}
	if _, err := wgkey.Parse(nc.Spec.Gateway.PublicKey); err != nil {
		return ranges{}, nil, fmt.Errorf("spec.gateway.publicKey: %w", err)
	}
	if nc.Spec.Gateway.Role != netv1alpha1.GatewayServer {
		return remote, nil, nil
	}
	ep := nc.Spec.Gateway.Endpoint
	if ep == nil {
		return ranges{}, nil, errors.New("spec.gateway.endpoint: a Server gateway needs one")
	}
	if err := checkEndpoint(ep.Host, local.cluster); err != nil {
		return ranges{}, nil, fmt.Errorf("spec.gateway.endpoint: %w", err)
	}
	return remote, ep.DeepCopy(), nil
}

// checkEndpoint refuses an endpoint address a peer's gateway cannot be at:
// loopback, link-local, multicast, unspecified, or inside this cluster's
// pod, service or external range. (A reserved subnet, the nodes' network
// say, may well be where the peers' gateways are.) Names are resolved by the gateway, which refuses the same
// special addresses once resolved.
func checkEndpoint(host string, own []netip.Prefix) error {
	a, err := netip.ParseAddr(host)
	if err != nil {
		if net.ParseIP(host) == nil && strings.ContainsAny(host, ":/") {
			return fmt.Errorf("%q is neither an address nor a name", host)
		}
		return nil
	}
	a = a.Unmap()
	if a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() || a.IsLinkLocalMulticast() {
		return fmt.Errorf("%s is not an address a peer's gateway can be at", a)
	}
	for _, p := range own {
		if p.Contains(a) {
			return fmt.Errorf("%s is inside %s, a range of this cluster", a, p)
		}
	}
	return nil
}

// errKeyTaken: the peer states a gateway key another peer's gateway
// holds. The first to state it keeps it: only that one can have the
// private key of it, and another peer of both learns it from its own
// peering.
var errKeyTaken = errors.New("spec.gateway.publicKey: another peer's gateway holds that key")

// decide picks how this cluster sees the peer's ranges: away from this
// cluster's ranges, from what its nodes and API server use (their
// addresses, the pod ranges of the nodes, the node routes the gateway
// found in the way), from how it sees every other peer and from every
// peer's gateway endpoint, keeping the previous decision while it still
// holds. A range the peer states is used as it is only inside the pool
// and the private ranges (ipam.Remap).
func (r *Reconciler) decide(ctx context.Context, peer, key string, remote ranges, endpoint *netv1alpha1.GatewayEndpoint, local localRanges) (ranges, error) {
	var teps netv1alpha1.TunnelEndpointList
	if err := r.APIReader.List(ctx, &teps); err != nil {
		return ranges{}, fmt.Errorf("listing the TunnelEndpoints: %w", err)
	}
	used := local.used()
	reality, err := r.inUse(ctx)
	if err != nil {
		return ranges{}, err
	}
	used = append(used, reality...)
	if a, ok := endpointAddr(endpoint); ok {
		used = append(used, a)
	}
	var previous ranges
	for _, tep := range teps.Items {
		// What the gateway found in the way on its node is in use,
		// whichever peer it found it for, now or before.
		used = append(used, nodeRanges(&tep)...)
		if tep.Name != peer && tep.Spec.PublicKey == key {
			ctrl.LoggerFrom(ctx).Info("A peer states the key of another peer's gateway", "peer", peer, "holder", tep.Name)
			return ranges{}, errKeyTaken
		}
		if tep.Name == peer {
			if seen, err := parseRanges(tep.Spec.RemoteSeenAs); err == nil {
				if was, err := parseRanges(tep.Spec.Remote); err == nil && was == remote {
					previous = seen
				}
			}
			continue
		}
		if a, ok := endpointAddr(tep.Spec.Endpoint); ok {
			used = append(used, a)
		}
		if seen, err := parseRanges(tep.Spec.RemoteSeenAs); err == nil {
			used = append(used, seen.pod, seen.external)
		}
	}
	pod, err := ipam.Remap(remote.pod, previous.pod, local.pool, used)
	if err != nil {
		return ranges{}, fmt.Errorf("the pod range %s: %w", remote.pod, err)
	}
	external, err := ipam.Remap(remote.external, previous.external, local.pool, append(used, pod))
	if err != nil {
		return ranges{}, fmt.Errorf("the external range %s: %w", remote.external, err)
	}
	return ranges{pod: pod, external: external}, nil
}

// inUse is what this cluster's nodes and API server use, as they say it:
// every address of every node, the nodes' pod ranges, and the addresses
// the API server is reached at. A peer's range seen over one of them
// would take this cluster's own traffic.
func (r *Reconciler) inUse(ctx context.Context) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing the nodes: %w", err)
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Unmap().Is4() {
				out = append(out, netip.PrefixFrom(ip.Unmap(), 32))
			}
		}
		if pods, err := ipam.ParsePrefixes(n.Spec.PodCIDRs); err == nil {
			out = append(out, pods...)
		}
	}
	var apiServer discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &apiServer, client.InNamespace(metav1.NamespaceDefault),
		client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return nil, fmt.Errorf("listing the API server's addresses: %w", err)
	}
	for _, s := range apiServer.Items {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil && ip.Unmap().Is4() {
					out = append(out, netip.PrefixFrom(ip.Unmap(), 32))
				}
			}
		}
	}
	return out, nil
}

// maxNodeRanges is how many node ranges a TunnelEndpoint remembers.
const maxNodeRanges = 32

// nodeRanges are the ranges of the gateway's node in the way of tep's
// peer: those the gateway reports now and those remembered from before,
// the latest first, maxNodeRanges at most.
func nodeRanges(tep *netv1alpha1.TunnelEndpoint) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range append(slices.Clone(tep.Status.RangesInUse), strings.Split(tep.Annotations[netv1alpha1.NodeRangesAnnotation], ",")...) {
		if p, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil && !slices.Contains(out, p.Masked()) && len(out) < maxNodeRanges {
			out = append(out, p.Masked())
		}
	}
	return out
}

func formatRanges(ranges []netip.Prefix) string {
	out := make([]string, len(ranges))
	for i, r := range ranges {
		out[i] = r.String()
	}
	return strings.Join(out, ",")
}

// endpointAddr is a gateway endpoint given as an IPv4 address, as a /32.
func endpointAddr(ep *netv1alpha1.GatewayEndpoint) (netip.Prefix, bool) {
	if ep == nil {
		return netip.Prefix{}, false
	}
	a, err := netip.ParseAddr(ep.Host)
	if err != nil || !a.Unmap().Is4() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a.Unmap(), 32), true
}

func parseRanges(r netv1alpha1.Ranges) (ranges, error) {
	pod, err := netip.ParsePrefix(r.PodCIDR)
	if err != nil {
		return ranges{}, err
	}
	external, err := netip.ParsePrefix(r.ExternalCIDR)
	if err != nil {
		return ranges{}, err
	}
	return ranges{pod: pod, external: external}, nil
}

// answer writes the status of the peer's NetworkConfig, when it changes.
func (r *Reconciler) answer(ctx context.Context, nc *netv1alpha1.NetworkConfig, pod, external string, status metav1.ConditionStatus, reason, msg string) error {
	before := nc.DeepCopy()
	nc.Status.RemappedPodCIDR, nc.Status.RemappedExternalCIDR = pod, external
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{
		Type: netv1alpha1.ConditionProcessed, Status: status, Reason: reason, Message: msg, ObservedGeneration: nc.Generation,
	})
	if equality.Semantic.DeepEqual(before.Status, nc.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, nc, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("answering the NetworkConfig of %s: %w", nc.Spec.ClusterID, err)
	}
	return nil
}

// rangesInUseChanged passes a TunnelEndpoint whose gateway found other
// node routes in the way: its peer is decided again.
var rangesInUseChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	before, ok1 := e.ObjectOld.(*netv1alpha1.TunnelEndpoint)
	after, ok2 := e.ObjectNew.(*netv1alpha1.TunnelEndpoint)
	return ok1 && ok2 && !slices.Equal(before.Status.RangesInUse, after.Status.RangesInUse)
}}

// SetupWithManager registers the reconciler: the peers' NetworkConfigs;
// a TunnelEndpoint changed or deleted by someone else (written again), or
// whose gateway found node routes in the way of its ranges;
// and every NetworkConfig when the ClusterConfig changes (Changes receives
// a value then).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.APIReader == nil || r.Config == nil {
		return errors.New("remapping: Client, APIReader and Config are required")
	}
	all := func(ctx context.Context, _ client.Object) []reconcile.Request {
		var l netv1alpha1.NetworkConfigList
		if err := r.Client.List(ctx, &l); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(l.Items))
		for _, nc := range l.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&nc)})
		}
		return reqs
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("remapping").
		For(&netv1alpha1.NetworkConfig{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&netv1alpha1.TunnelEndpoint{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{
				Namespace: discoveryv1alpha1.TenantNamespace(o.GetName()), Name: netv1alpha1.NetworkConfigName(o.GetName()),
			}}}
		}), builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, rangesInUseChanged))).
		WatchesRawSource(clusterconfig.ChangeSource(mgr, r.Changes, &netv1alpha1.NetworkConfig{}, handler.EnqueueRequestsFromMapFunc(all))).
		Complete(r)
}
