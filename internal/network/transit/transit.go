// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package transit assigns the addresses through which an aggregator's
// peers reach one another through it, never learning each other's
// address. A consumer peers with the aggregator alone: each of its pods
// the aggregator offloaded on is shown to it at an address of the
// aggregator's external range, which the aggregator's gateway leads to
// the pod at its provider (gateway.Peer.TransitRoutes). The other way, a
// provider running a consumer's pods reaches the endpoints of the
// consumer's Services (the EndpointSlices the consumer copied here) at
// such addresses too. The Allocator decides the addresses and keeps them
// in the TunnelEndpoint of the peer that uses them (spec.transit), where
// only this cluster writes and the gateway reads; nothing of it is in an
// object a peer can read but the address itself.
package transit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/network/gateway"
	"github.com/liqo-go/liqo/internal/network/ipam"
)

// +kubebuilder:rbac:groups=net.liqo.io,resources=tunnelendpoints,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list

// ErrNoNetwork is returned while no network is agreed with the consumer:
// its gateway could not carry anything.
var ErrNoNetwork = errors.New("no network is agreed with the consumer yet")

// Allocator assigns transit addresses, one per pod, unique in this
// cluster's external range, stable for as long as the pod lives here
// (across restarts: they are read back from the TunnelEndpoints).
// Assignments are written in groups: the pods of a burst cost one write
// per consumer, not one each.
type Allocator struct {
	// Client reads TunnelEndpoints and pods (a cache will do) and
	// patches TunnelEndpoints.
	Client client.Client
	// Live, if set, lists EndpointSlices when the routes are read back
	// (a consumer's copies are not in the Client's cache); without it an
	// EndpointSlice's routes are kept until the slice is reflected again.
	Live client.Reader

	mu        sync.Mutex
	loaded    bool
	consumers map[string]*consumer
	used      map[netip.Addr]bool
	cursor    netip.Addr
}

// consumer is one peer's routes, by key (routeKey), and how far they are
// written: a consumer's to its pods, a provider's to consumers' endpoints.
type consumer struct {
	byPod   map[string]netv1alpha1.TransitRoute
	gen     uint64 // changes made
	written uint64 // changes written
	writing bool
	wrote   chan struct{} // closed when a write ends
	touched []string      // keys put since the last commit
}

// Assign returns the address of this cluster's external range through
// which consumer reaches pod (namespace/name here), which this cluster
// reaches at target, in provider; it returns once the route is written.
func (a *Allocator) Assign(ctx context.Context, consumerID, pod, provider string, target netip.Addr) (netip.Addr, error) {
	external, err := a.external(ctx, consumerID)
	if err != nil {
		return netip.Addr{}, err
	}
	a.mu.Lock()
	if err := a.load(ctx); err != nil {
		a.mu.Unlock()
		return netip.Addr{}, err
	}
	c := a.consumer(consumerID)
	addr, err := a.put(c, external, netv1alpha1.TransitRoute{Target: target.String(), Provider: provider, Pod: pod})
	if err != nil {
		a.mu.Unlock()
		return netip.Addr{}, err
	}
	return addr, a.commit(ctx, consumerID, c)
}

// Endpoints gives peer, a provider running pods of the namespace of
// slice (namespace/name here), its way to targets, each at the peer the
// map names: endpoints of the slice at its consumer (of a copy the
// consumer made of a slice of its own), or the consumer's pods at other
// providers (of the slice this cluster made of the pods it offloaded, at
// their addresses there as this cluster reaches them). It returns, for
// each target inside its peer's pod range (peer itself never), the
// address of this cluster's external range through which peer reaches
// it. The slice's other routes for peer go; no targets, all of them (a
// slice gone, or no longer reflected to peer). It returns once the routes
// are written.
func (a *Allocator) Endpoints(ctx context.Context, peer, slice string, targets map[netip.Addr]string) (map[netip.Addr]netip.Addr, error) {
	var external netip.Prefix
	ranges := map[string]netip.Prefix{}
	if len(targets) > 0 {
		var err error
		if external, err = a.external(ctx, peer); err != nil {
			return nil, err
		}
		for _, in := range targets {
			if _, ok := ranges[in]; ok || in == peer {
				continue
			}
			if ranges[in], err = a.podRange(ctx, in); err != nil {
				return nil, err
			}
		}
	}
	a.mu.Lock()
	if err := a.load(ctx); err != nil {
		a.mu.Unlock()
		return nil, err
	}
	c := a.consumer(peer)
	keep := map[string]bool{}
	out := map[netip.Addr]netip.Addr{}
	// In order: the same targets get the same addresses in any run.
	for _, t := range slices.SortedFunc(maps.Keys(targets), netip.Addr.Compare) {
		in := targets[t]
		if pods, ok := ranges[in]; !ok || !pods.Contains(t) {
			continue
		}
		r := netv1alpha1.TransitRoute{Target: t.String(), Provider: in, EndpointSlice: slice}
		addr, err := a.put(c, external, r)
		if err != nil {
			a.mu.Unlock()
			return nil, err
		}
		keep[routeKey(r)] = true
		out[t] = addr
	}
	for k, r := range c.byPod {
		if r.EndpointSlice == slice && !keep[k] {
			a.drop(c, k)
		}
	}
	if len(targets) == 0 && c.gen == c.written && len(a.dirty("")) == 0 {
		a.mu.Unlock()
		return out, nil // nothing was there: no TunnelEndpoint to read
	}
	return out, a.commit(ctx, peer, c)
}

