// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IntroductionSpec names the consumer an introducer (a broker) introduces.
//
// An Introduction lives in two places. In the introducer, in its Liqo
// namespace (where no peer writes), with spec.providerClusterID set: the
// broker asks its controller manager to introduce the consumer to that
// provider. In the provider, in the tenant namespace of the introducer
// (which is how the provider knows who introduces), named after the
// consumer: the provider decides by its own policy
// (ClusterConfig spec.peeringConfig.introducers) and, when it accepts,
// writes a token in the status that works for that consumer alone, until
// the provider deletes the Introduction.
type IntroductionSpec struct {
	// Consumer is the cluster introduced.
	Consumer ClusterIdentity `json:"consumer"`

	// ProviderClusterID is the provider the consumer is introduced to; set
	// in the introducer's own copy only.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	ProviderClusterID string `json:"providerClusterID,omitempty"`
}

// IntroductionAccepted is the condition the provider sets: True with a
// token, False with the reason it refuses.
const IntroductionAccepted = "Accepted"

// Reasons of IntroductionAccepted.
const (
	IntroductionReasonAccepted        = "Accepted"
	IntroductionReasonNotAnIntroducer = "NotAnIntroducer"
	IntroductionReasonInvalid         = "Invalid"
	IntroductionReasonPending         = "Pending"
	IntroductionReasonUnreachable     = "ProviderUnreachable"
)

// IntroductionStatus is the provider's answer.
type IntroductionStatus struct {
	// Conditions say whether the provider accepts the introduction.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Token is what the consumer signs its identity request with (as the
	// token of liqoctl add): "<introducer ID>.<secret>". It works only for
	// the consumer named in spec, and no longer once the provider deletes
	// the Introduction or stops accepting the introducer.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Token string `json:"token,omitempty"`

	// AuthURL is the provider's auth service, as the introducer knows it
	// (its ForeignCluster's foreignAuthUrl); set in the introducer's copy.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	AuthURL string `json:"authUrl,omitempty"`

	// ProviderClusterName is the provider's name; set in the introducer's
	// copy.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ProviderClusterName string `json:"providerClusterName,omitempty"`
}

// Introduction is a broker's introduction of a consumer to a provider.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=intro
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumer.clusterID`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.providerClusterID`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Introduction struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IntroductionSpec `json:"spec"`
	// +optional
	Status IntroductionStatus `json:"status,omitempty"`
}

// IntroductionList is a list of Introduction.
//
// +kubebuilder:object:root=true
type IntroductionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Introduction `json:"items"`
}

// IntroductionName is the name of the introducer's Introduction of
// consumer to provider, in its Liqo namespace.
func IntroductionName(consumer, provider string) string { return consumer + "." + provider }

func init() {
	register(&Introduction{}, &IntroductionList{})
}
