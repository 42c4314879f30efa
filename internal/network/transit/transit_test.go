// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package transit

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestTransitAddresses: against a real API server, the pods of two
// consumers placed at once get addresses of this cluster's external
// range, all different, never its network, tunnel or last address, each
// written into its consumer's TunnelEndpoint alone; a pod keeps its
// address when its target moves and across a restart; a pod released, or
// gone while nobody watched, loses its route; a consumer with no network
// agreed gets none.
func TestTransitAddresses(t *testing.T) {
	_, c := envtest.StartInstalled(t, "transit")
	ctx := t.Context()
	const ns = "placed"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tep := func(id string, agreed bool) {
		t.Helper()
		e := &netv1alpha1.TunnelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: netv1alpha1.TunnelEndpointSpec{
			ClusterID: id, PublicKey: "x",
			Remote:       netv1alpha1.Ranges{PodCIDR: "10.100.0.0/16", ExternalCIDR: "10.70.0.0/16"},
			RemoteSeenAs: netv1alpha1.Ranges{PodCIDR: "10.91.0.0/16", ExternalCIDR: "10.92.0.0/16"},
		}}
		if agreed {
			// A /24: room for the pods below, and a range that fills.
			e.Spec.Local = &netv1alpha1.Ranges{PodCIDR: "10.100.0.0/16", ExternalCIDR: "10.70.0.0/24"}
			e.Spec.LocalSeenAs = &netv1alpha1.Ranges{PodCIDR: "10.81.0.0/16", ExternalCIDR: "10.82.0.0/24"}
		}
		if err := c.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	tep("consumer-1", true)
	tep("consumer-2", true)
	tep("unagreed", false)
	pod := func(i int) string {
		name := fmt.Sprintf("p%d", i)
		if err := c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}); err != nil {
			t.Fatal(err)
		}
		return ns + "/" + name
	}
	target := func(i int) netip.Addr {
		a := netip.MustParseAddr("10.83.0.0")
		for range i {
			a = a.Next()
		}
		return a
	}
	consumerOf := func(i int) string { return []string{"consumer-1", "consumer-2"}[i%2] }

	a := &Allocator{Client: c}
	const n = 120
	got := make([]netip.Addr, n)
	keys := make([]string, n)
	for i := range n {
		keys[i] = pod(i)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { got[i], errs[i] = a.Assign(ctx, consumerOf(i), keys[i], "provider-1", target(i)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	external := netip.MustParsePrefix("10.70.0.0/24")
	seen := map[netip.Addr]bool{}
	for i, addr := range got {
		if !external.Contains(addr) || addr == external.Addr() || addr == external.Addr().Next() || addr == netip.MustParseAddr("10.70.0.255") {
			t.Errorf("pod %s got %s: not a usable address of %s", keys[i], addr, external)
		}
		if seen[addr] {
			t.Errorf("pod %s got %s, which another pod has", keys[i], addr)
		}
		seen[addr] = true
	}
	routesOf := func(id string) map[string]netv1alpha1.TransitRoute {
		t.Helper()
		var e netv1alpha1.TunnelEndpoint
		if err := c.Get(ctx, client.ObjectKey{Name: id}, &e); err != nil {
			t.Fatal(err)
		}
		out := map[string]netv1alpha1.TransitRoute{}
		if e.Spec.Transit != nil {
			for _, r := range e.Spec.Transit.Routes {
				out[r.Pod] = r
			}
		}
		return out
	}
	written := map[string]map[string]netv1alpha1.TransitRoute{"consumer-1": routesOf("consumer-1"), "consumer-2": routesOf("consumer-2")}
	for i := range n {
		r, ok := written[consumerOf(i)][keys[i]]
		if !ok || r.Address != got[i].String() || r.Target != target(i).String() || r.Provider != "provider-1" {
			t.Errorf("%s's TunnelEndpoint has %+v for %s, want %s to %s", consumerOf(i), r, keys[i], got[i], target(i))
		}
	}
	if len(written["consumer-1"]) != n/2 || len(written["consumer-2"]) != n/2 {
		t.Errorf("the TunnelEndpoints list %d and %d routes, want %d each: a consumer's pods only", len(written["consumer-1"]), len(written["consumer-2"]), n/2)
	}
	if _, err := a.Assign(ctx, "unagreed", pod(n), "provider-1", target(n)); !errors.Is(err, ErrNoNetwork) {
		t.Errorf("a consumer with no network agreed: %v, want ErrNoNetwork", err)
	}
	if e := routesOf("unagreed"); len(e) != 0 {
		t.Errorf("a consumer with no network agreed has routes: %v", e)
	}

	// The target moves (the pod restarted at its provider): the address
	// stays.
	if addr, err := a.Assign(ctx, "consumer-1", keys[0], "provider-2", target(500)); err != nil || addr != got[0] {
		t.Errorf("pod %s moved: %s, %v; want %s still", keys[0], addr, err, got[0])
	}
	if r := routesOf("consumer-1")[keys[0]]; r.Target != target(500).String() || r.Provider != "provider-2" {
		t.Errorf("pod %s moved: its route leads to %s in %s, want %s in provider-2", keys[0], r.Target, r.Provider, target(500))
	}

	// Released: its route goes. Gone while nobody watched (pod 2): a
	// restarted allocator forgets it with the consumer's next change, and
	// keeps every other address.
	if err := a.Release(ctx, keys[0]); err != nil {
		t.Fatal(err)
	}
	if _, ok := routesOf("consumer-1")[keys[0]]; ok {
		t.Errorf("pod %s released, its route is still there", keys[0])
	}
	if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p2"}}); err != nil {
		t.Fatal(err)
	}
	restarted := &Allocator{Client: c}
	if addr, err := restarted.Assign(ctx, "consumer-1", keys[4], "provider-1", target(4)); err != nil || addr != got[4] {
		t.Errorf("after a restart pod %s has %s, %v; want %s", keys[4], addr, err, got[4])
	}
	if _, ok := routesOf("consumer-1")[keys[2]]; ok {
		t.Errorf("pod %s went, and a restarted allocator kept its route", keys[2])
	}
	// The consumer's TunnelEndpoint is made again (the peering was): the
	// next assignment writes every route of the consumer's back.
	var e netv1alpha1.TunnelEndpoint
	if err := c.Get(ctx, client.ObjectKey{Name: "consumer-1"}, &e); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, &e); err != nil {
		t.Fatal(err)
	}
	tep("consumer-1", true)
	if addr, err := restarted.Assign(ctx, "consumer-1", keys[6], "provider-1", target(6)); err != nil || addr != got[6] {
		t.Errorf("pod %s after its consumer's TunnelEndpoint was made again: %s, %v; want %s", keys[6], addr, err, got[6])
	}
	if routes := routesOf("consumer-1"); len(routes) != n/2-2 {
		t.Errorf("consumer-1's TunnelEndpoint made again lists %d routes, want its %d pods that stay", len(routes), n/2-2)
	}
	// The range fills: 253 usable addresses, 119 taken by the pods that
	// stay; what does not fit is refused, with the range named.
	var full error
	for i := n + 1; i < n+200 && full == nil; i++ {
		_, full = restarted.Assign(ctx, "consumer-2", pod(i), "provider-1", target(i))
	}
	if full == nil || !strings.Contains(full.Error(), "10.70.0.0/24") {
		t.Errorf("the external range filled: %v; want an error naming it", full)
	}
}

