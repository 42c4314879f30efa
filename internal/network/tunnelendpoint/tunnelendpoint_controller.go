// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package tunnelendpoint runs in the gateway: its Reconciler turns the
// cluster's TunnelEndpoints, its ClusterConfig and the gateway's key into
// the data plane's configuration and applies it; its Reporter writes what
// the data plane observes (the tunnel established or not, its latency,
// the last handshake) into each TunnelEndpoint's status, records an event
// when a tunnel comes up or goes down, and serves the per-peer metrics.
package tunnelendpoint

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/network/gateway"
	"github.com/liqo-go/liqo/internal/network/wgkey"
)

// The gateway's rights (the chart's liqo-gateway ClusterRole and Role,
// written by hand: the markers of this module all go to the controller
// manager's): get, list and watch TunnelEndpoints and the ClusterConfig,
// update their status, read the key Secret in the Liqo namespace, create
// events.

// DataPlane is what the reconciler drives: a gateway.Gateway.
type DataPlane interface {
	Apply(ctx context.Context, cfg gateway.Config) error
	Status() (gateway.Status, error)
}

// Reconciler applies every TunnelEndpoint at once: the data plane takes
// its whole configuration in one Apply.
type Reconciler struct {
	// Client reads TunnelEndpoints, the ClusterConfig and the key Secret
	// (cached), and writes TunnelEndpoint statuses.
	Client client.Client
	// Namespace is the Liqo namespace, where the key is kept.
	Namespace string
	// DataPlane is the gateway's.
	DataPlane DataPlane
	// ListenPort is the UDP port of the tunnel.
	ListenPort int
	// MTU of the tunnel; 0 derives it from the underlay.
	MTU int
	// UAPI serves wireguard-go's configuration socket, for wg(8).
	UAPI bool

	mu sync.Mutex
	// applied is the generation of each TunnelEndpoint in the last
	// configuration applied; failed, the error of the last Apply;
	// invalid, the TunnelEndpoints left out of it because they could not
	// be read, and why.
	applied map[string]int64
	failed  error
	invalid map[string]error
}

// allKey is the one request of the reconciler.
var allKey = reconcile.Request{NamespacedName: client.ObjectKey{Name: "all"}}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	cfg, generations, invalid, err := r.config(ctx)
	if err == nil {
		err = r.DataPlane.Apply(ctx, cfg)
	}
	r.mu.Lock()
	// What failed to apply is not what runs: the data plane keeps the
	// last configuration it took.
	if r.failed = err; err == nil {
		r.applied, r.invalid = generations, invalid
	}
	r.mu.Unlock()
	return ctrl.Result{}, err
}

