// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package provider_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider/memory"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider/providertest"
)

// TestRouter: each provider's calls reach the backend Select names for
// it, and only that one; Open, Release and the change events span every
// backend; a backend the router does not run, or one without streams,
// is an error that names the provider.
func TestRouter(t *testing.T) {
	peers, offers := memory.New(), memory.New()
	r := &provider.Router{
		Default:  peers,
		Backends: map[string]provider.Backend{"offers": offers},
		Select: func(p string) string {
			switch {
			case strings.HasPrefix(p, "offer-"):
				return "offers"
			case p == "stray":
				return "elsewhere"
			}
			return ""
		},
	}
	ctx := t.Context()

	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := r.Source(provider.Pods, &handler.EnqueueRequestForObject{}).Start(ctx, q); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ provider, remote string }{{"peer-1", "web-peer"}, {"offer-1", "web-offer"}} {
		ns, err := r.Namespace(ctx, tc.provider, "web", tc.remote)
		if err != nil {
			t.Fatal(err)
		}
		if err := ns.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tc.remote, Name: tc.provider}}); err != nil {
			t.Fatal(err)
		}
	}
	if peers.Object("peer-1", provider.Pods, "web-peer", "peer-1") == nil || offers.Object("peer-1", provider.Pods, "web-peer", "peer-1") != nil {
		t.Error("peer-1's pod is not in the default backend alone")
	}
	if offers.Object("offer-1", provider.Pods, "web-offer", "offer-1") == nil || peers.Object("offer-1", provider.Pods, "web-offer", "offer-1") != nil {
		t.Error("offer-1's pod is not in the offers backend alone")
	}

	// One event per create, from either backend, as the local pod.
	got := map[string]bool{}
	for range 2 {
		item, shutdown := getWithin(t, q, 10*time.Second)
		if shutdown {
			t.Fatal("queue shut down")
		}
		if item.Namespace != "web" {
			t.Errorf("event for %s, want the local namespace web", item)
		}
		got[item.Name] = true
		q.Done(item)
	}
	if !got["peer-1"] || !got["offer-1"] {
		t.Errorf("events for %v, want peer-1 and offer-1", got)
	}

	if open := r.Open("web"); len(open) != 2 {
		t.Errorf("%d views of web open, want one per backend (2)", len(open))
	}
	r.Release("web", map[string]bool{"offer-1": true})
	if open := r.Open("web"); len(open) != 1 || open[0].Provider() != "offer-1" {
		t.Errorf("after releasing all but offer-1, open: %v", open)
	}

	down := errors.New("unreachable")
	offers.Down("offer-1", down)
	if err := r.Ping(ctx, "offer-1"); !errors.Is(err, down) {
		t.Errorf("ping offer-1: %v, want the offers backend's answer", err)
	}
	if err := r.Ping(ctx, "peer-1"); err != nil {
		t.Errorf("ping peer-1: %v, want the default backend's answer (nil)", err)
	}

	if _, err := r.Namespace(ctx, "stray", "web", "web-stray"); err == nil || !strings.Contains(err.Error(), "stray") {
		t.Errorf("a provider of a backend not run: %v, want an error naming it", err)
	}
	if _, _, err := r.Stream(ctx, "offer-1"); !errors.Is(err, provider.ErrNoStreams) || !strings.Contains(err.Error(), "offer-1") {
		t.Errorf("streams of a backend without them: %v, want ErrNoStreams naming the provider", err)
	}
}

// getWithin takes the next item of q, failing the test if none comes in d.
func getWithin(t *testing.T, q workqueue.TypedRateLimitingInterface[reconcile.Request], d time.Duration) (reconcile.Request, bool) {
	t.Helper()
	type result struct {
		item     reconcile.Request
		shutdown bool
	}
	ch := make(chan result, 1)
	go func() {
		item, shutdown := q.Get()
		ch <- result{item, shutdown}
	}()
	select {
	case r := <-ch:
		return r.item, r.shutdown
	case <-time.After(d):
		t.Fatalf("no event within %s", d)
		return reconcile.Request{}, true
	}
}

