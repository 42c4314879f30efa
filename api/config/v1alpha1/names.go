// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

// ConditionReady is True on the ClusterConfig when the configuration is in
// force.
const ConditionReady = "Ready"

// SpecHashAnnotation records, on an object the controller manager keeps
// (an admission policy), the hash of the spec it last wrote, so that the
// API server's defaults are not taken for drift.
const SpecHashAnnotation = "config.liqo.io/spec-hash"

// DefaultExternalCIDR is the external range of a cluster whose
// ClusterConfig names none (the API server defaults it to this too).
const DefaultExternalCIDR = "10.70.0.0/16"