// config builds the data plane's configuration. A TunnelEndpoint whose
// peer has not said yet how it sees this cluster is left out: its
// translation is not known; so is one that cannot be read (invalid names
// it, with why), alone. The peers come oldest first: when two claim one
// key or range, the data plane keeps the one that was there first.
func (r *Reconciler) config(ctx context.Context) (gateway.Config, map[string]int64, map[string]error, error) {
	cfg := gateway.Config{ListenPort: r.ListenPort, MTU: r.MTU, UAPI: r.UAPI}
	var teps netv1alpha1.TunnelEndpointList
	if err := r.Client.List(ctx, &teps); err != nil {
		return cfg, nil, nil, err
	}
	slices.SortStableFunc(teps.Items, func(a, b netv1alpha1.TunnelEndpoint) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	generations := map[string]int64{}
	invalid := map[string]error{}
	for _, tep := range teps.Items {
		if !Applies(&tep) {
			continue
		}
		generations[tep.Name] = tep.Generation
		p, err := peer(&tep)
		if err != nil {
			invalid[tep.Name] = err
			continue
		}
		cfg.Peers = append(cfg.Peers, p)
	}
	if len(cfg.Peers) == 0 {
		// No tunnel to run: the key and the ranges are not needed (the
		// key is made with the first peering).
		return cfg, generations, invalid, nil
	}
	var cc configv1alpha1.ClusterConfig
	if err := r.Client.Get(ctx, client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cc); err != nil {
		return cfg, nil, nil, fmt.Errorf("reading the ClusterConfig: %w", err)
	}
	var err error
	if cfg.PodCIDR, err = netip.ParsePrefix(cc.Spec.NetworkConfig.PodCIDR); err != nil {
		return cfg, nil, nil, fmt.Errorf("the ClusterConfig's spec.networkConfig.podCIDR: %w", err)
	}
	external := cc.Spec.NetworkConfig.ExternalCIDR
	if external == "" {
		external = configv1alpha1.DefaultExternalCIDR
	}
	if cfg.ExternalCIDR, err = netip.ParsePrefix(external); err != nil {
		return cfg, nil, nil, fmt.Errorf("the ClusterConfig's spec.networkConfig.externalCIDR: %w", err)
	}
	var secret corev1.Secret
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: netv1alpha1.GatewayKeySecret}, &secret); err != nil {
		return cfg, nil, nil, fmt.Errorf("reading the gateway's key: %w", err)
	}
	if cfg.PrivateKey, err = wgkey.Parse(string(secret.Data[netv1alpha1.GatewayKeyField])); err != nil {
		return cfg, nil, nil, fmt.Errorf("the gateway's key in %s/%s: %w", r.Namespace, netv1alpha1.GatewayKeySecret, err)
	}
	return cfg, generations, invalid, nil
}

// Applies says whether the data plane carries tep's peer: not while it is
// deleted, nor before the peer said how it sees this cluster (the
// translation is not known).
func Applies(tep *netv1alpha1.TunnelEndpoint) bool {
	return tep.DeletionTimestamp.IsZero() && tep.Spec.LocalSeenAs != nil
}

// RemoteRanges are the ranges the gateway routes into tep's tunnel: the
// peer's pods and external range, as this cluster sees them; none while
// tep does not apply.
func RemoteRanges(tep *netv1alpha1.TunnelEndpoint) ([]netip.Prefix, error) {
	if !Applies(tep) {
		return nil, nil
	}
	p, err := peer(tep)
	if err != nil {
		return nil, err
	}
	return []netip.Prefix{p.PodCIDR, p.ExternalCIDR}, nil
}

// peer is the data plane's view of one TunnelEndpoint.
func peer(tep *netv1alpha1.TunnelEndpoint) (gateway.Peer, error) {
	p := gateway.Peer{ID: tep.Name}
	var err error
	if p.PublicKey, err = wgkey.Parse(tep.Spec.PublicKey); err != nil {
		return p, fmt.Errorf("spec.publicKey: %w", err)
	}
	if ep := tep.Spec.Endpoint; ep != nil {
		p.Endpoint = netipJoin(ep.Host, ep.Port)
	}
	p.ReachAll = tep.Spec.Reach == netv1alpha1.ReachAllPods
	for _, e := range tep.Spec.Exposed {
		if a, err := netip.ParsePrefix(e); err == nil && a.Addr().Is4() && a.Bits() == 32 {
			p.Exposed = append(p.Exposed, a)
		}
	}
	if tr := tep.Spec.Transit; tr != nil {
		p.Transit = true
		for _, r := range tr.Routes {
			addr, err1 := netip.ParseAddr(r.Address)
			target, err2 := netip.ParseAddr(r.Target)
			if err1 == nil && err2 == nil {
				p.TransitRoutes = append(p.TransitRoutes, gateway.TransitRoute{Address: addr, Target: target, Via: r.Provider})
			}
		}
	}
	for _, f := range []struct {
		field, cidr string
		into        *netip.Prefix
	}{
		{"spec.remoteSeenAs.podCIDR", tep.Spec.RemoteSeenAs.PodCIDR, &p.PodCIDR},
		{"spec.remoteSeenAs.externalCIDR", tep.Spec.RemoteSeenAs.ExternalCIDR, &p.ExternalCIDR},
		{"spec.localSeenAs.podCIDR", tep.Spec.LocalSeenAs.PodCIDR, &p.LocalPodCIDR},
		{"spec.localSeenAs.externalCIDR", tep.Spec.LocalSeenAs.ExternalCIDR, &p.LocalExternalCIDR},
	} {
		if *f.into, err = netip.ParsePrefix(f.cidr); err != nil {
			return p, fmt.Errorf("%s: %w", f.field, err)
		}
	}
	return p, nil
}