// Hop is where a transit address leads: a pod's address at its provider
// as this cluster reaches it, and the provider.
type Hop struct {
	Target   netip.Addr
	Provider string
}

// Behind says where those of addrs that are consumer's transit addresses
// lead (to its pods at their providers).
func (a *Allocator) Behind(ctx context.Context, consumerID string, addrs []netip.Addr) (map[netip.Addr]Hop, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.load(ctx); err != nil {
		return nil, err
	}
	out := map[netip.Addr]Hop{}
	c, ok := a.consumers[consumerID]
	if !ok || len(addrs) == 0 {
		return out, nil
	}
	asked := map[netip.Addr]bool{}
	for _, addr := range addrs {
		asked[addr] = true
	}
	for _, r := range c.byPod {
		addr, err := netip.ParseAddr(r.Address)
		if r.Pod == "" || err != nil || !asked[addr] {
			continue
		}
		if target, err := netip.ParseAddr(r.Target); err == nil {
			out[addr] = Hop{Target: target, Provider: r.Provider}
		}
	}
	return out, nil
}

// external is this cluster's external range as agreed with peer.
func (a *Allocator) external(ctx context.Context, peer string) (netip.Prefix, error) {
	tep, err := a.tunnelEndpoint(ctx, peer)
	if err != nil {
		return netip.Prefix{}, err
	}
	external, err := netip.ParsePrefix(tep.Spec.Local.ExternalCIDR)
	if err != nil || !external.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("the TunnelEndpoint of %s: spec.local.externalCIDR %q is not an IPv4 range", peer, tep.Spec.Local.ExternalCIDR)
	}
	return external, nil
}

// podRange is peer's pod range as this cluster sees it.
func (a *Allocator) podRange(ctx context.Context, peer string) (netip.Prefix, error) {
	tep, err := a.tunnelEndpoint(ctx, peer)
	if err != nil {
		return netip.Prefix{}, err
	}
	pods, err := netip.ParsePrefix(tep.Spec.RemoteSeenAs.PodCIDR)
	if err != nil || !pods.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("the TunnelEndpoint of %s: spec.remoteSeenAs.podCIDR %q is not an IPv4 range", peer, tep.Spec.RemoteSeenAs.PodCIDR)
	}
	return pods, nil
}

// tunnelEndpoint is peer's TunnelEndpoint, with a network agreed.
func (a *Allocator) tunnelEndpoint(ctx context.Context, peer string) (*netv1alpha1.TunnelEndpoint, error) {
	var tep netv1alpha1.TunnelEndpoint
	if err := a.Client.Get(ctx, client.ObjectKey{Name: peer}, &tep); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, ErrNoNetwork
		}
		return nil, err
	}
	if tep.Spec.Local == nil || tep.Spec.LocalSeenAs == nil {
		return nil, ErrNoNetwork
	}
	return &tep, nil
}

// routeKey names a route within its peer's: its pod, or its slice and
// target ('@' is in no object's name).
func routeKey(r netv1alpha1.TransitRoute) string {
	if r.Pod != "" {
		return r.Pod
	}
	return r.EndpointSlice + "@" + r.Target
}

// put makes c hold r (its key, target and provider), at the address it
// has if it still may, else at a free one, which it returns. Called with
// a.mu held; it unlocks it on an error.
func (a *Allocator) put(c *consumer, external netip.Prefix, r netv1alpha1.TransitRoute) (netip.Addr, error) {
	key := routeKey(r)
	had, ok := c.byPod[key]
	addr, _ := netip.ParseAddr(had.Address)
	switch {
	case ok && usable(external, addr) && had.Target == r.Target && had.Provider == r.Provider:
		// As written, or about to be.
	case ok && usable(external, addr):
		had.Target, had.Provider = r.Target, r.Provider
		c.byPod[key] = had
		c.gen++
	default:
		if ok {
			delete(a.used, addr)
		}
		if addr, ok = a.free(external); !ok {
			return netip.Addr{}, fmt.Errorf("this cluster's external range %s has no free address for transit", external)
		}
		a.used[addr] = true
		r.Address = addr.String()
		c.byPod[key] = r
		c.gen++
	}
	c.touched = append(c.touched, key)
	return addr, nil
}

