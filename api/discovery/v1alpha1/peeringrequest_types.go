// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PeeringRequestSpec is a consumer's request to peer, as the provider sees
// it.
type PeeringRequestSpec struct {
	// ClusterIdentity identifies the consumer.
	ClusterIdentity ClusterIdentity `json:"clusterIdentity"`

	// Namespace is the Liqo namespace in the consumer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// KubeconfigSecretRef points at the Secret, in the provider, holding a
	// kubeconfig that lets the provider manage Advertisements in the
	// consumer's tenant namespace and nothing else.
	// +optional
	KubeconfigSecretRef *SecretReference `json:"kubeconfigSecretRef,omitempty"`

	// AuthURL is the consumer's auth service, for the reverse direction.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	AuthURL string `json:"authUrl,omitempty"`
}

// PeeringRequestStatus reports the provider's side of the peering.
type PeeringRequestStatus struct {
	// Conditions report acceptance and the broadcaster's state.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// TenantNamespace is the namespace the provider created for the consumer.
	// +optional
	TenantNamespace string `json:"tenantNamespace,omitempty"`
}

// PeeringRequest is created by a consumer in a provider to ask for a
// peering. Its name is the consumer's ClusterID, so a consumer has at most
// one.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=pr
// +kubebuilder:validation:XValidation:rule="has(self.spec.clusterIdentity.clusterID) && self.metadata.name == self.spec.clusterIdentity.clusterID",message="metadata.name must equal spec.clusterIdentity.clusterID",fieldPath=".spec.clusterIdentity.clusterID",reason="FieldValueInvalid"
// +kubebuilder:printcolumn:name="Cluster ID",type=string,JSONPath=`.spec.clusterIdentity.clusterID`
// +kubebuilder:printcolumn:name="Cluster Name",type=string,JSONPath=`.spec.clusterIdentity.clusterName`
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.status.tenantNamespace`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PeeringRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PeeringRequestSpec `json:"spec"`
	// +optional
	Status PeeringRequestStatus `json:"status,omitempty"`
}

// PeeringRequestList is a list of PeeringRequest.
//
// +kubebuilder:object:root=true
type PeeringRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PeeringRequest `json:"items"`
}

func init() {
	register(&PeeringRequest{}, &PeeringRequestList{})
}
