// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package kubeauth_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/liqo-go/liqo/api"
	"github.com/liqo-go/liqo/internal/kubeauth"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestReviewer: a caller is who the API server says its token is for, and
// may do what the API server's RBAC lets that user do: a token bound to a
// service account with get on pods in one namespace is allowed that, and
// refused the same in another namespace; a made-up token and no token are
// unauthenticated.
func TestReviewer(t *testing.T) {
	cfg := envtest.Start(t, "kubeauth")
	ctx := t.Context()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "reader"}}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}},
		sa,
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "pod-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "pod-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "team-a", Name: "reader"}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tr := &authenticationv1.TokenRequest{}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	// Every TokenReview the reviewer asks for, counted on its way.
	tokenReviews := 0
	counted := interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*authenticationv1.TokenReview); ok {
				tokenReviews++
			}
			return cl.Create(ctx, obj, opts...)
		},
	})
	r := kubeauth.NewReviewer(counted)
	getPods := func(ns string) kubeauth.Attributes {
		return kubeauth.Attributes{Resource: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Namespace: ns}}
	}
	request := func(token string) *http.Request {
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return req
	}
	for _, tc := range []struct {
		name, token, ns string
		want            int
	}{
		{"its own namespace", tr.Status.Token, "team-a", http.StatusOK},
		{"its own namespace, from the cache", tr.Status.Token, "team-a", http.StatusOK},
		{"another namespace", tr.Status.Token, "team-b", http.StatusForbidden},
		{"a made-up token", "made-up", "team-a", http.StatusUnauthorized},
		{"no token", "", "team-a", http.StatusUnauthorized},
	} {
		v, err := r.Check(request(tc.token), getPods(tc.ns))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if v.Status != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, v.Status, tc.want)
		}
		if want := "system:serviceaccount:team-a:reader"; tc.want != http.StatusUnauthorized && v.User.Username != want {
			t.Errorf("%s: user %q, want %q", tc.name, v.User.Username, want)
		}
	}
	// The service account's token was authenticated once for its three
	// checks, the made-up one once: who a token is for is remembered
	// apart from what it asks.
	if tokenReviews != 2 {
		t.Errorf("%d TokenReviews, want 2", tokenReviews)
	}
}

// TestToken: the bearer scheme is read in any case, as the API server
// reads it; anything else is no token.
func TestToken(t *testing.T) {
	for header, want := range map[string]string{
		"Bearer abc":  "abc",
		"bearer abc":  "abc",
		"BEARER  abc": "abc",
		"Bearer ":     "",
		"Basic abc":   "",
		"Bearerabc":   "",
		"":            "",
	} {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		if got := kubeauth.Token(r); got != want {
			t.Errorf("Token(%q) = %q, want %q", header, got, want)
		}
	}
}
