// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

// Labels and annotations the broker's orchestrator sets on the namespaces
// the broker cluster makes for its consumers; the broker cluster's
// controller manager reads them (the pod webhook, the admission policy of
// consumers' pods). Only the broker writes them: a consumer has no right
// on namespaces.
const (
	// OrchestratedLabel marks a namespace whose consumer's pods the
	// broker re-offloads: they may tolerate the virtual nodes' taint.
	OrchestratedLabel = "broker.liqo.io/orchestrated"
	// OrchestratedValue is OrchestratedLabel's value.
	OrchestratedValue = "true"
	// ProvidersAnnotation lists, comma-separated, the ClusterIDs of the
	// providers an orchestrated namespace's new pods may go to: the
	// consumer's enabled providers that the broker serves. Empty: none.
	ProvidersAnnotation = "broker.liqo.io/providers"
)
