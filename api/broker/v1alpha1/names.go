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
	// AggregatedLabel, "true" on a namespace the broker orchestrates for
	// a consumer its aggregator serves, and on its NamespaceOffloading,
	// keeps the providers out of what the consumer sees of its pods: the
	// broker's virtual kubelet says nowhere which provider runs one.
	AggregatedLabel = "broker.liqo.io/aggregated"
	// PackOrderAnnotation lists, comma-separated and fullest first, the
	// providers of an aggregated namespace whose pods are bin-packed:
	// the pod webhook prefers them in that order.
	PackOrderAnnotation = "broker.liqo.io/pack-order"
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

// What lets a consumer's own PodDisruptionBudgets bound the broker's moves
// of its pods.
const (
	// OrchestratorProperty, "true" in the Advertisement a broker offers a
	// consumer it keeps a Selection for, tells the consumer's virtual
	// kubelet to copy its PodDisruptionBudgets to the namespaces it
	// offloads there.
	OrchestratorProperty = "broker.liqo.io/orchestrator"
	// BudgetsClusterRole, bound by the broker to the consumer's virtual
	// kubelet (liqo-virtual-kubelet-<id>) in each namespace it
	// orchestrates, and nowhere else, lets it keep PodDisruptionBudgets
	// there.
	BudgetsClusterRole = "liqo-broker-budgets"
)
