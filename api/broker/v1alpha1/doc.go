// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package v1alpha1 holds the broker.liqo.io/v1alpha1 API: what a broker
// cluster keeps for each consumer it serves, in that consumer's tenant
// namespace (the Selection of the providers its pods may be orchestrated
// to).
//
// +kubebuilder:object:generate=true
// +groupName=broker.liqo.io
package v1alpha1
