// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GatewayRole says which side of a tunnel opens it.
// +kubebuilder:validation:Enum=Server;Client
type GatewayRole string

// The roles of a gateway in a tunnel: the provider's is the server, so
// only it needs an address the consumer can reach.
const (
	// GatewayServer waits for its peer at its endpoint.
	GatewayServer GatewayRole = "Server"
	// GatewayClient opens the tunnel to its peer's endpoint.
	GatewayClient GatewayRole = "Client"
)

// GatewayEndpoint is where a gateway listens, as its peers reach it.
type GatewayEndpoint struct {
	// Host is an IP address or a DNS name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9]([-.:a-zA-Z0-9]*[a-zA-Z0-9])?$`
	Host string `json:"host"`
	// Port is the UDP port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// GatewayParameters describe the writer's gateway.
//
// +kubebuilder:validation:XValidation:rule="self.role != 'Server' || has(self.endpoint)",message="a Server gateway needs an endpoint",fieldPath=".endpoint",reason="FieldValueRequired"
type GatewayParameters struct {
	// Role is Server (it waits at its endpoint) or Client (it opens the
	// tunnel to the peer's).
	Role GatewayRole `json:"role"`
	// Endpoint is where the gateway listens; a Server's peers dial it.
	// +optional
	Endpoint *GatewayEndpoint `json:"endpoint,omitempty"`
	// PublicKey is the gateway's WireGuard public key, in base64: the only
	// key whose packets are taken as this cluster's. The all-zero key is
	// no key.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$`
	// +kubebuilder:validation:XValidation:rule="self != 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA='",message="publicKey must not be the all-zero key"
	PublicKey string `json:"publicKey"`
}

// NetworkConfigSpec is a cluster's network parameters, for one peer.
type NetworkConfigSpec struct {
	// ClusterID is the writer's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ClusterID string `json:"clusterID"`
	// PodCIDR is the writer's pod range.
	// +kubebuilder:validation:MaxLength=18
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).ip().family() == 4 && cidr(self) == cidr(self).masked() && cidr(self).prefixLength() <= 30",message="podCIDR must be a masked IPv4 CIDR of /30 or larger, such as 10.244.0.0/16"
	PodCIDR string `json:"podCIDR"`
	// ExternalCIDR is the writer's range for addresses that are neither
	// its pods nor a peer's; the first host is its gateway's address in
	// the tunnel.
	// +kubebuilder:validation:MaxLength=18
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).ip().family() == 4 && cidr(self) == cidr(self).masked() && cidr(self).prefixLength() <= 30",message="externalCIDR must be a masked IPv4 CIDR of /30 or larger, such as 10.70.0.0/16"
	ExternalCIDR string `json:"externalCIDR"`
	// Gateway is how the writer's gateway is reached and recognised.
	Gateway GatewayParameters `json:"gateway"`
}

// NetworkConfigStatus is the reader's answer: how it sees the writer's
// ranges. The writer translates what it sends into them.
type NetworkConfigStatus struct {
	// RemappedPodCIDR is how the reader sees the writer's pod range: the
	// range itself, or one of the same size when it overlapped a range in
	// use in the reader.
	// +optional
	RemappedPodCIDR string `json:"remappedPodCIDR,omitempty"`
	// RemappedExternalCIDR is how the reader sees the writer's external
	// range.
	// +optional
	RemappedExternalCIDR string `json:"remappedExternalCIDR,omitempty"`
	// Conditions: Processed says whether the reader took the parameters,
	// and why not.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NetworkConfig is one cluster's network parameters, written by it into
// its tenant namespace in a peer, and named after it; the peer answers in
// the status with how it sees them.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=nc
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterID`
// +kubebuilder:printcolumn:name="Pod CIDR",type=string,JSONPath=`.spec.podCIDR`
// +kubebuilder:printcolumn:name="Seen as",type=string,JSONPath=`.status.remappedPodCIDR`
// +kubebuilder:printcolumn:name="External CIDR",type=string,JSONPath=`.spec.externalCIDR`
// +kubebuilder:printcolumn:name="Seen as",type=string,JSONPath=`.status.remappedExternalCIDR`
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.spec.gateway.role`
// +kubebuilder:printcolumn:name="Processed",type=string,JSONPath=`.status.conditions[?(@.type=="Processed")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NetworkConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NetworkConfigSpec `json:"spec"`
	// +optional
	Status NetworkConfigStatus `json:"status,omitempty"`
}

// NetworkConfigList is a list of NetworkConfig.
//
// +kubebuilder:object:root=true
type NetworkConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetworkConfig `json:"items"`
}

func init() {
	register(&NetworkConfig{}, &NetworkConfigList{})
}
