// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NamespaceMapName is the only name a NamespaceMap may have: there is one
// per tenant namespace, that is one per consumer.
const NamespaceMapName = "namespace-map"

// NamespaceMapSpec is what the consumer asks for.
type NamespaceMapSpec struct {
	// Mappings maps each consumer namespace that offloads to this provider
	// to the provider namespace its pods and objects go to. A map, so that
	// a consumer adds or removes one entry with a merge patch and two
	// offloaded namespaces never conflict.
	// +kubebuilder:validation:MaxProperties=1000
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(k) <= 63)",message="every key must be a namespace name (a DNS-1123 label)"
	// +optional
	Mappings map[string]NamespaceName `json:"mappings,omitempty"`
	// Demands states, for consumer namespaces of mappings, what their
	// pods bound to this provider ask for, under the names of a
	// ResourceQuota (pods, requests.cpu, limits.cpu, requests.memory,
	// limits.memory, ...). The provider shares what it offered the
	// consumer between the quotas of the consumer's namespaces by it: a
	// namespace whose pods need more gets more of what the others leave.
	// It never widens the offer: the quotas together stay within it,
	// whatever is stated. A namespace without an entry gets an even share
	// of what is left.
	// +kubebuilder:validation:MaxProperties=1000
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(k) <= 63)",message="every key must be a namespace name (a DNS-1123 label)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 16)",message="at most 16 resources a namespace"
	// +optional
	Demands map[string]corev1.ResourceList `json:"demands,omitempty"`
}

// NamespaceName is the name of a namespace (a DNS-1123 label) that a
// consumer may have in a provider: not default and not under the reserved
// prefixes liqo- (tenant namespaces, Liqo's own) and kube- (the system's).
// +kubebuilder:validation:XValidation:rule="self != 'default' && !self.startsWith('liqo-') && !self.startsWith('kube-') && self != 'liqo'",message="default, liqo and names starting with liqo- or kube- are reserved in the provider"
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
type NamespaceName string

// MappedNamespaceStatus is the state of one provider namespace.
type MappedNamespaceStatus struct {
	// Namespace is the provider namespace's name.
	Namespace string `json:"namespace"`
	// Phase of the provider namespace.
	Phase RemoteNamespacePhase `json:"phase"`
	// Message explains a Failed phase.
	// +optional
	Message string `json:"message,omitempty"`
}

// NamespaceMapStatus is what the provider did.
type NamespaceMapStatus struct {
	// Namespaces has, for each key of spec.mappings, the state of its
	// provider namespace.
	// +optional
	Namespaces map[string]MappedNamespaceStatus `json:"namespaces,omitempty"`
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// DNS, when the provider runs its DNS proxy, is where the consumer's
	// offloaded pods ask for names: the provider answers there with the
	// consumer's namespace names (a pod of a namespace the provider names
	// otherwise reaches svc.<its namespace>.svc.<domain> as at home).
	// +optional
	DNS *ConsumerDNS `json:"dns,omitempty"`
}

// ConsumerDNS is a provider's DNS for one consumer's pods.
type ConsumerDNS struct {
	// Nameserver is the address of the consumer's DNS Service in the
	// provider.
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IP address"
	Nameserver string `json:"nameserver"`
	// Domain is the provider's cluster DNS domain.
	// +kubebuilder:validation:MaxLength=253
	Domain string `json:"domain"`
}

// NamespaceMap lives in a provider's tenant namespace for one consumer. The
// consumer's virtual kubelet, whose identity has no right outside that
// tenant namespace, asks through it for the namespaces it offloads to; the
// provider creates them, binds the virtual kubelet's Role in each, and
// reports their state. Its name must be "namespace-map".
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=nsmap
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'namespace-map'",message="metadata.name must be 'namespace-map': there is one NamespaceMap per tenant namespace"
// +kubebuilder:printcolumn:name="Observed",type=integer,JSONPath=`.status.observedGeneration`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NamespaceMap struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec NamespaceMapSpec `json:"spec,omitempty"`
	// +optional
	Status NamespaceMapStatus `json:"status,omitempty"`
}

// NamespaceMapList is a list of NamespaceMap.
//
// +kubebuilder:object:root=true
type NamespaceMapList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespaceMap `json:"items"`
}

func init() {
	register(&NamespaceMap{}, &NamespaceMapList{})
}
