// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/network/ipam"
)

// ValidateEndpointSlicePath is where the EndpointSlice webhook is served.
const ValidateEndpointSlicePath = "/validate-discovery-v1-endpointslice"

// EndpointSliceValidator bounds the addresses of the EndpointSlices a
// consumer's virtual kubelet writes here (the endpoints of its Services'
// copies): a consumer's own pods and external range, at the addresses
// this cluster reaches them at through the tunnel the two agreed on, and
// the pods it runs here, in the slice's namespace. Nothing else: a
// consumer that could name any address would have this cluster's
// Services send traffic to this cluster's own pods and nodes, or to
// another consumer's pods. The API server calls it for the virtual
// kubelets' writes alone (the webhook's match condition).
type EndpointSliceValidator struct {
	// Reader reads TunnelEndpoints and pods (a cache: a consumer's pods
	// are cached with their addresses).
	Reader client.Reader
	// Decoder decodes the slices.
	Decoder admission.Decoder
}

// Handle implements admission.Handler.
func (v *EndpointSliceValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	consumer, ok := strings.CutPrefix(req.UserInfo.Username, identity.VirtualKubeletUserPrefix)
	if !ok {
		return admission.Allowed("not a consumer's virtual kubelet")
	}
	if consumer == "" {
		return admission.Denied("a virtual kubelet's user names its consumer")
	}
	var es discoveryv1.EndpointSlice
	if err := v.Decoder.Decode(req, &es); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the EndpointSlice: %w", err))
	}
	// The EndpointSlicePruner finds a consumer's slices by this label,
	// and deletes them at once: a slice without it, or one a finalizer
	// would keep, would escape it.
	if m := es.Labels[discoveryv1.LabelManagedBy]; m != offloadingv1alpha1.EndpointSliceManagedBy {
		return admission.Denied(fmt.Sprintf("metadata.labels[%s]: a consumer's EndpointSlices are managed by %s, not %q",
			discoveryv1.LabelManagedBy, offloadingv1alpha1.EndpointSliceManagedBy, m))
	}
	if len(es.Finalizers) > 0 {
		return admission.Denied("metadata.finalizers: a consumer's EndpointSlices carry none")
	}
	allowed := &consumerAddresses{reader: v.Reader, namespace: req.Namespace, consumer: consumer}
	field, value, err := disallowed(ctx, &es, allowed)
	switch {
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	case field == "addressType":
		return admission.Denied(fmt.Sprintf("addressType: a consumer's EndpointSlices hold IPv4 addresses only, not %s", value))
	case field != "":
		if _, perr := netip.ParseAddr(value); perr != nil {
			return admission.Denied(fmt.Sprintf("%s: %q is not an IP address", field, value))
		}
		return admission.Denied(fmt.Sprintf("%s: %s is neither in %s's ranges as this cluster reaches them (%s) nor the address of one of its pods in namespace %s",
			field, value, consumer, describeRanges(allowed.ranges), req.Namespace))
	}
	return admission.Allowed("")
}

// consumerAddresses are the addresses a consumer's EndpointSlices in one
// namespace may name: its pod and external ranges as this cluster reaches
// them (the TunnelEndpoint the two agreed on), and the addresses of its
// pods in that namespace, not those of a pod that ended, whose address
// the network may give another pod (a pod being deleted keeps its
// address until its containers stopped, and its endpoint serves while
// it terminates). Each is read once, when first needed.
type consumerAddresses struct {
	reader              client.Reader
	namespace, consumer string

	ranges []netip.Prefix
	pods   map[netip.Addr]bool
	read   bool
}

