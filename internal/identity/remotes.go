// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package identity

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Client rates towards a provider: high enough that a burst of 1000 pods
// is not throttled on the client side (the provider's API server applies
// its own priority and fairness).
const (
	remoteQPS   = 1000
	remoteBurst = 2000
)

// providerWrites counts the write requests the virtual kubelet sends to each
// provider: with status flowing back by watch, an offloaded pod costs two
// (create and delete).
var providerWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "liqo_virtualkubelet_provider_writes_total",
	Help: "Write requests (POST, PUT, PATCH, DELETE) the virtual kubelet sent to a provider's API server, by provider and resource.",
}, []string{"provider", "verb", "resource"})

func init() { metrics.Registry.MustRegister(providerWrites) }

// Remotes gives the virtual kubelet's clients towards each provider, built
// from the identity the consumer stored for it in
// RemoteSecretName(provider): the provider's address and CA as
// the token exchange authenticated them, the certificate the provider
// issued, the key that never left. Nothing a peer writes (an
// Advertisement's secret reference, a kubeconfig) is read. Safe for
// concurrent use.
type Remotes struct {
	// Client reads the local identity Secrets; a cached reader, as every
	// pod and object reconcile asks for its provider's config.
	Client client.Reader
	// Namespace is the local Liqo namespace.
	Namespace string
	// Scheme of the remote clients.
	Scheme *runtime.Scheme

	clients Clients
	// built keeps the config of each provider's identity: every pod
	// reconcile asks for it, and a new config each time would also mean a
	// new client and session.
	built sync.Map // provider -> builtConfig
}

type builtConfig struct {
	creds *Credentials
	cfg   *rest.Config
}

// Config returns the REST config of the virtual kubelet in provider, with
// the rates for bursts and write counting. It is shared: callers copy it
// (rest.CopyConfig) before changing it.
func (r *Remotes) Config(ctx context.Context, provider string) (*rest.Config, error) {
	var secret corev1.Secret
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: RemoteSecretName(provider)}, &secret); err != nil {
		return nil, fmt.Errorf("reading the virtual kubelet's identity for %s: %w", provider, err)
	}
	creds, err := VirtualKubeletCredentials(&secret)
	if err != nil {
		return nil, fmt.Errorf("no virtual kubelet identity for %s yet: %w", provider, err)
	}
	if b, ok := r.built.Load(provider); ok && creds.Equal(b.(builtConfig).creds) {
		return b.(builtConfig).cfg, nil
	}
	cfg := creds.RESTConfig()
	cfg.Timeout = 0 // watches; requests are bounded by their contexts
	cfg.QPS, cfg.Burst = remoteQPS, remoteBurst
	cfg.UserAgent = "liqo-virtual-kubelet"
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, provider: provider} })
	r.built.Store(provider, builtConfig{creds: creds, cfg: cfg})
	return cfg, nil
}

// For returns the (cached) client of the virtual kubelet in provider.
func (r *Remotes) For(ctx context.Context, provider string) (client.Client, error) {
	cfg, err := r.Config(ctx, provider)
	if err != nil {
		return nil, err
	}
	return r.clients.For(cfg, r.Scheme)
}

// ClientFor returns the (cached) client of cfg, a config Config returned.
func (r *Remotes) ClientFor(cfg *rest.Config) (client.Client, error) {
	return r.clients.For(cfg, r.Scheme)
}

type countingTransport struct {
	next     http.RoundTripper
	provider string
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		providerWrites.WithLabelValues(t.provider, req.Method, resourceOf(req.URL.Path)).Inc()
	}
	return t.next.RoundTrip(req)
}

// resourceOf returns the resource (and subresource) of an API path:
// /api/v1/namespaces/x/pods/y/status -> pods/status.
func resourceOf(path string) string {
	parts := splitPath(path)
	// skip api/v1 or apis/group/version
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "other"
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "other"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}

func splitPath(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
}