func netipJoin(host string, port int32) string {
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		return "[" + host + "]:" + strconv.Itoa(int(port))
	}
	return host + ":" + strconv.Itoa(int(port))
}

// SetupWithManager registers the reconciler: any TunnelEndpoint, the
// ClusterConfig and the key Secret reconfigure the whole data plane.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.DataPlane == nil || r.Namespace == "" || r.ListenPort == 0 {
		return errors.New("tunnelendpoint: Client, DataPlane, Namespace and ListenPort are required")
	}
	toAll := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{allKey} })
	keySecret := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.Namespace && o.GetName() == netv1alpha1.GatewayKeySecret
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("tunnelendpoint").
		Watches(&netv1alpha1.TunnelEndpoint{}, toAll, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&configv1alpha1.ClusterConfig{}, toAll, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, toAll, builder.WithPredicates(keySecret)).
		Complete(r)
}

// appliedGeneration says whether the TunnelEndpoint name, at generation,
// is in the configuration the data plane runs, the error of the last
// Apply, and why name was left out of it if it was.
func (r *Reconciler) appliedGeneration(name string) (int64, bool, error, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.applied[name]
	return g, ok, r.failed, r.invalid[name]
}

// ReportInterval is how often the Reporter reads the data plane.
const ReportInterval = time.Second

// Reporter writes the data plane's observations into the TunnelEndpoints'
// statuses; a manager Runnable.
type Reporter struct {
	Client     client.Client
	Reconciler *Reconciler
	Recorder   events.EventRecorder
	// Interval is ReportInterval when zero.
	Interval time.Duration

	last map[string]bool
}

