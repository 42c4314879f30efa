// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package transit assigns the addresses through which an aggregator's
// consumers reach the pods placed for them at providers. A consumer peers
// with the aggregator alone and never learns a provider's address: each of
// its pods the aggregator offloaded on is shown to it at an address of
// the aggregator's external range, which the aggregator's gateway leads
// to the pod (gateway.Peer.TransitRoutes). The Allocator decides the
// addresses and keeps them in the consumer's TunnelEndpoint
// (spec.transit), where only this cluster writes and the gateway reads;
// nothing of it is in an object the consumer can read but the address
// itself.
package transit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/network/gateway"
	"github.com/liqo-go/liqo/internal/network/ipam"
)

// +kubebuilder:rbac:groups=net.liqo.io,resources=tunnelendpoints,verbs=get;list;watch;patch

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

	mu        sync.Mutex
	loaded    bool
	consumers map[string]*consumer
	used      map[netip.Addr]bool
	cursor    netip.Addr
}

// consumer is one consumer's routes, by pod, and how far they are
// written.
type consumer struct {
	byPod   map[string]netv1alpha1.TransitRoute
	gen     uint64 // changes made
	written uint64 // changes written
	writing bool
	wrote   chan struct{} // closed when a write ends
}

// Assign returns the address of this cluster's external range through
// which consumer reaches pod (namespace/name here), which this cluster
// reaches at target, in provider; it returns once the route is written.
func (a *Allocator) Assign(ctx context.Context, consumerID, pod, provider string, target netip.Addr) (netip.Addr, error) {
	var tep netv1alpha1.TunnelEndpoint
	if err := a.Client.Get(ctx, client.ObjectKey{Name: consumerID}, &tep); err != nil {
		if apierrors.IsNotFound(err) {
			return netip.Addr{}, ErrNoNetwork
		}
		return netip.Addr{}, err
	}
	if tep.Spec.Local == nil || tep.Spec.LocalSeenAs == nil {
		return netip.Addr{}, ErrNoNetwork
	}
	external, err := netip.ParsePrefix(tep.Spec.Local.ExternalCIDR)
	if err != nil || !external.Addr().Is4() {
		return netip.Addr{}, fmt.Errorf("the TunnelEndpoint of %s: spec.local.externalCIDR %q is not an IPv4 range", consumerID, tep.Spec.Local.ExternalCIDR)
	}
	a.mu.Lock()
	if err := a.load(ctx); err != nil {
		a.mu.Unlock()
		return netip.Addr{}, err
	}
	c := a.consumer(consumerID)
	r, ok := c.byPod[pod]
	addr, _ := netip.ParseAddr(r.Address)
	switch {
	case ok && usable(external, addr) && r.Target == target.String() && r.Provider == provider:
		// As written, or about to be.
	case ok && usable(external, addr):
		r.Target, r.Provider = target.String(), provider
		c.byPod[pod] = r
		c.gen++
	default:
		if ok {
			delete(a.used, addr)
		}
		if addr, ok = a.free(external); !ok {
			a.mu.Unlock()
			return netip.Addr{}, fmt.Errorf("this cluster's external range %s has no free address for transit", external)
		}
		a.used[addr] = true
		c.byPod[pod] = netv1alpha1.TransitRoute{Address: addr.String(), Target: target.String(), Provider: provider, Pod: pod}
		c.gen++
	}
	if c.written == c.gen && !holds(&tep, c.byPod[pod]) {
		// Written, and not there: the TunnelEndpoint is new (made
		// again with the peering), or the cache has not seen the write
		// yet; written again either way, whole.
		c.gen++
	}
	want := c.gen
	dirty := a.dirty(consumerID)
	a.mu.Unlock()
	if err := a.write(ctx, consumerID, want); err != nil {
		return netip.Addr{}, err
	}
	// Others' changes not written yet (routes of pods gone while this
	// process was down, a write that failed) go too; they are tried
	// again with any later change.
	for id, gen := range dirty {
		_ = a.write(ctx, id, gen)
	}
	return addr, nil
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
		if r, ok := c.byPod[pod]; ok {
			delete(c.byPod, pod)
			if addr, err := netip.ParseAddr(r.Address); err == nil {
				delete(a.used, addr)
			}
			c.gen++
		}
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
// forgets those of pods that went meanwhile (they are written away with
// the consumer's next change). Called with a.mu held.
func (a *Allocator) load(ctx context.Context) error {
	if a.loaded {
		return nil
	}
	var teps netv1alpha1.TunnelEndpointList
	if err := a.Client.List(ctx, &teps); err != nil {
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
			if err != nil || a.used[addr] {
				c.gen++
				continue
			}
			ns, name, ok := splitPod(r.Pod)
			if !ok {
				c.gen++
				continue
			}
			var pod corev1.Pod
			if err := a.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pod); apierrors.IsNotFound(err) {
				c.gen++
				continue
			} else if err != nil {
				return fmt.Errorf("reading the transit routes back: %w", err)
			}
			a.used[addr] = true
			c.byPod[r.Pod] = r
		}
	}
	a.loaded = true
	return nil
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
		if err == nil {
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
