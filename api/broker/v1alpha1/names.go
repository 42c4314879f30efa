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

// The names of what lets a consumer's user use its selection (liqoctl
// broker login), in the consumer's tenant namespace in the broker.
const (
	// ConsumerServiceAccount is the service account whose tokens a
	// consumer's users call the broker's API with; it is bound to the
	// ClusterRole of the same name (get and update on the Selection).
	ConsumerServiceAccount = "liqo-broker-consumer"
	// LoginClusterRole lets the consumer's own identity in the broker
	// (liqo-consumer-<id>) request tokens of ConsumerServiceAccount.
	LoginClusterRole = "liqo-broker-login"
)
