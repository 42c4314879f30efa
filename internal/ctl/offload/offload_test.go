// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offload

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

func TestClusterSelector(t *testing.T) {
	tests := []struct {
		selector string
		matches  map[string]string
		misses   map[string]string
	}{
		{"region=eu", map[string]string{"region": "eu"}, map[string]string{"region": "us"}},
		{"region in (eu,us),!gpu", map[string]string{"region": "us"}, map[string]string{"region": "us", "gpu": "yes"}},
		{"tier!=cheap,zone", map[string]string{"zone": "a"}, map[string]string{"zone": "a", "tier": "cheap"}},
	}
	for _, tt := range tests {
		ns, err := ClusterSelector(tt.selector)
		if err != nil {
			t.Fatalf("%q: %v", tt.selector, err)
		}
		sel, err := nodeaffinity.NewNodeSelector(ns)
		if err != nil {
			t.Fatalf("%q: %v", tt.selector, err)
		}
		node := func(l map[string]string) *corev1.Node { n := &corev1.Node{}; n.Labels = l; return n }
		if !sel.Match(node(tt.matches)) || sel.Match(node(tt.misses)) {
			t.Errorf("%q: matches %v: %v, misses %v: %v", tt.selector, tt.matches, sel.Match(node(tt.matches)), tt.misses, sel.Match(node(tt.misses)))
		}
	}
	if _, err := ClusterSelector("region in (eu"); err == nil {
		t.Error("an invalid selector is accepted")
	}
	if ns, err := ClusterSelector(""); err != nil || ns != nil {
		t.Errorf("empty selector: %v %v, want nil", ns, err)
	}
}
