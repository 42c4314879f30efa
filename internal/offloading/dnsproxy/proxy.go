// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package dnsproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// Proxy serves, for every consumer with a DNS Service in Namespace (a
// Service labelled offloadingv1alpha1.DNSServiceLabel and, with the
// consumer's cluster ID, offloadingv1alpha1.OriginClusterLabel), a
// Handler on that Service's target port, over UDP and TCP: the port a
// query arrives at says which consumer's names it is asked with. A query
// that comes from a pod of a namespace made for another consumer is
// refused: any pod reaches every Service, and one consumer's pods must
// not spend another's budget (Handler.Foreign).
type Proxy struct {
	// Client reads Services, Namespaces and Pods (a cache, whose Pods
	// SetupWithManager indexes by address).
	Client client.Reader
	// Namespace is Liqo's namespace, where the DNS Services are.
	Namespace string
	// Host is the address the ports are opened on; all when empty.
	Host string
	// Upstream is the cluster DNS, host:port.
	Upstream string
	// Domain is the cluster's DNS domain (Handler.Domain).
	Domain string
	// Log receives what the proxy starts and stops.
	Log logr.Logger

	ctx     context.Context //nolint:containedctx // the listeners live as long as the process, not a reconcile
	mu      sync.Mutex
	serving map[int32]*listener
	// exits tells the controller that a listener stopped on its own: the
	// next reconcile opens its port again.
	exits chan event.GenericEvent
}

type listener struct {
	consumer string
	handler  *Handler
	stop     context.CancelFunc
	done     chan error
	exited   atomic.Bool // Serve returned: the port is opened again
}

// SetupWithManager registers the proxy with mgr; its listeners run until
// ctx is done.
func (p *Proxy) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if p.Client == nil || p.Namespace == "" || p.Upstream == "" {
		return errors.New("dnsproxy.Proxy needs Client, Namespace and Upstream")
	}
	p.ctx, p.serving, p.exits = ctx, map[int32]*listener{}, make(chan event.GenericEvent, 1)
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, podIPIndex, podIPs); err != nil {
		return fmt.Errorf("indexing pods by address: %w", err)
	}
	go func() {
		<-ctx.Done()
		p.stopAll()
	}()
	dnsServices := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[offloadingv1alpha1.DNSServiceLabel]
		return o.GetNamespace() == p.Namespace && ok
	})
	return ctrl.NewControllerManagedBy(mgr).Named("dns-proxy").
		For(&corev1.Service{}, builder.WithPredicates(dnsServices)).
		WatchesRawSource(source.Channel(p.exits, &handler.EnqueueRequestForObject{})).
		Complete(p)
}