func (c *consumerAddresses) allows(ctx context.Context, addr netip.Addr) (bool, error) {
	if !c.read {
		var tep netv1alpha1.TunnelEndpoint
		switch err := c.reader.Get(ctx, client.ObjectKey{Name: c.consumer}, &tep); {
		case err == nil:
			for _, cidr := range []string{tep.Spec.RemoteSeenAs.PodCIDR, tep.Spec.RemoteSeenAs.ExternalCIDR} {
				if p, err := netip.ParsePrefix(cidr); err == nil {
					c.ranges = append(c.ranges, p.Masked())
				}
			}
		case client.IgnoreNotFound(err) != nil:
			return false, fmt.Errorf("reading the network agreed with %s: %w", c.consumer, err)
		}
		c.read = true
	}
	if addr = addr.Unmap(); !addr.Is4() {
		return false, nil
	}
	if ipam.Within(netip.PrefixFrom(addr, 32), c.ranges) {
		return true, nil
	}
	if c.pods == nil {
		var list corev1.PodList
		if err := c.reader.List(ctx, &list, client.InNamespace(c.namespace), client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: c.consumer}); err != nil {
			return false, fmt.Errorf("listing the pods of namespace %s: %w", c.namespace, err)
		}
		c.pods = make(map[netip.Addr]bool, len(list.Items))
		for i := range list.Items {
			p := &list.Items[i]
			if podEnded(p) {
				continue
			}
			for _, a := range podAddrs(p) {
				c.pods[a] = true
			}
		}
	}
	return c.pods[addr], nil
}

// podAddrs is every address a pod's status gives it.
func podAddrs(p *corev1.Pod) []netip.Addr {
	var addrs []netip.Addr
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			addrs = append(addrs, a)
		}
	}
	if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
		addrs = append(addrs, a)
	}
	return addrs
}

