// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SearchDomainSpec names a DNS domain to browse with DNS-SD.
type SearchDomainSpec struct {
	// Domain is the DNS domain whose DNS-SD records list clusters.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?\.)*[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?\.?$`
	Domain string `json:"domain"`

	// AutoJoin, when set, overrides the ClusterConfig autojoin default for
	// clusters found in this domain.
	// +optional
	AutoJoin *bool `json:"autojoin,omitempty"`
}

// SearchDomainStatus lists what the last resolution produced.
type SearchDomainStatus struct {
	// ForeignClusters are the names of the ForeignClusters this domain
	// produced.
	// +listType=set
	// +optional
	ForeignClusters []string `json:"foreignClusters,omitempty"`

	// LastResolved is the time of the last successful resolution.
	// +optional
	LastResolved *metav1.Time `json:"lastResolved,omitempty"`

	// Conditions report resolution errors.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SearchDomain is a DNS domain browsed for clusters (WAN discovery).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=sd
// +kubebuilder:printcolumn:name="Domain",type=string,JSONPath=`.spec.domain`
// +kubebuilder:printcolumn:name="Autojoin",type=boolean,JSONPath=`.spec.autojoin`
// +kubebuilder:printcolumn:name="Resolved",type=string,JSONPath=`.status.conditions[?(@.type=="Resolved")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SearchDomain struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SearchDomainSpec `json:"spec"`
	// +optional
	Status SearchDomainStatus `json:"status,omitempty"`
}

// SearchDomainList is a list of SearchDomain.
//
// +kubebuilder:object:root=true
type SearchDomainList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SearchDomain `json:"items"`
}

func init() {
	register(&SearchDomain{}, &SearchDomainList{})
}
