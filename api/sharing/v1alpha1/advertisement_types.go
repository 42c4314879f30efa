// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
)

// AdvertisementSpec is what a provider offers a consumer.
//
// +kubebuilder:validation:XValidation:rule="self.timeToLive > self.timestamp",message="timeToLive must be later than timestamp",fieldPath=".timeToLive",reason="FieldValueInvalid"
type AdvertisementSpec struct {
	// ClusterIdentity identifies the provider.
	ClusterIdentity discoveryv1alpha1.ClusterIdentity `json:"clusterIdentity"`

	// Resources offered: cpu, memory, pods and extended resources.
	Resources corev1.ResourceList `json:"resources"`

	// LargestPods bound, per place a pod must fit in whole, what one pod
	// may request: a cluster offers one entry, the most any one of its
	// nodes has allocatable of each resource (within its share of them
	// all); a broker offers one entry a provider, naming none. A pod whose
	// requests no entry holds can never run here, however much Resources
	// sum up to, and the consumer does not bind it to the virtual node. Empty: no bound beyond Resources. (A provider that
	// says less than it has only keeps pods off its own virtual node.)
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxProperties=16
	// +optional
	LargestPods []corev1.ResourceList `json:"largestPods,omitempty"`

	// Labels of the provider's nodes worth exposing on the virtual node.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Pools, when set, cut the offer by node labels: the consumer makes
	// one virtual node for each, with the offer's labels and the pool's
	// (the exposed ones alone), its resources and its largest pods,
	// instead of one for the whole offer; a pod bound to one goes to the
	// provider with a node affinity to the pool's labels (and to the
	// absence of its absent ones). A broker's aggregator offers them for
	// the labels its operator lets a consumer choose providers by
	// (Selection spec.aggregate.poolLabels). Resources, LargestPods and
	// Labels above still describe the whole offer.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Pools []AdvertisementPool `json:"pools,omitempty"`

	// StorageClass is the provider's StorageClass the consumer's volume
	// claims of class liqo are made with there; empty: the provider keeps
	// no volumes for the consumer.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClass string `json:"storageClass,omitempty"`

	// Properties are free-form facts about the provider.
	// +optional
	Properties map[string]string `json:"properties,omitempty"`

	// Prices per unit of each resource, for brokers that compare providers;
	// never negative.
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, !string(self[k]).startsWith('-'))",message="a price is never negative"
	// +optional
	Prices corev1.ResourceList `json:"prices,omitempty"`

	// Currency of Prices (ISO 4217).
	// +kubebuilder:validation:Pattern=`^[A-Z]{3}$`
	// +optional
	Currency string `json:"currency,omitempty"`

	// PricePeriod is what Prices are per: Hour (when empty) or Month.
	// +kubebuilder:validation:Enum=Hour;Month
	// +optional
	PricePeriod string `json:"pricePeriod,omitempty"`

	// Timestamp is when the provider computed this offer.
	Timestamp metav1.Time `json:"timestamp"`

	// TimeToLive is when this offer expires unless refreshed.
	TimeToLive metav1.Time `json:"timeToLive"`

	// KubeconfigSecretRef is kept from the original protocol and ignored:
	// a consumer builds its virtual kubelet's client only from the identity
	// it stored for the provider, never from a Secret a provider names
	// (docs/security.md).
	//
	// Deprecated: ignored by consumers; providers leave it empty.
	// +optional
	KubeconfigSecretRef *discoveryv1alpha1.SecretReference `json:"kubeconfigSecretRef,omitempty"`
}

// AdvertisementPool is the part of an offer on nodes that share labels.
type AdvertisementPool struct {
	// Labels are the values the pool's nodes have of the labels the
	// offer is cut by (a consumer takes the exposed ones alone); a pod
	// placed in the pool is placed on nodes with them.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Absent are the labels the offer is cut by that the pool's nodes
	// lack; a pod placed in the pool is placed on nodes without them.
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=317
	// +optional
	Absent []string `json:"absent,omitempty"`

	// Resources offered in the pool. Together the pools offer no more
	// than the offer's Resources: a consumer refuses an offer whose
	// pools say more.
	Resources corev1.ResourceList `json:"resources"`

	// LargestPods bound what one pod of the pool may request, as the
	// offer's own LargestPods do.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxProperties=16
	// +optional
	LargestPods []corev1.ResourceList `json:"largestPods,omitempty"`
}

// AdvertisementPhase is the consumer's decision on an Advertisement.
// +kubebuilder:validation:Enum=ACCEPTED;REFUSED
type AdvertisementPhase string

// The decisions a consumer can take.
const (
	AdvertisementAccepted AdvertisementPhase = "ACCEPTED"
	AdvertisementRefused  AdvertisementPhase = "REFUSED"
)

// AdvertisementStatus is the consumer's decision and its consequences.
type AdvertisementStatus struct {
	// Phase is ACCEPTED or REFUSED.
	// +optional
	Phase AdvertisementPhase `json:"phase,omitempty"`

	// Reason is a machine-readable word for the decision.
	// +optional
	Reason string `json:"reason,omitempty"`

	// Message explains the decision to an operator.
	// +optional
	Message string `json:"message,omitempty"`

	// VirtualNodeName is the node the consumer created for this offer.
	// +optional
	VirtualNodeName string `json:"virtualNodeName,omitempty"`

	// Conditions report the virtual kubelet's state.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Advertisement is a provider's offer of resources to one consumer, written
// by the provider into the consumer's tenant namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=adv
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.clusterIdentity.clusterName`
// +kubebuilder:printcolumn:name="CPU",type=string,JSONPath=`.spec.resources.cpu`
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.spec.resources.memory`
// +kubebuilder:printcolumn:name="Pods",type=string,JSONPath=`.spec.resources.pods`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.spec.timeToLive`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Advertisement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AdvertisementSpec `json:"spec"`
	// +optional
	Status AdvertisementStatus `json:"status,omitempty"`
}

// AdvertisementList is a list of Advertisement.
//
// +kubebuilder:object:root=true
type AdvertisementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Advertisement `json:"items"`
}

func init() {
	register(&Advertisement{}, &AdvertisementList{})
}