// TestRouterContract: a router is itself a provider as the contract says,
// for a provider of either backend.
func TestRouterContract(t *testing.T) {
	for _, id := range []string{"peer-1", "offer-1"} {
		t.Run(id, func(t *testing.T) {
			peers, offers := memory.New(), memory.New()
			r := &provider.Router{
				Default: peers, Backends: map[string]provider.Backend{"offers": offers},
				Select: func(p string) string {
					if strings.HasPrefix(p, "offer-") {
						return "offers"
					}
					return ""
				},
			}
			owner := peers
			if id == "offer-1" {
				owner = offers
			}
			providertest.Run(t, providertest.Harness{
				Providers: r, Provider: id, LocalClusterID: "consumer", Local: "web", Remote: "consumer-web", Node: "n1",
				Remove: func(_ context.Context, kind provider.Kind, name string) error {
					owner.Remove(id, kind, "consumer-web", name)
					return nil
				},
				Measure: func(_ context.Context, pod string, at time.Time, usage map[string]corev1.ResourceList) error {
					owner.Measure(id, "consumer-web", pod, provider.PodUsage{Timestamp: at, Window: 10 * time.Second, Containers: usage})
					return nil
				},
			})
		})
	}
}

// fixedAddresses shows every address as to, agreed or not.
type fixedAddresses struct {
	to     netip.Addr
	agreed bool
}

func (f fixedAddresses) FromProvider(context.Context, string, netip.Addr) (netip.Addr, bool) {
	return f.to, true
}
func (f fixedAddresses) ToProvider(context.Context, string, netip.Addr) (netip.Addr, bool) {
	return f.to, true
}
func (f fixedAddresses) Agreed(context.Context, string) bool { return f.agreed }

// showingBackend is a backend that shows its own providers' addresses.
type showingBackend struct {
	*memory.Providers
	fixedAddresses
}

// TestRouterAddresses: a provider whose backend shows its own addresses
// is shown by it; the others by the router's Addresses (the peers');
// with none, nothing is shown.
func TestRouterAddresses(t *testing.T) {
	own := showingBackend{memory.New(), fixedAddresses{to: netip.MustParseAddr("10.9.9.9"), agreed: true}}
	r := &provider.Router{
		Default: memory.New(), Backends: map[string]provider.Backend{"own": own},
		Select: func(p string) string {
			switch p {
			case "offer-1":
				return "own"
			case "stray":
				return "elsewhere"
			}
			return ""
		},
		Addresses: fixedAddresses{to: netip.MustParseAddr("10.1.1.1"), agreed: true},
	}
	ctx := t.Context()
	pod := netip.MustParseAddr("10.0.0.5")
	for _, tc := range []struct {
		provider string
		want     netip.Addr
		agreed   bool
	}{{"offer-1", own.to, true}, {"peer-1", netip.MustParseAddr("10.1.1.1"), true}} {
		if got, ok := r.FromProvider(ctx, tc.provider, pod); !ok || got != tc.want {
			t.Errorf("%s's pod %s shown as %s (%v), want %s", tc.provider, pod, got, ok, tc.want)
		}
		if got, ok := r.ToProvider(ctx, tc.provider, pod); !ok || got != tc.want {
			t.Errorf("%s shown %s as %s (%v), want %s", tc.provider, pod, got, ok, tc.want)
		}
		if got := r.Agreed(ctx, tc.provider); got != tc.agreed {
			t.Errorf("%s agreed %v, want %v", tc.provider, got, tc.agreed)
		}
	}
	// A provider of a backend the router does not run is no peer either.
	if got, ok := r.FromProvider(ctx, "stray", pod); ok || r.Agreed(ctx, "stray") {
		t.Errorf("stray, of a backend not run, shown as %s (%v), agreed %v", got, ok, r.Agreed(ctx, "stray"))
	}
	r.Addresses = nil
	if got, ok := r.FromProvider(ctx, "peer-1", pod); ok {
		t.Errorf("with no Addresses, peer-1's pod shown as %s", got)
	}
	if got, ok := r.ToProvider(ctx, "peer-1", pod); ok || r.Agreed(ctx, "peer-1") {
		t.Errorf("with no Addresses, %s shown to peer-1 as %s (%v), agreed %v", pod, got, ok, r.Agreed(ctx, "peer-1"))
	}
}