// TestTransitToEndpoints: against a real API server, a provider running
// an aggregated consumer's pods gets, for the endpoints of the
// consumer's slices, addresses of this cluster's external range, written
// into its own TunnelEndpoint alone, each leading into the consumer; an
// address outside the consumer's pod range gets none; the slice's
// routes follow its endpoints, and go with it (also while the allocator
// was down); a route is for a pod or a slice, never both (schema).
func TestTransitToEndpoints(t *testing.T) {
	_, c := envtest.StartInstalled(t, "transit-endpoints")
	ctx := t.Context()
	const ns = "aggregated"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	peers(t, c)
	slice := func(name string) string {
		t.Helper()
		if err := c.Create(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, AddressType: discoveryv1.AddressTypeIPv4}); err != nil {
			t.Fatal(err)
		}
		return ns + "/" + name
	}
	routesOf := func(id string) []netv1alpha1.TransitRoute {
		t.Helper()
		var e netv1alpha1.TunnelEndpoint
		if err := c.Get(ctx, client.ObjectKey{Name: id}, &e); err != nil {
			t.Fatal(err)
		}
		if e.Spec.Transit == nil {
			return nil
		}
		return e.Spec.Transit.Routes
	}
	web, db := slice("web"), slice("db")
	e1, e2, e3 := netip.MustParseAddr("10.91.0.5"), netip.MustParseAddr("10.91.0.6"), netip.MustParseAddr("10.91.0.7")
	outside := netip.MustParseAddr("10.94.0.9") // provider-2's pods
	// at says which peer each target is in.
	at := func(peer string, targets ...netip.Addr) map[netip.Addr]string {
		out := map[netip.Addr]string{}
		for _, t := range targets {
			out[t] = peer
		}
		return out
	}
	a := &Allocator{Client: c, Live: c}
	got, err := a.Endpoints(ctx, "provider-1", web, at("consumer-1", e1, e2, outside))
	if err != nil {
		t.Fatal(err)
	}
	external := netip.MustParsePrefix("10.70.0.0/24")
	if len(got) != 2 || !external.Contains(got[e1]) || !external.Contains(got[e2]) || got[e1] == got[e2] {
		t.Fatalf("the endpoints of %s for provider-1: %v; want two addresses of %s, none for %s", web, got, external, outside)
	}
	dbGot, err := a.Endpoints(ctx, "provider-1", db, at("consumer-1", e1))
	if err != nil {
		t.Fatal(err)
	}
	if dbGot[e1] == got[e1] || !external.Contains(dbGot[e1]) {
		t.Errorf("%s's endpoint %s got %s, %s's %s: want an address of its own", db, e1, dbGot[e1], web, got[e1])
	}
	want := map[netv1alpha1.TransitRoute]bool{
		{Address: got[e1].String(), Target: e1.String(), Provider: "consumer-1", EndpointSlice: web}:  true,
		{Address: got[e2].String(), Target: e2.String(), Provider: "consumer-1", EndpointSlice: web}:  true,
		{Address: dbGot[e1].String(), Target: e1.String(), Provider: "consumer-1", EndpointSlice: db}: true,
	}
	if r := routesOf("provider-1"); len(r) != len(want) || !want[r[0]] || !want[r[1]] || !want[r[2]] {
		t.Errorf("provider-1's TunnelEndpoint lists %+v, want %v", r, want)
	}
	if r := routesOf("consumer-1"); len(r) != 0 {
		t.Errorf("the consumer's TunnelEndpoint lists %+v: the routes are the provider's alone", r)
	}

	// The slice changes: its kept endpoint keeps its address, the one
	// gone loses its route, a new one gets one.
	again, err := a.Endpoints(ctx, "provider-1", web, at("consumer-1", e1, e3))
	if err != nil {
		t.Fatal(err)
	}
	if again[e1] != got[e1] || !again[e3].IsValid() || again[e3] == dbGot[e1] {
		t.Errorf("after a change: %v; want %s at %s still, and %s at a new address", again, e1, got[e1], e3)
	}
	for _, r := range routesOf("provider-1") {
		if r.Target == e2.String() {
			t.Errorf("endpoint %s left %s, and its route is still there: %+v", e2, web, r)
		}
	}
	// A provider with no network agreed gets nothing.
	if _, err := a.Endpoints(ctx, "unagreed", web, at("consumer-1", e1)); !errors.Is(err, ErrNoNetwork) {
		t.Errorf("a provider with no network agreed: %v, want ErrNoNetwork", err)
	}

	// The slice is no longer reflected to provider-1: its routes go,
	// db's stay.
	if _, err := a.Endpoints(ctx, "provider-1", web, nil); err != nil {
		t.Fatal(err)
	}
	if r := routesOf("provider-1"); len(r) != 1 || r[0].EndpointSlice != db {
		t.Errorf("%s released: provider-1's TunnelEndpoint lists %+v, want %s's route alone", web, r, db)
	}
	// db goes while the allocator is down: a restarted one forgets its
	// route with the provider's next change.
	if err := c.Delete(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}}); err != nil {
		t.Fatal(err)
	}
	restarted := &Allocator{Client: c, Live: c}
	if _, err := restarted.Endpoints(ctx, "provider-1", web, at("consumer-1", e1)); err != nil {
		t.Fatal(err)
	}
	if r := routesOf("provider-1"); len(r) != 1 || r[0].EndpointSlice != web {
		t.Errorf("after %s went while nobody watched: provider-1's TunnelEndpoint lists %+v, want %s's one route", db, r, web)
	}

	// The schema: a route names a pod or a slice.
	var e netv1alpha1.TunnelEndpoint
	if err := c.Get(ctx, client.ObjectKey{Name: "provider-2"}, &e); err != nil {
		t.Fatal(err)
	}
	e.Spec.Transit = &netv1alpha1.Transit{Routes: []netv1alpha1.TransitRoute{{Address: "10.70.0.9", Target: "10.91.0.5", Provider: "consumer-1", Pod: ns + "/p", EndpointSlice: web}}}
	if err := c.Update(ctx, &e); err == nil || !strings.Contains(err.Error(), "a route is for a pod or for an EndpointSlice") {
		t.Errorf("a route for a pod and a slice: %v; want it refused, the rule named", err)
	}
}

