// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package deployments embeds the Helm chart of Liqo (deployments/liqo),
// with the manifests generated from markers in its files/ (CRDs and the
// controller manager's ClusterRole) and the admission policies for peers,
// so that liqoctl, the playground and the tests install exactly the chart
// users get.
package deployments

import "embed"

// Chart holds the chart under liqo/: Chart.yaml, values, templates, and
// files/crds/*.yaml, files/rbac/role.yaml, files/admission/*.yaml.
//
//go:embed all:liqo
var Chart embed.FS
