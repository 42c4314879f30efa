// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package broker is the resource broker (docs/broker.md): a cluster
// running Liqo and liqo-broker, which offers the clusters peered with it
// a catalog of the providers it knows and orchestrates consumers' pods
// over the providers each consumer selected. Its HTTP API (Server) keeps
// the original proof of concept's endpoints (GET /api/clusters,
// /api/toggle) and adds a versioned API under /api/v1; callers are
// authenticated and authorized by the broker cluster's API server.
package broker

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	"github.com/liqo-go/liqo/internal/kubeauth"
)

// Limits of the HTTP API.
const (
	// MaxBodyBytes bounds a request body: 413 beyond.
	MaxBodyBytes = 64 << 10
	// requestTimeout bounds the work of one request.
	requestTimeout = 30 * time.Second
)

// Modes are the services a broker offers.
type Modes struct {
	Catalog, Orchestrator, Aggregator bool
}

// String lists the modes on, comma-separated.
func (m Modes) String() string {
	var s string
	for _, x := range []struct {
		on   bool
		name string
	}{{m.Catalog, "catalog"}, {m.Orchestrator, "orchestrator"}, {m.Aggregator, "aggregator"}} {
		if x.on {
			if s != "" {
				s += ","
			}
			s += x.name
		}
	}
	return s
}

// CatalogResource is the resource a caller needs get on, in group
// broker.liqo.io, to read the catalog when it is not public (the chart's
// ClusterRole liqo-broker-catalog-reader grants it). There is no such
// kind: RBAC rules may name any resource, and the API server authorizes
// it like any other.
const CatalogResource = "catalog"

// Server is the broker's HTTP API, a manager.Runnable.
type Server struct {
	// Namespace is the Liqo namespace, where the providers'
	// Measurements are.
	Namespace string
	// Now is injectable for tests.
	Now func() time.Time
	// Reader reads the broker cluster's ForeignClusters, Advertisements,
	// nodes, pods and Selections (cached).
	Reader client.Reader
	// Writer reads and changes Selections, uncached: a change is made
	// on what the API server holds.
	Writer client.Client
	// Reviewer authenticates and authorizes callers.
	Reviewer *kubeauth.Reviewer
	// Modes are the services on.
	Modes Modes
	// PublicCatalog lets anonymous callers read the catalog.
	PublicCatalog bool
	// Listener is where the API is served.
	Listener net.Listener
	// EventsInterval is how often an event stream looks for a change;
	// EventsLifetime how long one lasts (defaults when zero).
	EventsInterval, EventsLifetime time.Duration

	handlerOnce sync.Once
	handler     http.Handler
}

var requests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "liqo_broker_http_requests_total",
	Help: "Requests to the broker's HTTP API, by route and status code.",
}, []string{"route", "code"})

var requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "liqo_broker_http_request_duration_seconds",
	Help:    "How long the broker's HTTP API took to answer, by route.",
	Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
}, []string{"route"})

var panics = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "liqo_broker_http_panics_total",
	Help: "Requests whose handler panicked (answered 500): each one is a bug to report.",
})

func init() { metrics.Registry.MustRegister(requests, requestDuration, panics) }

// route is one endpoint of the API.
type route struct {
	pattern string // as http.ServeMux takes it
	name    string // for metrics
	mode    func(Modes) bool
	handle  func(w http.ResponseWriter, r *http.Request) error
	// stream is an answer that lasts (server-sent events): bounded by
	// the stream's lifetime, not requestTimeout.
	stream bool
}

// routes are the API's endpoints; the OpenAPI document lists the same
// (TestOpenAPIListsEveryRoute).
func (s *Server) routes() []route {
	catalog := func(m Modes) bool { return m.Catalog || m.Orchestrator }
	orchestrator := func(m Modes) bool { return m.Orchestrator }
	always := func(Modes) bool { return true }
	return []route{
		{pattern: "GET /api/clusters", name: "clusters", mode: catalog, handle: s.clusters},
		{pattern: "GET /api/toggle", name: "toggle", mode: orchestrator, handle: s.toggle},
		{pattern: "POST /api/toggle", name: "toggle", mode: orchestrator, handle: s.toggle},
		{pattern: "GET /api/v1/selection", name: "v1.selection", mode: orchestrator, handle: s.getSelection},
		{pattern: "PUT /api/v1/selection", name: "v1.selection", mode: orchestrator, handle: s.putSelection},
		{pattern: "PUT /api/v1/selection/policy", name: "v1.policy", mode: orchestrator, handle: s.putPolicy},
		{pattern: "DELETE /api/v1/selection/policy", name: "v1.policy", mode: orchestrator, handle: s.deletePolicy},
		{pattern: "GET /api/v1/clusters", name: "v1.clusters", mode: catalog, handle: s.v1Clusters},
		{pattern: "GET /api/v1/clusters/{id}", name: "v1.cluster", mode: catalog, handle: s.v1Cluster},
		{pattern: "GET /api/v1/clusters/{id}/introduction", name: "v1.introduction", mode: catalog, handle: s.getIntroduction},
		{pattern: "POST /api/v1/clusters/{id}/introduction", name: "v1.introduction", mode: catalog, handle: s.postIntroduction},
		{pattern: "GET /api/v1/events", name: "v1.events", mode: catalog, handle: s.events, stream: true},
		{pattern: "GET /api/v1/openapi.json", name: "openapi", mode: always, handle: serveOpenAPI},
	}
}

// Handler returns the API's handler, built once (callers may ask from
// several goroutines: the server and tests).
func (s *Server) Handler() http.Handler {
	s.handlerOnce.Do(func() { s.handler = s.buildHandler() })
	return s.handler
}

