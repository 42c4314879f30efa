// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package v1alpha1 holds the config.liqo.io/v1alpha1 API: the ClusterConfig
// singleton that carries every run-time switch of a cluster's Liqo
// components (discovery, sharing, peering policy and network ranges).
//
// +kubebuilder:object:generate=true
// +groupName=config.liqo.io
package v1alpha1
