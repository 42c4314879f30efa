// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package kubeauth

import (
	"errors"
	"net/http"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/liqo-go/liqo/api"
)

const (
	metricsVerb     = "get"
	metricsDenied   = "Forbidden: get on this path is not allowed; bind the ClusterRole liqo-metrics-reader"
	metricsUnauthed = "Unauthorized: send a bearer token the API server accepts"
)

// Filter is the metrics endpoints' metricsserver.Options.FilterProvider:
// get on the request path, authorized by the API server. Whoever uses it
// needs the right to create TokenReviews and SubjectAccessReviews.
func Filter(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme(), HTTPClient: httpClient})
	if err != nil {
		return nil, err
	}
	a := NewReviewer(c)
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			v, err := a.Check(r, Attributes{NonResource: &authorizationv1.NonResourceAttributes{Path: r.URL.Path, Verb: metricsVerb}})
			switch {
			case errors.Is(err, ErrTooManyReviews):
				w.Header().Set("Retry-After", "1")
				http.Error(w, err.Error(), http.StatusTooManyRequests)
			case err != nil:
				log.Error(err, "Checking a metrics caller failed")
				http.Error(w, "cannot check the caller's rights now; try again", http.StatusServiceUnavailable)
			case v.Status == http.StatusUnauthorized:
				http.Error(w, metricsUnauthed, v.Status)
			case v.Status == http.StatusForbidden:
				http.Error(w, metricsDenied, v.Status)
			default:
				next.ServeHTTP(w, r)
			}
		}), nil
	}, nil
}