func podEnded(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// allowedShrank says whether an update took from a pod what let a
// consumer's slice name it: it ended, or lost an address it had. A pod
// that starts or gets its first address allows more, never less.
func allowedShrank(o, n *corev1.Pod) bool {
	if podEnded(n) && !podEnded(o) {
		return true
	}
	kept := make(map[netip.Addr]bool)
	for _, a := range podAddrs(n) {
		kept[a] = true
	}
	for _, a := range podAddrs(o) {
		if !kept[a] {
			return true
		}
	}
	return false
}

func describeRanges(ranges []netip.Prefix) string {
	if len(ranges) == 0 {
		return "no network agreed yet"
	}
	s := make([]string, len(ranges))
	for i, p := range ranges {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// SlicePrunerResync is how often the EndpointSlicePruner checks a
// consumer's namespace again without being woken: it bounds how long a
// slice written while one of the pods it names was ending (the webhook
// let it through an instant before) keeps the address.
const SlicePrunerResync = 2 * time.Minute

// EndpointSlicePruner removes, from the namespaces made for consumers,
// the consumer's EndpointSlices that name an address it may no longer
// name: the EndpointSliceValidator checks a slice when it is written, and
// a pod the consumer runs here may end after (its address freed, which
// the network may give another pod), or the network agreed with the
// consumer may change. It checks a namespace when one of the consumer's
// pods there ends, is deleted or changes address, when the consumer's
// TunnelEndpoint changes, and every SlicePrunerResync. A slice naming
// anything not allowed is deleted whole (an honest virtual kubelet writes
// it again at once with what is allowed); it deletes with the right the
// NamespaceMapReconciler binds it in each of those namespaces alone
// (SlicePrunerRole).
type EndpointSlicePruner struct {
	// Client reads namespaces, pods and TunnelEndpoints (cached).
	Client client.Client
	// Live lists the consumer's slices (the cache holds none of what
	// consumers write) and deletes them.
	Live client.Client
}

// Reconcile checks the consumer's slices of one namespace.
func (r *EndpointSlicePruner) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ns corev1.Namespace
	if err := r.Client.Get(ctx, req.NamespacedName, &ns); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	consumer := consumerOf(&ns)
	if consumer == "" || !ns.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	var slices discoveryv1.EndpointSliceList
	// The consumer's own, not those this cluster's EndpointSlice
	// controller makes for its Services' copies (which carry their
	// labels, the origin among them); the webhook holds the consumer's
	// writes to this manager.
	if err := r.Live.List(ctx, &slices, client.InNamespace(ns.Name), client.MatchingLabels{
		offloadingv1alpha1.OriginClusterLabel: consumer, discoveryv1.LabelManagedBy: offloadingv1alpha1.EndpointSliceManagedBy,
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing %s's EndpointSlices in %s: %w", consumer, ns.Name, err)
	}
	allowed := &consumerAddresses{reader: r.Client, namespace: ns.Name, consumer: consumer}
	for i := range slices.Items {
		es := &slices.Items[i]
		if !es.DeletionTimestamp.IsZero() {
			continue // going already
		}
		field, bad, err := disallowed(ctx, es, allowed)
		if err != nil {
			return ctrl.Result{}, err
		}
		if field == "" {
			continue
		}
		// Deleted as read: a slice written since is checked again.
		err = r.Live.Delete(ctx, es, client.Preconditions{UID: &es.UID, ResourceVersion: &es.ResourceVersion})
		switch {
		case apierrors.IsConflict(err):
			return ctrl.Result{RequeueAfter: time.Second}, nil // written since: checked again
		case client.IgnoreNotFound(err) != nil:
			return ctrl.Result{}, fmt.Errorf("deleting EndpointSlice %s/%s: %w", es.Namespace, es.Name, err)
		case err == nil:
			ctrl.LoggerFrom(ctx).Info("Removed a consumer's EndpointSlice naming what it may no longer name",
				"consumer", consumer, "endpointSlice", client.ObjectKeyFromObject(es), "field", field, "value", bad)
		}
	}
	return ctrl.Result{RequeueAfter: SlicePrunerResync}, nil
}

// disallowed names the first field of es that says what the consumer may
// not (its address type, or an address), with the value there; "" when
// everything es names is allowed. The webhook and the pruner judge with
// it alike.
func disallowed(ctx context.Context, es *discoveryv1.EndpointSlice, allowed *consumerAddresses) (field, value string, err error) {
	if es.AddressType != discoveryv1.AddressTypeIPv4 {
		return "addressType", string(es.AddressType), nil
	}
	for i, ep := range es.Endpoints {
		for j, a := range ep.Addresses {
			field := fmt.Sprintf("endpoints[%d].addresses[%d]", i, j)
			addr, err := netip.ParseAddr(a)
			if err != nil {
				return field, a, nil //nolint:nilerr // an address that does not parse is not allowed, not an error of the judge's
			}
			ok, err := allowed.allows(ctx, addr)
			if err != nil {
				return "", "", err
			}
			if !ok {
				return field, a, nil
			}
		}
	}
	return "", "", nil
}

// consumerOf is the consumer a namespace was made for, or "" for any
// other namespace.
func consumerOf(ns *corev1.Namespace) string {
	if ns.Labels[discoveryv1alpha1.ManagedByLabel] != discoveryv1alpha1.ManagedByValue || ns.Labels[discoveryv1alpha1.TenantLabel] != "" {
		return ""
	}
	return ns.Labels[offloadingv1alpha1.OriginClusterLabel]
}

// SetupWithManager registers the pruner.
func (r *EndpointSlicePruner) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Live == nil {
		return errors.New("EndpointSlicePruner needs Client and Live")
	}
	// A consumer's pod that ends, goes or loses an address: its namespace.
	podChanged := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
			return n.Labels[offloadingv1alpha1.OriginClusterLabel] != "" && allowedShrank(o, n)
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			return e.Object.GetLabels()[offloadingv1alpha1.OriginClusterLabel] != ""
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	// A TunnelEndpoint (named after its peer) that changes: every
	// namespace made for that peer.
	namespacesOf := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list corev1.NamespaceList
		if err := r.Client.List(ctx, &list, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: o.GetName()}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			if consumerOf(&list.Items[i]) != "" {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: list.Items[i].Name}})
			}
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Namespace{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return consumerOf(o.(*corev1.Namespace)) != ""
		}))).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetNamespace()}}}
		}), builder.WithPredicates(podChanged)).
		Watches(&netv1alpha1.TunnelEndpoint{}, namespacesOf, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("endpointslice-pruner").
		Complete(r)
}
