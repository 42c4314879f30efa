// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package v1alpha1 holds the discovery.liqo.io/v1alpha1 API: ForeignCluster
// (one per remote cluster this cluster knows), SearchDomain (a DNS domain to
// browse for clusters) and PeeringRequest (a consumer's request to peer,
// created in the provider).
//
// +kubebuilder:object:generate=true
// +groupName=discovery.liqo.io
package v1alpha1
