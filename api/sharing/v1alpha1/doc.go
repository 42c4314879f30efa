// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package v1alpha1 holds the sharing.liqo.io/v1alpha1 API: the Advertisement
// a provider writes into a consumer's tenant namespace to offer resources.
//
// +kubebuilder:object:generate=true
// +groupName=sharing.liqo.io
package v1alpha1