// drop forgets c's route key. Called with a.mu held.
func (a *Allocator) drop(c *consumer, key string) {
	r, ok := c.byPod[key]
	if !ok {
		return
	}
	delete(c.byPod, key)
	if addr, err := netip.ParseAddr(r.Address); err == nil {
		delete(a.used, addr)
	}
	c.gen++
}

// commit writes c, id's routes, unless they are written and its
// TunnelEndpoint holds those put since the last commit, and then any
// other peer's changes not written yet. Called with a.mu held; it
// unlocks it.
func (a *Allocator) commit(ctx context.Context, id string, c *consumer) error {
	if c.written == c.gen && len(c.touched) > 0 {
		var tep netv1alpha1.TunnelEndpoint
		err := a.Client.Get(ctx, client.ObjectKey{Name: id}, &tep)
		for _, k := range c.touched {
			if err != nil || !holds(&tep, c.byPod[k]) {
				// Written, and not there: the TunnelEndpoint is new
				// (made again with the peering), or the cache has not
				// seen the write yet; written again either way, whole.
				c.gen++
				break
			}
		}
	}
	c.touched = nil
	want := c.gen
	dirty := a.dirty(id)
	a.mu.Unlock()
	if err := a.write(ctx, id, want); err != nil {
		return err
	}
	// Others' changes not written yet (routes of pods gone while this
	// process was down, a write that failed) go too; they are tried
	// again with any later change.
	for other, gen := range dirty {
		_ = a.write(ctx, other, gen)
	}
	return nil
}

// holds says whether tep has r among its routes.
func holds(tep *netv1alpha1.TunnelEndpoint, r netv1alpha1.TransitRoute) bool {
	return tep.Spec.Transit != nil && slices.Contains(tep.Spec.Transit.Routes, r)
}

// dirty lists, with how far they must be written, the consumers but
// except whose changes are not all written. Called with a.mu held.
func (a *Allocator) dirty(except string) map[string]uint64 {
	out := map[string]uint64{}
	for id, c := range a.consumers {
		if id != except && c.gen > c.written {
			out[id] = c.gen
		}
	}
	return out
}

// Release forgets the route of pod (namespace/name here), whatever its
// consumer.
func (a *Allocator) Release(ctx context.Context, pod string) error {
	a.mu.Lock()
	if err := a.load(ctx); err != nil {
		a.mu.Unlock()
		return err
	}
	for _, c := range a.consumers {
		a.drop(c, pod)
	}
	// Every consumer with changes not written: this one's, and any an
	// earlier write failed for (a Release asked again finds its pod
	// gone already, and must still write).
	dirty := a.dirty("")
	a.mu.Unlock()
	var errs []error
	for id, gen := range dirty {
		errs = append(errs, a.write(ctx, id, gen))
	}
	return errors.Join(errs...)
}

// usable says whether addr may be a transit address in external: not its
// network, its last address or the gateway's tunnel address.
func usable(external netip.Prefix, addr netip.Addr) bool {
	return addr.IsValid() && external.Contains(addr) && addr != external.Masked().Addr() &&
		addr != gateway.TunnelAddress(external) && addr != ipam.Last(external)
}

// free finds an unused address of external, after the last one given so
// that an address just released is not given again at once.
func (a *Allocator) free(external netip.Prefix) (netip.Addr, bool) {
	start := a.cursor
	if !external.Contains(start) {
		start = external.Masked().Addr()
	}
	addr := start
	for {
		addr = addr.Next()
		if !external.Contains(addr) {
			addr = external.Masked().Addr()
		}
		if usable(external, addr) && !a.used[addr] {
			a.cursor = addr
			return addr, true
		}
		if addr == start {
			return netip.Addr{}, false
		}
	}
}

func (a *Allocator) consumer(id string) *consumer {
	c, ok := a.consumers[id]
	if !ok {
		c = &consumer{byPod: map[string]netv1alpha1.TransitRoute{}, wrote: make(chan struct{})}
		a.consumers[id] = c
	}
	return c
}

