// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package foundation_test checks the foundation against two real clusters:
// schema validation of the API, the cluster identity, and kwok running
// workloads.
package foundation_test

import (
	"os"
	"testing"

	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

var suite *framework.Suite

// withControlPlane is the cluster that has a control-plane node, as a
// kubeadm cluster does; the other has only workers, as a managed one.
var withControlPlane = playground.ClusterName(1)

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, framework.Options{
		Clusters:        2,
		NodesPerCluster: 1,
		Supervise:       true,
		Customize: func(name string, o *localcluster.Options) {
			o.ControlPlaneNode = name == withControlPlane
		},
	}, &suite))
}

// members returns the cluster with a control-plane node and the one
// without.
func members() (cp, workersOnly *playground.Member) {
	for _, m := range suite.Members {
		if m.Name == withControlPlane {
			cp = m
		} else {
			workersOnly = m
		}
	}
	return cp, workersOnly
}
