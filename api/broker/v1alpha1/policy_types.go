// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UptimeWindow is a window the broker keeps a provider's uptime over.
// +kubebuilder:validation:Enum="1h";"24h";"7d"
type UptimeWindow string

// The uptime windows.
const (
	Window1h  UptimeWindow = "1h"
	Window24h UptimeWindow = "24h"
	Window7d  UptimeWindow = "7d"
)

// Windows are the uptime windows, shortest first.
var Windows = []UptimeWindow{Window1h, Window24h, Window7d}

// PricePeriod is what a price is per.
// +kubebuilder:validation:Enum=Hour;Month
type PricePeriod string

// The price periods. A month is 730 hours when prices are compared.
const (
	PerHour  PricePeriod = "Hour"
	PerMonth PricePeriod = "Month"
)

// HoursPerMonth is what a monthly price is divided by to compare it with
// an hourly one.
const HoursPerMonth = 730

// Toggles says what a consumer's hand toggles do under a policy.
// +kubebuilder:validation:Enum=Pin;Ignore
type Toggles string

// The ways of hand toggles.
const (
	// TogglesPin: spec.providers are always chosen, spec.excluded never.
	TogglesPin Toggles = "Pin"
	// TogglesIgnore: the policy alone chooses.
	TogglesIgnore Toggles = "Ignore"
)

// MinUptime asks a provider's uptime over a window to be at least a
// percentage.
type MinUptime struct {
	// Window the uptime is measured over.
	Window UptimeWindow `json:"window"`
	// Percent of the window's health checks the provider answered, at
	// least: "99.5".
	// +kubebuilder:validation:Pattern=`^(100(\.0+)?|[0-9]{1,2}(\.[0-9]+)?)$`
	Percent string `json:"percent"`
}

// MaxPrice bounds a provider's price per unit of some resources.
type MaxPrice struct {
	// PerUnit is the most the consumer pays per unit of each resource
	// (per core of cpu, per GiB of memory, per pod, per GPU) per Period.
	// A provider with no price for a resource named here is taken as free
	// of charge for it.
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=32
	PerUnit corev1.ResourceList `json:"perUnit"`
	// Currency of PerUnit (ISO 4217): a provider priced in another
	// currency is filtered out.
	// +kubebuilder:validation:Pattern=`^[A-Z]{3}$`
	Currency string `json:"currency"`
	// Period PerUnit is per; prices per month count 730 hours.
	// +kubebuilder:default=Hour
	// +optional
	Period PricePeriod `json:"period,omitempty"`
}

// Requirements are a policy's hard criteria: a provider failing one is
// not chosen (one in use is replaced once it has failed it for the
// policy's StableFor, or at once when it is down).
type Requirements struct {
	// MinUptime over a window.
	// +optional
	MinUptime *MinUptime `json:"minUptime,omitempty"`
	// MaxLatency from the broker to the provider's API server (the median
	// of the last 15 s's health checks).
	// +optional
	MaxLatency *metav1.Duration `json:"maxLatency,omitempty"`
	// MinFree resources of the provider's offer, less what is in use and
	// reserved for other consumers: cpu, memory, pods, nvidia.com/gpu...
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	MinFree corev1.ResourceList `json:"minFree,omitempty"`
	// MaxPrice per unit.
	// +optional
	MaxPrice *MaxPrice `json:"maxPrice,omitempty"`
	// RequiredLabels the provider's offer must carry, with these values
	// (an empty value: any value).
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	RequiredLabels map[string]string `json:"requiredLabels,omitempty"`
	// ForbiddenLabels the provider's offer must not carry with these
	// values (an empty value: with any value).
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	ForbiddenLabels map[string]string `json:"forbiddenLabels,omitempty"`
}

// Weights weigh a provider's score terms, each from 0 (ignored) to 100.
// The score is the weighted mean of the terms, each from 0 to 1000.
type Weights struct {
	// Price: the cheapest of the providers passing the criteria scores
	// 1000, one twice as dear 500.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Price int32 `json:"price,omitempty"`
	// Latency: the nearest scores 1000, one twice as far 500.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Latency int32 `json:"latency,omitempty"`
	// Uptime over the policy's window (24h without MinUptime): its
	// share of the steadiest's, out of 1000.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Uptime int32 `json:"uptime,omitempty"`
	// Free capacity (the mean over cpu and memory): the emptiest scores
	// 1000, one with half as much free 500.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Free int32 `json:"free,omitempty"`
	// Spread: a provider in a zone (its offer's label
	// topology.kubernetes.io/zone) none of those chosen before it is in
	// scores 1000, another 0.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Spread int32 `json:"spread,omitempty"`
}

