// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package config embeds the generated manifests (CRDs and RBAC) and the admission
// policies so that
// liqoctl, the playground and the tests install exactly what
// `make generate` produced.
package config

import "embed"

// Manifests holds crd/bases/*.yaml, rbac/role.yaml and the admission
// policies admission/*.yaml.
//
//go:embed crd/bases/*.yaml rbac/role.yaml admission/*.yaml
var Manifests embed.FS
