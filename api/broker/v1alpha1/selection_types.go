// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SelectionName is the only name a Selection may have: there is one per
// consumer, in the consumer's tenant namespace in the broker cluster.
const SelectionName = "selection"

// MaxSelectedProviders bounds a Selection.
const MaxSelectedProviders = 256

// SelectionSpec is a consumer's choice of providers.
type SelectionSpec struct {
	// Providers are the ClusterIDs of the providers the broker may
	// offload this consumer's pods to. A provider the broker does not
	// serve is kept here and reported in the status.
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Providers []string `json:"providers,omitempty"`

	// Introductions are the providers, besides those enabled, this
	// consumer asks the broker to introduce it to, so that it peers with
	// them directly. Every enabled provider is introduced too.
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Introductions []string `json:"introductions,omitempty"`

	// Policy, when set, makes the broker choose this consumer's providers
	// itself, from what it measures of them (status.decision says which
	// and why); Providers and Excluded then pin providers in and out,
	// unless the policy ignores them. Without a policy, the providers are
	// Providers.
	// +optional
	Policy *Policy `json:"policy,omitempty"`

	// Aggregate, when set, makes this consumer one the broker's
	// aggregator serves: the broker offers it what every provider offers
	// the broker (but the consumer itself, and within ResalePercent), in
	// one Advertisement that names none of them, and places each of its
	// pods on one. The consumer sees one pool: it can neither read nor
	// change this Selection, and is introduced to no provider. Its
	// providers are chosen as by a policy of Count 256 (every provider
	// that answers: spec.policy, if set, narrows them), so a provider
	// that fails is replaced as under any policy. Set by the broker's
	// operator, or for every new consumer by liqo-broker when it runs the
	// aggregator and not the orchestrator.
	// +optional
	Aggregate *Aggregate `json:"aggregate,omitempty"`
	// Excluded are the providers a policy never chooses for this
	// consumer (its toggles pinning them out).
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Excluded []string `json:"excluded,omitempty"`
}

// Placement is how the aggregator spreads a consumer's pods over its
// providers.
// +kubebuilder:validation:Enum=Spread;BinPack
type Placement string

// The placements.
const (
	// PlacementSpread spreads the consumer's pods evenly over the
	// providers (the pod webhook gives each a topology spread over
	// nodes, where the pod has none of its own).
	PlacementSpread Placement = "Spread"
	// PlacementBinPack fills the fullest provider that holds the pod
	// first, leaving the others whole for larger pods.
	PlacementBinPack Placement = "BinPack"
)

// Aggregate is how the broker's aggregator serves one consumer.
type Aggregate struct {
	// ResalePercent is how much of each provider's offer to the broker
	// the broker offers this consumer in turn.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=100
	// +optional
	ResalePercent int32 `json:"resalePercent,omitempty"`
	// Placement of the consumer's pods over the providers.
	// +kubebuilder:default=Spread
	// +optional
	Placement Placement `json:"placement,omitempty"`
	// PoolLabels are the node labels the consumer may choose its pods'
	// providers by (a node selector or affinity on them): when the
	// providers differ in them, the broker offers one pool for each set
	// of values they have, which the consumer sees as a virtual node
	// with those labels, and a pod placed there goes only to providers
	// with them. A pool says what its providers offer together, never
	// which they are (though a pool of one provider says what that one
	// offers). Empty: one pool, with the labels every provider shares.
	// +listType=set
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:items:Enum=topology.kubernetes.io/region;topology.kubernetes.io/zone;kubernetes.io/arch;kubernetes.io/os;node.kubernetes.io/instance-type
	// +optional
	PoolLabels []string `json:"poolLabels,omitempty"`
}

// DefaultResalePercent is an Aggregate's ResalePercent when unset.
const DefaultResalePercent = 100

// Resale returns the percent of the providers' offers resold.
func (a *Aggregate) Resale() int32 {
	if a == nil || a.ResalePercent <= 0 || a.ResalePercent > 100 {
		return DefaultResalePercent
	}
	return a.ResalePercent
}

// IntroductionState is a provider's answer to an introduction.
// +kubebuilder:validation:Enum=Accepted;Refused;Pending
type IntroductionState string

// The states of an introduction.
const (
	IntroductionAccepted IntroductionState = "Accepted"
	IntroductionRefused  IntroductionState = "Refused"
	IntroductionPending  IntroductionState = "Pending"
)

// IntroducedProvider is what the consumer needs to peer with a provider
// the broker introduced it to: what liqoctl add takes, with a token that
// works for this consumer alone.
type IntroducedProvider struct {
	// ClusterID of the provider.
	ClusterID string `json:"clusterID"`
	// ClusterName of the provider.
	// +optional
	ClusterName string `json:"clusterName,omitempty"`
	// AuthURL is the provider's auth service, as the broker reaches it.
	// +optional
	AuthURL string `json:"authURL,omitempty"`
	// Token signs the consumer's identity request (liqoctl add --token).
	// +optional
	Token string `json:"token,omitempty"`
	// State is the provider's answer.
	State IntroductionState `json:"state"`
	// Message says why, when not Accepted.
	// +optional
	Message string `json:"message,omitempty"`
}

