// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package clusterconfig

import (
	"testing"
	"time"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
)

func TestEffectiveClusterName(t *testing.T) {
	withName := &configv1alpha1.ClusterConfig{Spec: configv1alpha1.ClusterConfigSpec{ClusterName: "from-spec"}}
	tests := []struct {
		name     string
		override string
		cfg      *configv1alpha1.ClusterConfig
		id       string
		want     string
	}{
		{"flag wins", "from-flag", withName, "0123456789", "from-flag"},
		{"spec next", "", withName, "0123456789", "from-spec"},
		{"derived from the ID", "", &configv1alpha1.ClusterConfig{}, "0123456789", "cluster-01234567"},
		{"short ID", "", nil, "abc", "cluster-abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EffectiveClusterName(tt.override, tt.cfg, tt.id); got != tt.want {
				t.Fatalf("EffectiveClusterName = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStoreNotifiesSubscribers(t *testing.T) {
	var s Store
	if s.Get() != nil {
		t.Fatal("Get before any configuration should be nil")
	}
	ch := s.Subscribe()
	cfg := &configv1alpha1.ClusterConfig{Spec: configv1alpha1.ClusterConfigSpec{ClusterName: "one"}}
	s.set(cfg)
	s.set(cfg) // a second change while one is pending must not block
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("no notification")
	}
	got := s.Get()
	got.Spec.ClusterName = "changed"
	if s.Get().Spec.ClusterName != "one" {
		t.Fatal("Get must return a copy")
	}
}
