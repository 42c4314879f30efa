// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package v1alpha1 holds the offloading.liqo.io/v1alpha1 API: the
// NamespaceOffloading that says which namespaces offload where.
//
// +kubebuilder:object:generate=true
// +groupName=offloading.liqo.io
package v1alpha1
