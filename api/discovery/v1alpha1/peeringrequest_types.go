// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PeeringRequestSpec is a consumer's request to peer, as the provider sees
// it. Nothing in it is secret: private keys never leave the cluster that
// generated them (see docs/peering.md).
type PeeringRequestSpec struct {
	// ClusterIdentity identifies the consumer.
	ClusterIdentity ClusterIdentity `json:"clusterIdentity"`

	// Namespace is the Liqo namespace in the consumer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// AuthURL is the consumer's auth service, for the reverse direction.
	// The provider records it on the consumer's ForeignCluster and asks it
	// for the consumer's identity, pinning the key it presents on first
	// contact.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() == 'https' && url(self).getHostname() != ''",message="authUrl must be an https:// URL with a host"
	// +optional
	AuthURL string `json:"authUrl,omitempty"`

	// APIServerURL is the consumer's API server, as the provider reaches it
	// to manage Advertisements in its tenant namespace there.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() == 'https'",message="apiServerURL must be an https:// URL"
	APIServerURL string `json:"apiServerURL"`

	// CACert is the consumer API server's CA bundle, PEM.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	CACert string `json:"caCert"`

	// ProviderCertificate is the client certificate (PEM) the consumer issued,
	// through its own CSR API, for the key the provider generated during the
	// token exchange. With it the provider manages Advertisements in its
	// tenant namespace in the consumer, and nothing else.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	ProviderCertificate string `json:"providerCertificate"`

	// VirtualKubeletCSR is a certificate signing request (PEM) for the
	// identity the consumer's virtual kubelet will use in the provider; the
	// provider answers it in status.virtualKubeletCertificate.
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	VirtualKubeletCSR string `json:"virtualKubeletCSR,omitempty"`
}

// Condition types of a PeeringRequest, set by the provider.
const (
	// PeeringRequestConsumerVerified is True once the provider proved, with
	// the certificate in spec.providerCertificate, that the request comes
	// from the cluster that owns spec.apiServerURL.
	PeeringRequestConsumerVerified = "ConsumerVerified"
	// PeeringRequestAccepted is True once the provider created the tenant
	// namespace and the identities the peering needs.
	PeeringRequestAccepted = "Accepted"
)

// PeeringRequestStatus reports the provider's side of the peering.
type PeeringRequestStatus struct {
	// Conditions report verification and acceptance.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// TenantNamespace is the namespace the provider created for the consumer.
	// +optional
	TenantNamespace string `json:"tenantNamespace,omitempty"`

	// KubeconfigSecretRef points at the Secret, in the provider, holding the
	// kubeconfig that lets the provider manage Advertisements in the
	// consumer's tenant namespace and nothing else.
	// +optional
	KubeconfigSecretRef *SecretReference `json:"kubeconfigSecretRef,omitempty"`

	// VirtualKubeletCertificate answers spec.virtualKubeletCSR: a client
	// certificate (PEM) bound to a Role in the tenant namespace.
	// +optional
	VirtualKubeletCertificate string `json:"virtualKubeletCertificate,omitempty"`

	// OfferedResources is what this cluster last advertised to the
	// consumer. Every namespace made for the consumer carries a
	// ResourceQuota of it (pods, requests.cpu, requests.memory), so that
	// the consumer runs no more than it was offered.
	// +optional
	OfferedResources corev1.ResourceList `json:"offeredResources,omitempty"`
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
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
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
