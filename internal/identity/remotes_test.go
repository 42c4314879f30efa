// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package identity

import "testing"

func TestResourceOf(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/x/pods":                                       "pods",
		"/api/v1/namespaces/x/pods/y":                                     "pods",
		"/api/v1/namespaces/x/pods/y/status":                              "pods/status",
		"/apis/offloading.liqo.io/v1alpha1/namespaces/t/namespacemaps/nm": "namespacemaps",
		"/api/v1/namespaces/x":                                            "namespaces",
		"/api/v1/nodes/n":                                                 "nodes",
		"/healthz":                                                        "other",
	} {
		if got := resourceOf(path); got != want {
			t.Errorf("resourceOf(%q) = %q, want %q", path, got, want)
		}
	}
}
