// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Backend is one kind of provider: the remote cluster behind a peering,
// or one of the broker's. It may also be a Streams.
type Backend interface {
	Providers
	Health
}

// Router is the Providers, Health and Streams of a virtual kubelet that
// runs several kinds of provider side by side from one Setup: each
// provider ID goes to the backend its virtual node's offer names
// (Select), the others to Default. The backends are fixed when the
// Router is made; Select may change its answers as offers come and go.
type Router struct {
	// Default serves the providers Select names no backend for.
	Default Backend
	// Backends are the other backends, by name.
	Backends map[string]Backend
	// Select returns the name of the backend that serves provider, or ""
	// for Default.
	Select func(provider string) string
	// Addresses shows the addresses of the providers whose backend does
	// not show its own (is no Addresses): the peers'.
	Addresses Addresses
}

var (
	_ Providers = &Router{}
	_ Health    = &Router{}
	_ Streams   = &Router{}
	_ Usage     = &Router{}
	_ Addresses = &Router{}
)

func (r *Router) backend(provider string) (Backend, error) {
	if r.Select == nil {
		return r.Default, nil
	}
	name := r.Select(provider)
	if name == "" {
		return r.Default, nil
	}
	b, ok := r.Backends[name]
	if !ok {
		return nil, fmt.Errorf("provider %s is served by %q, which this virtual kubelet does not run", provider, name)
	}
	return b, nil
}

// all are the backends, Default first.
func (r *Router) all() []Backend {
	out := []Backend{r.Default}
	for _, b := range r.Backends {
		out = append(out, b)
	}
	return out
}

// Namespace implements Providers.
func (r *Router) Namespace(ctx context.Context, provider, local, remote string) (Namespace, error) {
	b, err := r.backend(provider)
	if err != nil {
		return nil, err
	}
	return b.Namespace(ctx, provider, local, remote)
}

// Open implements Providers: the views open in every backend.
func (r *Router) Open(local string) []Namespace {
	var out []Namespace
	for _, b := range r.all() {
		out = append(out, b.Open(local)...)
	}
	return out
}

// Release implements Providers, in every backend.
func (r *Router) Release(local string, keep map[string]bool) {
	for _, b := range r.all() {
		b.Release(local, keep)
	}
}

// Source implements Providers: the changes of every backend.
func (r *Router) Source(kind Kind, h handler.EventHandler) source.Source {
	var sources multiSource
	for _, b := range r.all() {
		sources = append(sources, b.Source(kind, h))
	}
	return sources
}

// Ping implements Health.
func (r *Router) Ping(ctx context.Context, provider string) error {
	b, err := r.backend(provider)
	if err != nil {
		return err
	}
	return b.Ping(ctx, provider)
}

// ErrNoStreams is returned by Stream for a provider whose backend carries
// no logs, exec, attach or port-forward.
var ErrNoStreams = errors.New("this provider serves no logs, exec, attach or port-forward")

// Stream implements Streams.
func (r *Router) Stream(ctx context.Context, provider string) (*url.URL, http.RoundTripper, error) {
	b, err := r.backend(provider)
	if err != nil {
		return nil, nil, err
	}
	s, ok := b.(Streams)
	if !ok {
		return nil, nil, fmt.Errorf("provider %s: %w", provider, ErrNoStreams)
	}
	return s.Stream(ctx, provider)
}

// PodUsage implements Usage: ErrNoUsage for a provider whose backend
// measures nothing.
func (r *Router) PodUsage(ctx context.Context, provider, remote string) (map[string]PodUsage, error) {
	b, err := r.backend(provider)
	if err != nil {
		return nil, err
	}
	u, ok := b.(Usage)
	if !ok {
		return nil, fmt.Errorf("provider %s: %w", provider, ErrNoUsage)
	}
	return u.PodUsage(ctx, provider, remote)
}

// addresses is what shows provider's addresses: its backend, if it
// shows its own, or Addresses; nil for none (nor for a provider whose
// backend this router does not run: it is no peer either).
func (r *Router) addresses(provider string) Addresses {
	b, err := r.backend(provider)
	if err != nil {
		return nil
	}
	if a, ok := b.(Addresses); ok {
		return a
	}
	return r.Addresses
}

// FromProvider implements Addresses.
func (r *Router) FromProvider(ctx context.Context, provider string, addr netip.Addr) (netip.Addr, bool) {
	if a := r.addresses(provider); a != nil {
		return a.FromProvider(ctx, provider, addr)
	}
	return netip.Addr{}, false
}

// ToProvider implements Addresses.
func (r *Router) ToProvider(ctx context.Context, provider string, addr netip.Addr) (netip.Addr, bool) {
	if a := r.addresses(provider); a != nil {
		return a.ToProvider(ctx, provider, addr)
	}
	return netip.Addr{}, false
}

// Agreed implements Addresses.
func (r *Router) Agreed(ctx context.Context, provider string) bool {
	if a := r.addresses(provider); a != nil {
		return a.Agreed(ctx, provider)
	}
	return false
}

// multiSource starts several sources into one queue.
type multiSource []source.Source

func (m multiSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	for _, s := range m {
		if err := s.Start(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

func (m multiSource) String() string {
	return fmt.Sprintf("the changes of %d provider backends", len(m))
}