// load reads the routes back from the TunnelEndpoints, once, and
// forgets those of pods and EndpointSlices that went meanwhile (they are
// written away with the peer's next change). Called with a.mu held.
func (a *Allocator) load(ctx context.Context) error {
	if a.loaded {
		return nil
	}
	var teps netv1alpha1.TunnelEndpointList
	if err := a.Client.List(ctx, &teps); err != nil {
		return fmt.Errorf("reading the transit routes back: %w", err)
	}
	live, err := a.endpointSlices(ctx, teps.Items)
	if err != nil {
		return fmt.Errorf("reading the transit routes back: %w", err)
	}
	a.consumers, a.used = map[string]*consumer{}, map[netip.Addr]bool{}
	for _, tep := range teps.Items {
		if tep.Spec.Transit == nil {
			continue
		}
		c := a.consumer(tep.Name)
		for _, r := range tep.Spec.Transit.Routes {
			addr, err := netip.ParseAddr(r.Address)
			if err != nil || a.used[addr] || (r.Pod == "") == (r.EndpointSlice == "") {
				c.gen++
				continue
			}
			if r.EndpointSlice != "" {
				if live != nil && !live[r.EndpointSlice] {
					c.gen++
					continue
				}
			} else if ns, name, ok := splitPod(r.Pod); !ok {
				c.gen++
				continue
			} else {
				var pod corev1.Pod
				if err := a.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pod); apierrors.IsNotFound(err) {
					c.gen++
					continue
				} else if err != nil {
					return fmt.Errorf("reading the transit routes back: %w", err)
				}
			}
			a.used[addr] = true
			c.byPod[routeKey(r)] = r
		}
	}
	a.loaded = true
	return nil
}

// endpointSlices are the EndpointSlices there are, namespace/name, when
// a route leads to an endpoint of one and Live can list them; nil
// otherwise.
func (a *Allocator) endpointSlices(ctx context.Context, teps []netv1alpha1.TunnelEndpoint) (map[string]bool, error) {
	if a.Live == nil || !slices.ContainsFunc(teps, func(tep netv1alpha1.TunnelEndpoint) bool {
		return tep.Spec.Transit != nil && slices.ContainsFunc(tep.Spec.Transit.Routes, func(r netv1alpha1.TransitRoute) bool { return r.EndpointSlice != "" })
	}) {
		return nil, nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(discoveryv1.SchemeGroupVersion.WithKind("EndpointSliceList"))
	if err := a.Live.List(ctx, list); err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(list.Items))
	for _, es := range list.Items {
		out[es.Namespace+"/"+es.Name] = true
	}
	return out, nil
}

func splitPod(key string) (ns, name string, ok bool) {
	ns, name, ok = strings.Cut(key, "/")
	return ns, name, ok && ns != "" && name != ""
}

// write makes the consumer's TunnelEndpoint hold its routes as of change
// want at least: one write carries every change made before it starts,
// and the callers that wait meanwhile share the next.
func (a *Allocator) write(ctx context.Context, id string, want uint64) error {
	for {
		a.mu.Lock()
		c := a.consumers[id]
		if c.written >= want {
			a.mu.Unlock()
			return nil
		}
		if c.writing {
			wrote := c.wrote
			a.mu.Unlock()
			select {
			case <-wrote:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		c.writing = true
		gen := c.gen
		routes := make([]netv1alpha1.TransitRoute, 0, len(c.byPod))
		for _, r := range c.byPod {
			routes = append(routes, r)
		}
		a.mu.Unlock()
		slices.SortFunc(routes, func(x, y netv1alpha1.TransitRoute) int {
			ax, _ := netip.ParseAddr(x.Address)
			ay, _ := netip.ParseAddr(y.Address)
			return cmp.Or(ax.Compare(ay), cmp.Compare(x.Pod, y.Pod))
		})
		err := a.patch(ctx, id, routes)
		a.mu.Lock()
		c.writing = false
		// No TunnelEndpoint: nothing to write into (the peering went); one
		// made again gets every route with the peer's next change (holds).
		if err == nil || errors.Is(err, ErrNoNetwork) {
			c.written = gen
		}
		close(c.wrote)
		c.wrote = make(chan struct{})
		a.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// patch replaces the routes of id's TunnelEndpoint with routes, whatever
// a cache shows of them.
func (a *Allocator) patch(ctx context.Context, id string, routes []netv1alpha1.TransitRoute) error {
	if routes == nil {
		routes = []netv1alpha1.TransitRoute{}
	}
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"transit": map[string]any{"routes": routes}}})
	if err != nil {
		return err
	}
	tep := &netv1alpha1.TunnelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: id}}
	if err := a.Client.Patch(ctx, tep, client.RawPatch(types.MergePatchType, body)); err != nil {
		if apierrors.IsNotFound(err) {
			return ErrNoNetwork
		}
		return fmt.Errorf("writing the transit routes of %s: %w", id, err)
	}
	return nil
}