func (s *Server) buildHandler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range append(s.routes(), s.dashboardRoutes()...) {
		if !rt.mode(s.Modes) {
			continue
		}
		mux.Handle(rt.pattern, s.wrap(rt))
	}
	// Anything else, and a path the mux would redirect to its clean form
	// (an HTML answer): a JSON 404, as the routes answer.
	other := s.wrap(route{name: "other", handle: func(_ http.ResponseWriter, r *http.Request) error {
		return errNotFound(fmt.Sprintf("no endpoint %s %s on this broker (modes %s)", r.Method, r.URL.Path, s.Modes))
	}})
	mux.Handle("/", other)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect || r.URL.Path == "" || path.Clean(r.URL.Path) != r.URL.Path {
			other.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// Start implements manager.Runnable: it serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("broker-api")
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       requestTimeout,
		WriteTimeout:      requestTimeout + 5*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.Listener) }()
	log.Info("Serving the broker's API", "address", s.Listener.Addr().String(), "modes", s.Modes.String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	return nil
}

// NeedLeaderElection is false: every replica answers.
func (s *Server) NeedLeaderElection() bool { return false }

// statusRecorder remembers the status code written.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (flushes and
// deadlines of event streams).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// wrap bounds the request, answers errors as Kubernetes Status objects,
// turns a panic into a 500, and counts.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		timeout := requestTimeout
		if rt.stream {
			_, lifetime := s.eventsTiming()
			timeout = lifetime + streamWriteTimeout
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		r = r.WithContext(ctx)
		r.Body = http.MaxBytesReader(rec, r.Body, MaxBodyBytes)
		defer func() {
			if p := recover(); p != nil {
				panics.Inc()
				ctrl.Log.WithName("broker-api").Error(fmt.Errorf("%v", p), "A handler panicked", "route", rt.name, "path", r.URL.Path)
				if rec.code == 0 {
					writeError(rec, &apiError{code: http.StatusInternalServerError, reason: metav1.StatusReasonInternalError, message: "internal error"})
				}
			}
			requests.WithLabelValues(rt.name, strconv.Itoa(rec.code)).Inc()
			requestDuration.WithLabelValues(rt.name).Observe(time.Since(start).Seconds())
		}()
		if err := rt.handle(rec, r); err != nil {
			var ae *apiError
			var tooLarge *http.MaxBytesError
			switch {
			case errors.As(err, &ae):
			case errors.As(err, &tooLarge):
				ae = &apiError{code: http.StatusRequestEntityTooLarge, reason: metav1.StatusReasonRequestEntityTooLarge,
					message: fmt.Sprintf("the request body is larger than %d bytes", MaxBodyBytes)}
			case errors.Is(err, kubeauth.ErrTooManyReviews):
				rec.Header().Set("Retry-After", "1")
				ae = &apiError{code: http.StatusTooManyRequests, reason: metav1.StatusReasonTooManyRequests, message: err.Error()}
			default:
				ctrl.Log.WithName("broker-api").Error(err, "Answering a request failed", "route", rt.name)
				ae = &apiError{code: http.StatusServiceUnavailable, reason: metav1.StatusReasonServiceUnavailable,
					message: "the broker cannot answer now; try again"}
			}
			writeError(rec, ae)
		}
	})
}

// apiError is an answer other than 2xx.
type apiError struct {
	code    int
	reason  metav1.StatusReason
	message string
}

func (e *apiError) Error() string { return e.message }

func errNotFound(msg string) error {
	return &apiError{code: http.StatusNotFound, reason: metav1.StatusReasonNotFound, message: msg}
}

func errUnauthorized() error {
	return &apiError{code: http.StatusUnauthorized, reason: metav1.StatusReasonUnauthorized,
		message: "send a bearer token the broker cluster's API server accepts (liqoctl broker login prints one)"}
}

func errBadRequest(msg string) error {
	return &apiError{code: http.StatusBadRequest, reason: metav1.StatusReasonBadRequest, message: msg}
}

// writeError answers err as a Kubernetes Status, as kubectl and client
// libraries read errors.
func writeError(w http.ResponseWriter, err *apiError) {
	writeJSON(w, err.code, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: err.message, Reason: err.reason, Code: int32(err.code), //nolint:gosec // an HTTP status code
	})
}

// writeJSON answers v as JSON with code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		code, body = http.StatusInternalServerError, []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"internal error","code":500}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

// authorize checks that the caller may do verb on the broker's resource
// (namespaced in ns when ns is set): nil, or the 401 or 403 to answer.
func (s *Server) authorize(r *http.Request, verb, resource, ns, name string) error {
	v, err := s.Reviewer.Check(r, kubeauth.Attributes{Resource: &authorizationv1.ResourceAttributes{
		Verb: verb, Group: brokerv1alpha1.GroupVersion.Group, Resource: resource, Namespace: ns, Name: name,
	}})
	if err != nil {
		return err
	}
	switch v.Status {
	case http.StatusOK:
		return nil
	case http.StatusUnauthorized:
		return errUnauthorized()
	default:
		what := resource
		if ns != "" {
			what = ns + "/" + resource
		}
		return &apiError{code: http.StatusForbidden, reason: metav1.StatusReasonForbidden,
			message: fmt.Sprintf("user %q may not %s %s.%s", v.User.Username, verb, what, brokerv1alpha1.GroupVersion.Group)}
	}
}

//go:embed openapi.json
var openAPI []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openAPI)
	return err
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
