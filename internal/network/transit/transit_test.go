// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package transit

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
