// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import "testing"

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