// ProviderState is how the orchestrator serves one provider for a
// consumer.
// +kubebuilder:validation:Enum=Serving;Draining;Unavailable
type ProviderState string

// The states of a provider in a Selection's status.
const (
	// ProviderServing: enabled, and the broker offloads to it.
	ProviderServing ProviderState = "Serving"
	// ProviderDraining: disabled, and the consumer's pods are still
	// moving away from it.
	ProviderDraining ProviderState = "Draining"
	// ProviderUnavailable: enabled, but the broker has no virtual node
	// for it (not peered, or not ready).
	ProviderUnavailable ProviderState = "Unavailable"
)

// SelectedProvider is one provider in a Selection's status.
type SelectedProvider struct {
	// ClusterID of the provider.
	ClusterID string `json:"clusterID"`
	// State of the provider for this consumer.
	State ProviderState `json:"state"`
	// Pods of this consumer the broker runs there now.
	Pods int32 `json:"pods"`
	// Held are those of Pods, on a provider the consumer disabled, whose
	// move a PodDisruptionBudget (the consumer's own, which its virtual
	// kubelet copies to the broker) or the policy's MaxMovesPerMinute
	// holds up for now.
	// +optional
	Held int32 `json:"held,omitempty"`
}

// SelectionStatus is what the orchestrator does with a Selection.
type SelectionStatus struct {
	// ObservedGeneration is the generation the status is about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Providers are the enabled providers and those still draining.
	// +listType=map
	// +listMapKey=clusterID
	// +optional
	Providers []SelectedProvider `json:"providers,omitempty"`
	// Introductions are the providers' answers to the broker's
	// introductions of this consumer.
	// +listType=map
	// +listMapKey=clusterID
	// +optional
	Introductions []IntroducedProvider `json:"introductions,omitempty"`
	// Decision is the last choice of providers under spec.policy, and
	// why; absent without a policy.
	// +optional
	Decision *Decision `json:"decision,omitempty"`

	// Conditions: Ready says whether every enabled provider serves and
	// none drains.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Selection is one consumer's choice of the providers the broker's
// orchestrator offloads its pods to. It lives in the consumer's tenant
// namespace in the broker cluster and is named selection.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="Providers",type=string,JSONPath=`.spec.providers`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'selection'",message="metadata.name: a consumer's Selection is named selection"
type Selection struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SelectionSpec   `json:"spec,omitempty"`
	Status SelectionStatus `json:"status,omitempty"`
}

// SelectionList is a list of Selection.
//
// +kubebuilder:object:root=true
type SelectionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Selection `json:"items"`
}

func init() {
	register(&Selection{}, &SelectionList{})
}

// Aggregated says whether the broker's aggregator serves this consumer.
func (s *Selection) Aggregated() bool { return s.Spec.Aggregate != nil }

// Policy returns the policy the consumer's providers are chosen by:
// spec.policy, or for an aggregated consumer that sets none, every
// provider that answers (Count 256); nil when the consumer chooses by
// hand.
func (s *Selection) Policy() *Policy {
	switch {
	case s.Spec.Policy != nil:
		return s.Spec.Policy
	case s.Aggregated():
		return &Policy{Count: MaxSelectedProviders, Toggles: TogglesPin}
	}
	return nil
}

// InUse are the providers the broker offloads the consumer's pods to:
// under a policy, those of its last decision; otherwise, and under a
// policy not decided on yet (being made, or invalid from the start),
// those it enabled: never none for want of a decision.
func (s *Selection) InUse() []string {
	if s.Policy() != nil && s.Status.Decision != nil {
		return s.Status.Decision.Chosen
	}
	return s.Spec.Providers
}

// CriterionCapacity names the criterion a provider fails when it cannot
// hold its share of the consumer's requests.
const CriterionCapacity = "capacity"

// Offered are the providers whose resources the broker offers the
// consumer, and so what its quota here admits: without a policy, or
// before a decision, those in use; under a decision, every provider the
// policy would let it use, chosen or not: all but those disabled by hand
// and those failing a criterion other than capacity. The offer must not
// hang on the consumer's requests, which are measured by the pods the
// offer admits: an offer cut to the providers chosen for today's pods
// would refuse tomorrow's, and the broker, not seeing them, would never
// choose more. The pods beyond what those chosen hold wait here, counted
// in the next decision's demand.
func (s *Selection) Offered() []string {
	if s.Policy() == nil || s.Status.Decision == nil {
		return s.InUse()
	}
	out := slices.Clone(s.Status.Decision.Chosen)
	for _, p := range s.Status.Decision.Providers {
		switch {
		case p.Verdict == VerdictExcluded:
		case p.Verdict == VerdictFiltered && p.Criterion != CriterionCapacity:
		case !slices.Contains(out, p.ClusterID):
			out = append(out, p.ClusterID)
		}
	}
	slices.Sort(out)
	return out
}
