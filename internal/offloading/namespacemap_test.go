// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"strings"
	"testing"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
)

func TestReservedNamespace(t *testing.T) {
	for name, want := range map[string]bool{
		"default": true, "liqo": true, "liqo-tenant-x": true, "liqo-anything": true, "kube-system": true, "kube-squat": true,
		"demo": false, "demo-abcdef12": false, "my-liqo-app": false, "kubernetes": false,
	} {
		if got := ReservedNamespace(name); got != want {
			t.Errorf("ReservedNamespace(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestGeneratedNamespaceName: a consumer's generated names end in 8 hex
// digits of its own: its ClusterID's first 8 characters when they are
// (a UUID's are), else a hash of it, so that a consumer that picks its
// ClusterID cannot spell a name a provider would use.
func TestGeneratedNamespaceName(t *testing.T) {
	for _, tc := range []struct{ local, consumer, want string }{
		{"web", "6ec30b09-c8cc-43cd-850e-3a58d73d75e8", "web-6ec30b09"},
		{"web", "6EC30B09-C8CC", "web-6ec30b09"},
		{"cert", "manager-1", ""},
		{"cert", "manager", ""},
		{"a", "abc", ""},
	} {
		got := GeneratedNamespaceName(tc.local, tc.consumer)
		base, suffix, _ := strings.Cut(got, "-")
		if base != tc.local || len(suffix) != 8 || strings.Trim(suffix, "0123456789abcdef") != "" || (tc.want != "" && got != tc.want) {
			t.Errorf("GeneratedNamespaceName(%q, %q) = %q, want %q and 8 hex digits", tc.local, tc.consumer, got, tc.local)
		}
	}
	if got := GeneratedNamespaceName(strings.Repeat("x", 70), "6ec30b09"); len(got) > 63 {
		t.Errorf("a long name gives %q, %d characters", got, len(got))
	}
}

func TestOffloadedNamespacesAllows(t *testing.T) {
	var none *discoveryv1alpha1.OffloadedNamespaces
	allowed := &discoveryv1alpha1.OffloadedNamespaces{Names: []string{"shared"}, Prefixes: []string{"team-"}}
	for name, want := range map[string]bool{"shared": true, "team-a": true, "team": false, "sharedx": false, "cert-manager": false} {
		if got := allowed.Allows(name); got != want {
			t.Errorf("Allows(%q) = %v, want %v", name, got, want)
		}
		if none.Allows(name) {
			t.Errorf("no list allows %q", name)
		}
	}
}
