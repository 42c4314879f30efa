// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/liqo-go/liqo/api"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/kubeauth"
	"github.com/liqo-go/liqo/internal/virtualkubelet/node"
)

// TestOpenAPIListsEveryRoute: the OpenAPI document the broker serves
// describes exactly the endpoints it answers, with their methods.
func TestOpenAPIListsEveryRoute(t *testing.T) {
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi.json: %v (version %q)", err, doc.OpenAPI)
	}
	var served []string
	for _, rt := range (&Server{}).routes() {
		method, path, _ := strings.Cut(rt.pattern, " ")
		served = append(served, strings.ToLower(method)+" "+path)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(served)
	slices.Sort(documented)
	if !slices.Equal(served, documented) {
		t.Errorf("served %v\ndocumented %v", served, documented)
	}
}

// FuzzAPI: whatever a caller sends, the API answers with a JSON body and
// a status code it documents, and no handler panics.
func FuzzAPI(f *testing.F) {
	for _, seed := range []struct{ method, path, token, body string }{
		{"GET", "/api/clusters", "", ""},
		{"GET", "/api/v1/clusters/provider-1", "t", ""},
		{"GET", "/api/v1/clusters/%00", "", ""},
		{"POST", "/api/toggle?id=x&enable=maybe", "t", "{}"},
		{"GET", "/api/v1/openapi.json", "", ""},
		{"GET", "/api//clusters/../x", "", ""},
		{"CONNECT", "/api/clusters", "", ""},
		{"GET", "/", "", ""},
		{"GET", "/ui/app.js", "", ""},
		{"GET", "/ui/..%2fopenapi.json", "", ""},
		{"GET", "/api/v1/events", "", ""},
	} {
		f.Add(seed.method, seed.path, seed.token, seed.body)
	}
	scheme := api.NewScheme()
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&corev1.Pod{}, node.PodsByNodeField, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithObjects(&discoveryv1alpha1.ForeignCluster{}).Build()
	s := &Server{Reader: c, Writer: c, Reviewer: kubeauth.NewReviewer(c), Modes: Modes{Catalog: true, Orchestrator: true}, PublicCatalog: true,
		EventsLifetime: time.Nanosecond}
	h := s.Handler()
	documented := []int{http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusServiceUnavailable}
	f.Fuzz(func(t *testing.T, method, path, token, body string) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequestWithContext(t.Context(), method, "http://broker"+path, strings.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		before := testutil.ToFloat64(panics)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if testutil.ToFloat64(panics) != before {
			t.Fatalf("%s %q panicked", method, path)
		}
		if !slices.Contains(documented, rec.Code) {
			t.Fatalf("%s %q: status %d", method, path, rec.Code)
		}
		ct := rec.Header().Get("Content-Type")
		if rec.Code == http.StatusOK && (ct == "text/event-stream" || strings.HasPrefix(ct, "text/html") ||
			strings.HasPrefix(ct, "text/javascript") || strings.HasPrefix(ct, "text/css")) {
			return // the event stream, the dashboard's page and its files
		}
		if ct != "application/json" && rec.Code != http.StatusMethodNotAllowed {
			t.Fatalf("%s %q: Content-Type %q", method, path, ct)
		}
		if rec.Code != http.StatusMethodNotAllowed && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %q: body %q is not JSON", method, path, rec.Body.String())
		}
	})
}