// Reconcile opens a port for each DNS Service and closes those of the
// Services gone, whichever Service the request names.
func (p *Proxy) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	want, err := p.ports(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for port, l := range p.serving {
		if want[port] != l.consumer || l.exited.Load() {
			p.stop(port)
		}
	}
	var errs []error
	for port, consumer := range want {
		if _, ok := p.serving[port]; ok {
			continue
		}
		if err := p.start(port, consumer); err != nil { //nolint:contextcheck // a port is served as long as the process, not the reconcile
			errs = append(errs, fmt.Errorf("the DNS of consumer %s on port %d: %w", consumer, port, err))
		}
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// ports is the consumer each port serves (PortOwners).
func (p *Proxy) ports(ctx context.Context) (map[int32]string, error) {
	var svcs corev1.ServiceList
	if err := p.Client.List(ctx, &svcs, client.InNamespace(p.Namespace), client.HasLabels{offloadingv1alpha1.DNSServiceLabel}); err != nil {
		return nil, err
	}
	return PortOwners(svcs.Items, func(svc string, port int32, why string) {
		p.Log.Info("a DNS Service is not served: "+why, "service", svc, "port", port)
	}), nil
}

// PortOwners is the consumer each port serves, of the DNS Services svcs:
// each Service's first target port, for the consumer its
// offloadingv1alpha1.OriginClusterLabel names. Of two Services asking
// for one port, the first by name has it. The provider's controller
// manager chooses ports by this rule too (offloading's ensureDNS), so
// that a consumer's pods never ask at a port served with another's
// names. skipped, when set, hears of each Service left out and why.
func PortOwners(svcs []corev1.Service, skipped func(svc string, port int32, why string)) map[int32]string {
	if skipped == nil {
		skipped = func(string, int32, string) {}
	}
	svcs = slices.Clone(svcs)
	slices.SortFunc(svcs, func(a, b corev1.Service) int { return strings.Compare(a.Name, b.Name) })
	want := map[int32]string{}
	for _, s := range svcs {
		consumer := s.Labels[offloadingv1alpha1.OriginClusterLabel]
		if consumer == "" || s.DeletionTimestamp != nil || len(s.Spec.Ports) == 0 {
			continue
		}
		port := s.Spec.Ports[0].TargetPort.IntVal
		if port <= 0 || port > 65535 {
			skipped(s.Name, port, "no numeric target port")
			continue
		}
		if other, taken := want[port]; taken && other != consumer {
			skipped(s.Name, port, "another Service, first by name, asks for its port")
			continue
		}
		want[port] = consumer
	}
	return want
}

// Names is consumer's namespaces as the provider made them: the name the
// consumer uses (the origin annotation) of each provider namespace
// labelled with its cluster ID.
func (p *Proxy) Names(ctx context.Context, consumer string) (Names, error) {
	var nss corev1.NamespaceList
	sel := labels.SelectorFromSet(labels.Set{offloadingv1alpha1.OriginClusterLabel: consumer})
	if err := p.Client.List(ctx, &nss, client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	names := Names{}
	for _, ns := range nss.Items {
		if origin := ns.Annotations[offloadingv1alpha1.OriginNamespaceAnnotation]; origin != "" {
			names[origin] = ns.Name
		}
	}
	return names, nil
}

// podIPIndex indexes Pods by their addresses.
const podIPIndex = "liqo.io/pod-ip"

// podIPs are a pod's own addresses: none for a pod of the node's network,
// whose address is the node's, or one that ended, whose address is free.
func podIPs(o client.Object) []string {
	pod, ok := o.(*corev1.Pod)
	if !ok || pod.Spec.HostNetwork || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	var out []string
	for _, ip := range pod.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out = append(out, a.Unmap().String())
		}
	}
	if len(out) == 0 && pod.Status.PodIP != "" {
		if a, err := netip.ParseAddr(pod.Status.PodIP); err == nil {
			out = append(out, a.Unmap().String())
		}
	}
	return out
}

// foreign says whether addr is a pod's of a namespace made for another
// consumer than consumer (and of none made for it). An address that is no
// pod's (a node's, when the Service's traffic is masqueraded), or a pod's
// of a namespace made for no consumer (the provider's own), is not: the
// proxy cannot tell, or the asker is the provider itself.
func (p *Proxy) foreign(ctx context.Context, addr netip.Addr, consumer string) bool {
	if !addr.IsValid() {
		return false
	}
	var pods corev1.PodList
	if err := p.Client.List(ctx, &pods, client.MatchingFields{podIPIndex: addr.Unmap().String()}, client.UnsafeDisableDeepCopy); err != nil {
		return false
	}
	other := false
	for i := range pods.Items {
		var ns corev1.Namespace
		if err := p.Client.Get(ctx, client.ObjectKey{Name: pods.Items[i].Namespace}, &ns); err != nil {
			continue // not a namespace made for a consumer: not in the cache
		}
		switch owner := ns.Labels[offloadingv1alpha1.OriginClusterLabel]; owner {
		case consumer:
			return false
		case "":
		default:
			other = true
		}
	}
	return other
}

// start serves consumer on port; p.mu is held.
func (p *Proxy) start(port int32, consumer string) error {
	addr := net.JoinHostPort(p.Host, strconv.Itoa(int(port)))
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(p.ctx, "udp", addr)
	if err != nil {
		return err
	}
	l, err := lc.Listen(p.ctx, "tcp", addr)
	if err != nil {
		_ = pc.Close()
		return err
	}
	log := p.Log.WithValues("consumer", consumer, "port", port)
	h := &Handler{Domain: p.Domain, Upstream: p.Upstream, Names: func() Names {
		names, err := p.Names(p.ctx, consumer)
		if err != nil {
			log.Error(err, "reading the consumer's namespaces; its names are asked as they are")
		}
		return names
	}, Foreign: func(addr netip.Addr) bool { return p.foreign(p.ctx, addr, consumer) }}
	ctx, stop := context.WithCancel(p.ctx)
	lis := &listener{consumer: consumer, handler: h, stop: stop, done: make(chan error, 1)}
	go func() {
		err := h.Serve(ctx, pc, l)
		lis.exited.Store(true)
		lis.done <- err
		if p.ctx.Err() == nil {
			// One event waiting is enough: the reconcile it brings looks
			// at every port, this one's exit included.
			select {
			case p.exits <- event.GenericEvent{Object: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "exited"}}}:
			default:
			}
		}
	}()
	p.serving[port] = lis
	log.Info("serving a consumer's DNS")
	return nil
}

// stop closes port; p.mu is held.
func (p *Proxy) stop(port int32) {
	l := p.serving[port]
	delete(p.serving, port)
	l.stop()
	if err := <-l.done; err != nil {
		p.Log.Error(err, "the DNS of a consumer stopped", "consumer", l.consumer, "port", port)
	}
	p.Log.Info("no longer serving a consumer's DNS", "consumer", l.consumer, "port", port)
}

func (p *Proxy) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for port := range p.serving {
		p.stop(port)
	}
}

// Serving is the consumer each open port serves.
func (p *Proxy) Serving() map[int32]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int32]string{}
	for port, l := range p.serving {
		out[port] = l.consumer
	}
	return out
}