// peers agrees a network with consumer-1 and provider-1 and -2, whose
// pods this cluster sees at 10.91, 10.93 and 10.94.0.0/16; its external
// range is 10.70.0.0/24.
func peers(t *testing.T, c client.Client) {
	t.Helper()
	for id, pods := range map[string]string{"consumer-1": "10.91.0.0/16", "provider-1": "10.93.0.0/16", "provider-2": "10.94.0.0/16"} {
		if err := c.Create(t.Context(), &netv1alpha1.TunnelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: netv1alpha1.TunnelEndpointSpec{
			ClusterID: id, PublicKey: "x",
			Remote:       netv1alpha1.Ranges{PodCIDR: "10.100.0.0/16", ExternalCIDR: "10.70.0.0/16"},
			RemoteSeenAs: netv1alpha1.Ranges{PodCIDR: pods, ExternalCIDR: "10.92.0.0/16"},
			Local:        &netv1alpha1.Ranges{PodCIDR: "10.100.0.0/16", ExternalCIDR: "10.70.0.0/24"},
			LocalSeenAs:  &netv1alpha1.Ranges{PodCIDR: "10.81.0.0/16", ExternalCIDR: "10.82.0.0/24"},
		}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTransitBetweenProviders: a consumer's pod at one provider is behind
// its transit address (Behind); another provider running pods of the same
// namespace gets its own route to it, with that provider as the way (the
// slice this cluster made of the pods it offloaded). A target named in
// the peer's own range, or in a peer it is not in, gets none.
func TestTransitBetweenProviders(t *testing.T) {
	_, c := envtest.StartInstalled(t, "transit-providers")
	ctx := t.Context()
	const ns = "aggregated"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	peers(t, c)
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"db", "web"} {
		if err := c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Create(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, AddressType: discoveryv1.AddressTypeIPv4}); err != nil {
		t.Fatal(err)
	}
	a := &Allocator{Client: c, Live: c}
	atP2, atP1 := netip.MustParseAddr("10.94.0.5"), netip.MustParseAddr("10.93.0.8")
	shownDB, err := a.Assign(ctx, "consumer-1", ns+"/db", "provider-2", atP2)
	if err != nil {
		t.Fatal(err)
	}
	shownWeb, err := a.Assign(ctx, "consumer-1", ns+"/web", "provider-1", atP1)
	if err != nil {
		t.Fatal(err)
	}
	nobody := netip.MustParseAddr("10.70.0.200")
	hops, err := a.Behind(ctx, "consumer-1", []netip.Addr{shownDB, shownWeb, nobody})
	if err != nil {
		t.Fatal(err)
	}
	if len(hops) != 2 || hops[shownDB] != (Hop{Target: atP2, Provider: "provider-2"}) || hops[shownWeb] != (Hop{Target: atP1, Provider: "provider-1"}) {
		t.Fatalf("behind %s, %s and %s: %+v; want db at provider-2 and web at provider-1, nothing behind the last", shownDB, shownWeb, nobody, hops)
	}
	if other, err := a.Behind(ctx, "provider-1", []netip.Addr{shownDB}); err != nil || len(other) != 0 {
		t.Errorf("behind consumer-1's address, for provider-1: %+v, %v; want nothing (the routes are consumer-1's)", other, err)
	}

	slice := ns + "/db"
	got, err := a.Endpoints(ctx, "provider-1", slice, map[netip.Addr]string{
		atP2:                             "provider-2",
		atP1:                             "provider-1", // its own pod: its own controller lists it
		netip.MustParseAddr("10.91.0.9"): "provider-2", // not in provider-2's range
	})
	if err != nil {
		t.Fatal(err)
	}
	external := netip.MustParsePrefix("10.70.0.0/24")
	if len(got) != 1 || !external.Contains(got[atP2]) || got[atP2] == shownDB {
		t.Fatalf("provider-1's ways into the slice: %v; want one for %s, an address of %s of its own", got, atP2, external)
	}
	var tep netv1alpha1.TunnelEndpoint
	if err := c.Get(ctx, client.ObjectKey{Name: "provider-1"}, &tep); err != nil {
		t.Fatal(err)
	}
	want := netv1alpha1.TransitRoute{Address: got[atP2].String(), Target: atP2.String(), Provider: "provider-2", EndpointSlice: slice}
	if tep.Spec.Transit == nil || !slices.Equal(tep.Spec.Transit.Routes, []netv1alpha1.TransitRoute{want}) {
		t.Errorf("provider-1's TunnelEndpoint lists %+v, want %+v alone", tep.Spec.Transit, want)
	}
}