// Start implements manager.Runnable: it reports every Interval until ctx
// ends.
func (p *Reporter) Start(ctx context.Context) error {
	interval := p.Interval
	if interval == 0 {
		interval = ReportInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := p.report(ctx); err != nil && ctx.Err() == nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Reporting the tunnels' state", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// gateway reports on its own data plane.
func (p *Reporter) NeedLeaderElection() bool { return false }

func (p *Reporter) report(ctx context.Context) error {
	st, err := p.Reconciler.DataPlane.Status()
	if err != nil {
		return err
	}
	byID := map[string]gateway.PeerStatus{}
	for _, ps := range st.Peers {
		byID[ps.ID] = ps
	}
	observeRefused(st.Refused)
	var teps netv1alpha1.TunnelEndpointList
	if err := p.Client.List(ctx, &teps); err != nil {
		return err
	}
	if p.last == nil {
		p.last = map[string]bool{}
	}
	var errs []error
	seen := map[string]bool{}
	for i := range teps.Items {
		tep := &teps.Items[i]
		seen[tep.Name] = true
		ps, has := byID[tep.Name]
		observe(tep.Name, ps, has)
		if err := p.write(ctx, tep, ps, has); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	for name := range p.last {
		if !seen[name] {
			delete(p.last, name)
			forget(name)
		}
	}
	return errors.Join(errs...)
}

// write sets a TunnelEndpoint's status from what the data plane says of
// its peer, when it changed, and records an event when the tunnel came up
// or went down.
func (p *Reporter) write(ctx context.Context, tep *netv1alpha1.TunnelEndpoint, ps gateway.PeerStatus, has bool) error {
	before := tep.DeepCopy()
	generation, applied, failed, invalid := p.Reconciler.appliedGeneration(tep.Name)
	cond := metav1.Condition{Type: netv1alpha1.ConditionEstablished, ObservedGeneration: tep.Generation}
	current := generation == tep.Generation
	switch {
	case tep.Spec.LocalSeenAs == nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, netv1alpha1.ReasonWaitingForPeer, "The peer has not said yet how it sees this cluster"
	case failed != nil && (!applied || !current):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, netv1alpha1.ReasonGatewayError, failed.Error()
	case applied && current && invalid != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, netv1alpha1.ReasonRefused, "The gateway cannot read this TunnelEndpoint: "+invalid.Error()
	case !applied || !current || !has:
		// Not applied yet: say nothing new.
		return nil
	case ps.Refused != "":
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, netv1alpha1.ReasonRefused, "The gateway refused this peer: "+ps.Refused
	case ps.Established:
		cond.Status, cond.Reason = metav1.ConditionTrue, netv1alpha1.ReasonConnected
		cond.Message = "The peer's gateway answers through the tunnel"
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, netv1alpha1.ReasonNoAnswer
		cond.Message = fmt.Sprintf("The peer's gateway has not answered through the tunnel for %d probes", gateway.ProbeLosses)
	}
	meta.SetStatusCondition(&tep.Status.Conditions, cond)
	if has && ps.Established {
		// The latency in the status moves only when it changed by more
		// than a tenth, so the status is not written every second.
		if old := tep.Status.Latency; old == nil || absDiff(old.Duration, ps.Latency) > old.Duration/10 {
			tep.Status.Latency = &metav1.Duration{Duration: ps.Latency.Round(time.Microsecond)}
		}
	} else if cond.Status == metav1.ConditionFalse {
		tep.Status.Latency = nil
	}
	if has && !ps.LastHandshake.IsZero() && (tep.Status.LastHandshakeTime == nil || ps.LastHandshake.Sub(tep.Status.LastHandshakeTime.Time) > time.Minute) {
		tep.Status.LastHandshakeTime = &metav1.Time{Time: ps.LastHandshake}
	}
	if has && ps.Endpoint != "" {
		tep.Status.PeerAddress = ps.Endpoint
	}
	tep.Status.RangesInUse = nil
	for _, r := range ps.RangesInUse {
		if len(tep.Status.RangesInUse) < 32 && !slices.Contains(tep.Status.RangesInUse, r.String()) {
			tep.Status.RangesInUse = append(tep.Status.RangesInUse, r.String())
		}
	}
	up := cond.Status == metav1.ConditionTrue
	if old := meta.FindStatusCondition(before.Status.Conditions, netv1alpha1.ConditionEstablished); cond.Reason == netv1alpha1.ReasonRefused &&
		(old == nil || old.Reason != cond.Reason || old.Message != cond.Message) && p.Recorder != nil {
		ctrl.LoggerFrom(ctx).Info("Peer refused", "peer", tep.Name, "message", cond.Message)
		p.Recorder.Eventf(tep, nil, corev1.EventTypeWarning, "TunnelRefused", "Established", "%s", cond.Message)
	}
	if was, known := p.last[tep.Name]; (known && was != up || !known && up) && p.Recorder != nil {
		ctrl.LoggerFrom(ctx).Info("Tunnel", "peer", tep.Name, "established", up, "reason", cond.Reason, "message", cond.Message,
			"probing", ps.ID, "latency", ps.Latency.String(), "peerAddress", ps.Endpoint)
		if up {
			p.Recorder.Eventf(tep, nil, corev1.EventTypeNormal, "TunnelUp", "Established", "The tunnel to %s is up: %s", tep.Name, cond.Message)
		} else {
			p.Recorder.Eventf(tep, nil, corev1.EventTypeWarning, "TunnelDown", "Established", "The tunnel to %s is down: %s", tep.Name, cond.Message)
		}
	}
	p.last[tep.Name] = up
	if equality.Semantic.DeepEqual(before.Status, tep.Status) {
		return nil
	}
	return p.Client.Status().Patch(ctx, tep, client.MergeFrom(before))
}

func absDiff(a, b time.Duration) time.Duration {
	if a > b {
		return a - b
	}
	return b - a
}
