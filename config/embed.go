// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package config embeds the generated manifests (CRDs and RBAC) so that
// liqoctl, the playground and the tests install exactly what
// `make generate` produced.
package config

import "embed"

// Manifests holds crd/bases/*.yaml and rbac/role.yaml.
//
//go:embed crd/bases/*.yaml rbac/role.yaml
var Manifests embed.FS
