// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster"
)

// installed installs Liqo's CRDs and RBAC in c and returns an admin
// client of it.
func installed(t *testing.T, c *localcluster.Cluster) client.Client {
	t.Helper()
	if err := install.Install(t.Context(), c.RESTConfig, install.Options{}); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
