// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package metricsauth is the filter of the components' metrics endpoints
// (the controller manager's, the gateway's): the caller's bearer token is
// authenticated by the API server (TokenReview) and get on the path
// authorized by it (SubjectAccessReview), verdicts cached, reviews of
// unknown tokens rate-limited.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/liqo-go/liqo/api"
)

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Verdicts are cached: Prometheus scrapes every few seconds with the same
// token, and each verdict otherwise costs two API requests.
const (
	allowedTTL      = time.Minute
	deniedTTL       = 10 * time.Second
	maxVerdicts     = 1024
	reviewTimeout   = 10 * time.Second
	bearerPrefix    = "Bearer "
	metricsVerb     = "get"
	metricsDenied   = "Forbidden: get on this path is not allowed; bind the ClusterRole liqo-metrics-reader"
	metricsUnauthed = "Unauthorized: send a bearer token the API server accepts"
	reviewRate      = 20
	reviewBurst     = 40
)

// errTooManyReviews is a caller refused because too many unknown tokens
// were checked lately.
var errTooManyReviews = errors.New("too many reviews")

// metricsAuth is the metrics endpoint's filter: the caller's bearer token
// is authenticated by the API server (TokenReview) and get on the request
// path authorized by it (SubjectAccessReview), as a kubelet or
// controller-runtime's secure serving does, without the dependencies of
// k8s.io/apiserver.
type metricsAuth struct {
	client client.Client
	// reviews bounds the TokenReviews a caller with unknown tokens can
	// make this ask the API server for.
	reviews *rate.Limiter

	mu       sync.Mutex
	verdicts map[verdictKey]verdict
}

type verdictKey struct {
	token [sha256.Size]byte
	path  string
}

type verdict struct {
	status  int // http.StatusOK, Unauthorized or Forbidden
	expires time.Time
}

// Filter is a metricsserver.Options.FilterProvider. Whoever uses it needs
// the right to create TokenReviews and SubjectAccessReviews.
func Filter(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme(), HTTPClient: httpClient})
	if err != nil {
		return nil, err
	}
	a := &metricsAuth{client: c, reviews: rate.NewLimiter(reviewRate, reviewBurst), verdicts: map[verdictKey]verdict{}}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			status, err := a.check(r)
			switch {
			case errors.Is(err, errTooManyReviews):
				w.Header().Set("Retry-After", "1")
				http.Error(w, "too many callers to check at once; try again", http.StatusTooManyRequests)
			case err != nil:
				log.Error(err, "Checking a metrics caller failed")
				http.Error(w, "cannot check the caller's rights now; try again", http.StatusServiceUnavailable)
			case status == http.StatusUnauthorized:
				http.Error(w, metricsUnauthed, status)
			case status == http.StatusForbidden:
				http.Error(w, metricsDenied, status)
			default:
				next.ServeHTTP(w, r)
			}
		}), nil
	}, nil
}

// check returns the verdict on r's caller.
func (a *metricsAuth) check(r *http.Request) (int, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), bearerPrefix)
	if !ok || token == "" {
		return http.StatusUnauthorized, nil
	}
	key := verdictKey{token: sha256.Sum256([]byte(token)), path: r.URL.Path}
	now := time.Now()
	a.mu.Lock()
	v, cached := a.verdicts[key]
	a.mu.Unlock()
	if cached && now.Before(v.expires) {
		return v.status, nil
	}
	// Only callers never allowed wait for the limiter: a flood of made-up
	// tokens must not lock Prometheus out when its verdict expires.
	if allowedBefore := cached && v.status == http.StatusOK; !allowedBefore && !a.reviews.Allow() {
		return 0, errTooManyReviews
	}
	ctx, cancel := context.WithTimeout(r.Context(), reviewTimeout)
	defer cancel()
	status, err := a.review(ctx, token, r.URL.Path)
	if err != nil {
		return 0, err
	}
	ttl := deniedTTL
	if status == http.StatusOK {
		ttl = allowedTTL
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.verdicts) >= maxVerdicts {
		for k, v := range a.verdicts {
			if !now.Before(v.expires) {
				delete(a.verdicts, k)
			}
		}
	}
	if len(a.verdicts) < maxVerdicts { // full of fresh verdicts: this one is asked for again next time
		a.verdicts[key] = verdict{status: status, expires: now.Add(ttl)}
	}
	return status, nil
}

func (a *metricsAuth) review(ctx context.Context, token, path string) (int, error) {
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := a.client.Create(ctx, tr); err != nil {
		return 0, err
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, nil
	}
	u := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: metricsVerb},
	}}
	if err := a.client.Create(ctx, sar); err != nil {
		return 0, err
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, nil
	}
	return http.StatusOK, nil
}