// Policy makes the broker choose a consumer's providers itself, from what
// it measures of them.
type Policy struct {
	// Count is how many providers to use; 0 means as many as the
	// consumer's namespaces' requests need (at least one).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=256
	// +optional
	Count int32 `json:"count,omitempty"`
	// Requirements are the hard criteria.
	// +optional
	Requirements Requirements `json:"requirements,omitempty"`
	// Weights of the score; all 0 (the default) weighs every term 1.
	// +optional
	Weights Weights `json:"weights,omitempty"`
	// Toggles: with Pin (the default), spec.providers are always chosen
	// and spec.excluded never; with Ignore, the policy alone chooses.
	// +kubebuilder:default=Pin
	// +optional
	Toggles Toggles `json:"toggles,omitempty"`
	// Margin, in score points out of 1000, by which a provider must beat
	// one in use, for StableFor, before it replaces it; 0 is a margin
	// too (a pointer, so that it is kept).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=100
	// +optional
	Margin *int32 `json:"margin,omitempty"`
	// StableFor is how long a provider must beat one in use by Margin, or
	// one in use fail a criterion (but for being down), before the
	// selection changes.
	// +kubebuilder:default="60s"
	// +optional
	StableFor *metav1.Duration `json:"stableFor,omitempty"`
	// MaxMovesPerMinute bounds how many of the consumer's pods a change
	// of selection evicts a minute (besides its PodDisruptionBudgets); 0:
	// no bound but the budgets. A failed provider's pods are not moved:
	// they are recreated elsewhere.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxMovesPerMinute int32 `json:"maxMovesPerMinute,omitempty"`
}

// Verdict is what a decision made of one provider.
// +kubebuilder:validation:Enum=Chosen;Pinned;Kept;Filtered;Excluded;Outscored;NotNeeded
type Verdict string

// The verdicts.
const (
	// VerdictChosen: passed the criteria and scored among the best.
	VerdictChosen Verdict = "Chosen"
	// VerdictPinned: chosen because the consumer enabled it by hand.
	VerdictPinned Verdict = "Pinned"
	// VerdictKept: in use, and kept for now although another scores
	// better, or although it fails a criterion, until StableFor passes.
	VerdictKept Verdict = "Kept"
	// VerdictFiltered: failed a criterion.
	VerdictFiltered Verdict = "Filtered"
	// VerdictExcluded: the consumer disabled it by hand.
	VerdictExcluded Verdict = "Excluded"
	// VerdictOutscored: passed, but others scored better.
	VerdictOutscored Verdict = "Outscored"
	// VerdictNotNeeded: passed, but those chosen before it hold the
	// consumer's requests (Count 0).
	VerdictNotNeeded Verdict = "NotNeeded"
)

// Term is one term of a provider's score.
type Term struct {
	// Name: price, latency, uptime, free or spread.
	Name string `json:"name"`
	// Measured is the value the term comes from, as measured.
	// +optional
	Measured string `json:"measured,omitempty"`
	// Score from 0 to 1000.
	Score int32 `json:"score"`
	// Weight of the term.
	Weight int32 `json:"weight"`
}

// ProviderDecision is what a decision made of one provider, and why.
type ProviderDecision struct {
	// ClusterID of the provider.
	ClusterID string `json:"clusterID"`
	// Verdict on it.
	Verdict Verdict `json:"verdict"`
	// Criterion that filtered it out (or that it fails while Kept): the
	// policy's field, such as requirements.maxLatency.
	// +optional
	Criterion string `json:"criterion,omitempty"`
	// Measured is the value that failed Criterion; Limit the policy's.
	// +optional
	Measured string `json:"measured,omitempty"`
	// +optional
	Limit string `json:"limit,omitempty"`
	// Terms of its score (absent for a provider filtered out).
	// +listType=atomic
	// +optional
	Terms []Term `json:"terms,omitempty"`
	// Score is the weighted mean of Terms, from 0 to 1000.
	// +optional
	Score int32 `json:"score,omitempty"`
	// Since when the state that a later change waits on holds: a
	// provider beating one in use by the margin, or one in use failing a
	// criterion.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// Message says it in a sentence.
	// +optional
	Message string `json:"message,omitempty"`
}

// Decision is the broker's last choice of a consumer's providers under
// its policy.
type Decision struct {
	// Time the decision was made.
	Time metav1.Time `json:"time"`
	// Chosen providers, by ClusterID.
	// +listType=set
	// +optional
	Chosen []string `json:"chosen,omitempty"`
	// Providers: every provider the broker serves, and why it was chosen
	// or not, best first.
	// +listType=map
	// +listMapKey=clusterID
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Providers []ProviderDecision `json:"providers,omitempty"`
	// Message sums the decision up.
	// +optional
	Message string `json:"message,omitempty"`
}
