// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package auth

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// IdentitySource returns the identity to serve; it is asked on every
// request, so that a changed cluster name or CA shows at once.
type IdentitySource func(ctx context.Context) (*Identity, error)

// Server is the auth service. It implements manager.Runnable.
type Server struct {
	// Listener accepts the service's connections; Serve wraps it in TLS.
	Listener net.Listener
	// Certificate is the serving certificate.
	Certificate tls.Certificate
	// Identity provides what /ids returns.
	Identity IdentitySource
	// Issuer issues peering identities; nil refuses every exchange.
	Issuer Issuer
	// Token returns this cluster's peering token.
	Token func(ctx context.Context) (string, error)
	// Introduction returns the token of the accepted introduction of
	// consumer by introducer, or "" when there is none; nil accepts no
	// introductions.
	Introduction func(ctx context.Context, introducer, consumer string) (string, error)
	// Limiter bounds the token exchanges; nil means 20 a second, in bursts
	// of 40.
	Limiter *rate.Limiter
	// PerSource bounds the exchanges of one source address, checked
	// before Limiter so that one flooding host cannot spend every peer's
	// share; zero means 2 a second, in bursts of PerSourceBurst (10 when
	// zero).
	PerSource      rate.Limit
	PerSourceBurst int

	nonces    nonceCache
	sources   sourceLimits
	limitOnce sync.Once
	tokenMu   sync.Mutex
	token     string
	tokenRead time.Time
}

var refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "liqo_auth_refused_total",
	Help: "Peering identity requests the auth service refused, by reason.",
}, []string{"reason"})

var issued = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "liqo_auth_identities_issued_total",
	Help: "Peering identities the auth service issued.",
})

func init() { metrics.Registry.MustRegister(refusals, issued) }

func (s *Server) countRefusal(reason string) { refusals.WithLabelValues(reason).Inc() }

// Exchanges are bounded: each may sign a certificate, and a flood must not
// turn into a flood of CertificateSigningRequests.
const (
	exchangesPerSecond = 20
	exchangeBurst      = 40
)

// Defaults of the per-source bound, and how many sources it remembers.
const (
	sourceExchangesPerSecond = 2
	sourceExchangeBurst      = 10
	maxSources               = 4096
)

func (s *Server) allowExchange(remoteAddr string) bool {
	s.limitOnce.Do(func() {
		if s.Limiter == nil {
			s.Limiter = rate.NewLimiter(exchangesPerSecond, exchangeBurst)
		}
		if s.PerSource == 0 {
			s.PerSource = sourceExchangesPerSecond
		}
		if s.PerSourceBurst == 0 {
			s.PerSourceBurst = sourceExchangeBurst
		}
	})
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	return s.sources.allow(host, s.PerSource, s.PerSourceBurst) && s.Limiter.Allow()
}

// sourceLimits keeps one limiter per source address, at most maxSources:
// past that it starts afresh (the global limiter still bounds the whole).
type sourceLimits struct {
	mu    sync.Mutex
	bySrc map[string]*rate.Limiter
}

func (l *sourceLimits) allow(src string, limit rate.Limit, burst int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.bySrc[src]
	if !ok {
		if l.bySrc == nil || len(l.bySrc) >= maxSources {
			l.bySrc = map[string]*rate.Limiter{}
		}
		lim = rate.NewLimiter(limit, burst)
		l.bySrc[src] = lim
	}
	return lim.Allow()
}

// Handler returns the service's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+IdentityPath, s.serveIdentity)
	mux.HandleFunc("POST "+PeeringIdentityPath, s.servePeeringIdentity)
	return mux
}

func (s *Server) serveIdentity(w http.ResponseWriter, r *http.Request) {
	id, err := s.Identity(r.Context())
	if err != nil {
		ctrl.LoggerFrom(r.Context()).Error(err, "Cannot serve the cluster identity")
		http.Error(w, "identity not available yet", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(id) // the client sees a short body if this fails
}

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	if s.Listener == nil || s.Identity == nil {
		return errors.New("auth.Server needs Listener and Identity")
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		// An exchange waits for the cluster's signer (at most 20 s).
		WriteTimeout:   40 * time.Second,
		MaxHeaderBytes: 16 << 10,
		TLSConfig:      &tls.Config{Certificates: []tls.Certificate{s.Certificate}, MinVersion: tls.VersionTLS12},
		BaseContext:    func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(s.Listener, "", "") }()
	select {
	case err := <-errc:
		return fmt.Errorf("auth service: %w", err)
	case <-ctx.Done():
		// ctx is done: give the requests under way a few seconds more.
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

// NeedLeaderElection is false: every replica serves the identity.
func (s *Server) NeedLeaderElection() bool { return false }
