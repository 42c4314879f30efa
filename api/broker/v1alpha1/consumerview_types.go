// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConsumerViewName is the only name a ConsumerView may have: there is one
// per consumer, in its tenant namespace in the broker cluster.
const ConsumerViewName = "view"

// MaxViewedProviders bounds the providers of one ConsumerView.
const MaxViewedProviders = 256

// ProviderSight is what a consumer's own check of one provider found.
type ProviderSight struct {
	// ClusterID is the provider's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterID string `json:"clusterID"`
	// Answered: the provider's API server answered the consumer's
	// readiness check, made with the consumer's own identity there (the
	// peering for the network only that the broker's introduction made).
	Answered bool `json:"answered"`
	// Error is why a check failed, for people.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Error string `json:"error,omitempty"`
}

// ConsumerViewSpec is what a consumer itself sees of the providers the
// broker has it use.
type ConsumerViewSpec struct {
	// CheckedAt is when the consumer last checked, by its own clock: for
	// people. The broker times a view by when it saw it change.
	// +optional
	CheckedAt *metav1.Time `json:"checkedAt,omitempty"`
	// Providers checked, one entry each.
	// +listType=map
	// +listMapKey=clusterID
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Providers []ProviderSight `json:"providers,omitempty"`
}

// ConsumerView is a consumer's own view of the providers the broker has it
// use: a second opinion before a failover. The broker makes it, empty, in
// the consumer's tenant namespace in the broker cluster, named view; the
// consumer's controller manager writes it with its own identity there,
// every few seconds. A provider the broker has not reached for the
// failover time, but that answered the consumer's own check in a view
// the broker saw written within that time, counts for that consumer as a
// path the broker lost, not a provider down: it stays in the consumer's
// decision (verdict Kept) and its pods are not moved. It changes that
// consumer's decision only: never another's, the ledger or the catalog.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="Checked",type=date,JSONPath=`.spec.checkedAt`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'view'",message="metadata.name: a consumer's ConsumerView is named view"
type ConsumerView struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ConsumerViewSpec `json:"spec,omitempty"`
}

// ConsumerViewList is a list of ConsumerView.
//
// +kubebuilder:object:root=true
type ConsumerViewList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConsumerView `json:"items"`
}

func init() {
	register(&ConsumerView{}, &ConsumerViewList{})
}
