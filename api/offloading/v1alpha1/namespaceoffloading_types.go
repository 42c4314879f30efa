// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NamespaceOffloadingName is the only name a NamespaceOffloading may have:
// there is at most one per namespace.
const NamespaceOffloadingName = "offloading"

// PodOffloadingStrategy says where the pods of an offloaded namespace may run.
// +kubebuilder:validation:Enum=Local;Remote;LocalAndRemote
type PodOffloadingStrategy string

// The pod offloading strategies.
const (
	PodOffloadingLocal          PodOffloadingStrategy = "Local"
	PodOffloadingRemote         PodOffloadingStrategy = "Remote"
	PodOffloadingLocalAndRemote PodOffloadingStrategy = "LocalAndRemote"
)

// NamespaceMappingStrategy says how the remote namespace is named.
// +kubebuilder:validation:Enum=DefaultName;EnforceSameName;SelectedName
type NamespaceMappingStrategy string

// The namespace mapping strategies.
const (
	// DefaultNameMapping names the remote namespace
	// <namespace>-<consumer cluster ID prefix>, which cannot collide with a
	// provider's own namespaces or another consumer's.
	DefaultNameMapping NamespaceMappingStrategy = "DefaultName"
	// EnforceSameNameMapping keeps the local name.
	EnforceSameNameMapping NamespaceMappingStrategy = "EnforceSameName"
	// SelectedNameMapping uses RemoteNamespaceName.
	SelectedNameMapping NamespaceMappingStrategy = "SelectedName"
)

// NamespaceOffloadingSpec says where a namespace offloads.
//
// +kubebuilder:validation:XValidation:rule="!has(self.namespaceMappingStrategy) || self.namespaceMappingStrategy != 'SelectedName' || (has(self.remoteNamespaceName) && size(self.remoteNamespaceName) > 0)",message="remoteNamespaceName is required when namespaceMappingStrategy is SelectedName",fieldPath=".remoteNamespaceName",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="(has(self.namespaceMappingStrategy) && self.namespaceMappingStrategy == 'SelectedName') || !has(self.remoteNamespaceName) || size(self.remoteNamespaceName) == 0",message="remoteNamespaceName may only be set when namespaceMappingStrategy is SelectedName",fieldPath=".remoteNamespaceName",reason="FieldValueForbidden"
type NamespaceOffloadingSpec struct {
	// NamespaceMappingStrategy says how the remote namespace is named.
	// +kubebuilder:default=DefaultName
	// +optional
	NamespaceMappingStrategy NamespaceMappingStrategy `json:"namespaceMappingStrategy,omitempty"`

	// RemoteNamespaceName is the remote name with the SelectedName strategy.
	// +kubebuilder:validation:XValidation:rule="self != 'default' && !self.startsWith('liqo-') && !self.startsWith('kube-') && self != 'liqo'",message="default, liqo and names starting with liqo- or kube- are reserved in the provider"
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	RemoteNamespaceName string `json:"remoteNamespaceName,omitempty"`

	// PodOffloadingStrategy says where the namespace's pods may run.
	// +kubebuilder:default=LocalAndRemote
	// +optional
	PodOffloadingStrategy PodOffloadingStrategy `json:"podOffloadingStrategy,omitempty"`

	// ClusterSelector selects, by virtual-node labels, the providers the
	// namespace offloads to. Empty selects every provider.
	// +optional
	ClusterSelector *corev1.NodeSelector `json:"clusterSelector,omitempty"`

	// SecretReflection says which Secrets of the namespace are copied to
	// the providers: Referenced (the default) copies those the namespace's
	// pods use (volumes, environment, image pull secrets); All copies every
	// Secret, for workloads that read Secrets through the API.
	// +kubebuilder:default=Referenced
	// +optional
	SecretReflection SecretReflection `json:"secretReflection,omitempty"`
}

// SecretReflection says which Secrets an offloaded namespace shares.
// +kubebuilder:validation:Enum=Referenced;All
type SecretReflection string

// The Secret reflection policies.
const (
	ReflectReferencedSecrets SecretReflection = "Referenced"
	ReflectAllSecrets        SecretReflection = "All"
)

// RemoteNamespacePhase is the state of one remote namespace.
// +kubebuilder:validation:Enum=Pending;Ready;Failed;Terminating
type RemoteNamespacePhase string

// The states of a remote namespace.
const (
	RemoteNamespacePending     RemoteNamespacePhase = "Pending"
	RemoteNamespaceReady       RemoteNamespacePhase = "Ready"
	RemoteNamespaceFailed      RemoteNamespacePhase = "Failed"
	RemoteNamespaceTerminating RemoteNamespacePhase = "Terminating"
)

// RemoteNamespaceStatus is the state of the namespace in one provider.
type RemoteNamespaceStatus struct {
	// ClusterID of the provider.
	ClusterID string `json:"clusterID"`
	// Namespace is the remote namespace's name.
	Namespace string `json:"namespace"`
	// Phase of the remote namespace.
	Phase RemoteNamespacePhase `json:"phase"`
	// Message explains a Failed phase.
	// +optional
	Message string `json:"message,omitempty"`
	// DNS is where, as the provider says, this namespace's pods there ask
	// for names with this cluster's namespace names (its DNS proxy);
	// unset, they ask the provider's cluster DNS.
	// +optional
	DNS *ConsumerDNS `json:"dns,omitempty"`
}

// NamespaceOffloadingStatus lists the remote namespaces.
type NamespaceOffloadingStatus struct {
	// RemoteNamespaces has one entry per selected provider.
	// +listType=map
	// +listMapKey=clusterID
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	RemoteNamespaces []RemoteNamespaceStatus `json:"remoteNamespaces,omitempty"`

	// Conditions summarise the offloading.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NamespaceOffloading enables offloading for the namespace it lives in. Its
// name must be "offloading".
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=nsoff
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'offloading'",message="metadata.name must be 'offloading': there is one NamespaceOffloading per namespace"
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=`.spec.podOffloadingStrategy`
// +kubebuilder:printcolumn:name="Mapping",type=string,JSONPath=`.spec.namespaceMappingStrategy`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NamespaceOffloading struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:default={}
	// +optional
	Spec NamespaceOffloadingSpec `json:"spec,omitempty"`
	// +optional
	Status NamespaceOffloadingStatus `json:"status,omitempty"`
}

// NamespaceOffloadingList is a list of NamespaceOffloading.
//
// +kubebuilder:object:root=true
type NamespaceOffloadingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespaceOffloading `json:"items"`
}

func init() {
	register(&NamespaceOffloading{}, &NamespaceOffloadingList{})
}
