// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ranges are a cluster's pod and external ranges, in one view.
type Ranges struct {
	// PodCIDR is the pod range.
	// +kubebuilder:validation:MaxLength=18
	PodCIDR string `json:"podCIDR"`
	// ExternalCIDR is the external range.
	// +kubebuilder:validation:MaxLength=18
	ExternalCIDR string `json:"externalCIDR"`
}

// TunnelEndpointSpec is what this cluster's gateway applies for one peer:
// the peer's gateway, the peer's ranges as this cluster sees them (its own
// decision), and this cluster's ranges as the peer sees them (the peer's).
type TunnelEndpointSpec struct {
	// ClusterID is the peer's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterID string `json:"clusterID"`
	// ClusterName is the peer's name, for people.
	// +optional
	ClusterName string `json:"clusterName,omitempty"`
	// PublicKey is the peer gateway's WireGuard key.
	PublicKey string `json:"publicKey"`
	// Endpoint is the peer's gateway when this side is the client; empty
	// when the peer opens the tunnel.
	// +optional
	Endpoint *GatewayEndpoint `json:"endpoint,omitempty"`
	// Remote are the peer's ranges as it has them.
	Remote Ranges `json:"remote"`
	// RemoteSeenAs are the peer's ranges as this cluster sees them: routes
	// and the sources accepted from the peer. Reflected addresses of the
	// peer are translated into them.
	RemoteSeenAs Ranges `json:"remoteSeenAs"`
	// Local are this cluster's ranges as it stated them to the peer, and
	// LocalSeenAs how the peer sees them: what this cluster sends the peer
	// is translated from the first into the second, and so are the
	// addresses it shows the peer (reflected endpoints). Empty until the
	// peer answered.
	// +optional
	Local *Ranges `json:"local,omitempty"`
	// +optional
	LocalSeenAs *Ranges `json:"localSeenAs,omitempty"`
	// Reach is what the peer may open connections to through the tunnel:
	// Peering (the default), the pods this peering exposes to it
	// (Exposed); AllPods, every pod of this cluster, when an operator
	// opted in on the peer's ForeignCluster. Answers to connections this
	// cluster opened always pass.
	// +kubebuilder:validation:Enum=Peering;AllPods
	// +optional
	Reach NetworkReach `json:"reach,omitempty"`
	// Exposed are this cluster's pod addresses (its own view, /32s) the
	// peer may open connections to with Peering reach: as a provider, the
	// pods it runs for the peer; as a consumer, its pods in the
	// namespaces it offloads to the peer (the endpoints of the Services
	// the peer's copies point to).
	// +kubebuilder:validation:MaxItems=16384
	// +kubebuilder:validation:items:MaxLength=18
	// +listType=set
	// +optional
	Exposed []string `json:"exposed,omitempty"`
	// Transit, set by an aggregator on the TunnelEndpoints of its
	// consumers and of its providers, is the peer's way through this
	// cluster's gateway to another peer: a consumer's to the pods the
	// aggregator placed for it at providers; a provider's to the
	// endpoints of the Services of the consumers whose pods it runs. Only
	// the listed addresses of this cluster's external range lead anywhere,
	// each to one such address. Absent, nothing the peer sends leaves
	// through the tunnel again. Written by this cluster's controller
	// manager alone.
	// +optional
	Transit *Transit `json:"transit,omitempty"`
}

// Transit lists a peer's transit routes.
type Transit struct {
	// Routes are the peer's ways through, each at an address of this
	// cluster's external range, kept for as long as what it leads to is
	// here.
	// +kubebuilder:validation:MaxItems=16384
	// +listType=map
	// +listMapKey=address
	// +optional
	Routes []TransitRoute `json:"routes,omitempty"`
}

// TransitRoute leads from an address of this cluster's external range to
// a pod of another peer: one a consumer's pod was placed on (Pod), or an
// endpoint of a consumer's Service (EndpointSlice).
// +kubebuilder:validation:XValidation:rule="has(self.pod) != has(self.endpointSlice)",message="a route is for a pod or for an EndpointSlice, one of them"
type TransitRoute struct {
	// Address is this cluster's, in its external range; the peer
	// reaches it in its own view of that range, and finds the target
	// there.
	// +kubebuilder:validation:MaxLength=15
	Address string `json:"address"`
	// Target is the pod at the other peer, as this cluster reaches it.
	// +kubebuilder:validation:MaxLength=15
	Target string `json:"target"`
	// Provider is the ClusterID of the peer the target is in (the
	// provider a pod runs in; for an EndpointSlice's route, the
	// consumer): the target must be inside its pod range as this
	// cluster sees it.
	// +kubebuilder:validation:MaxLength=63
	Provider string `json:"provider"`
	// Pod is the pod of this cluster the route is for, namespace/name:
	// the peer is its consumer, the target its copy at a provider.
	// +kubebuilder:validation:MaxLength=317
	// +optional
	Pod string `json:"pod,omitempty"`
	// EndpointSlice is the consumer's EndpointSlice of this cluster the
	// route is for, namespace/name: the peer is a provider running pods
	// of its namespace, the target one of the slice's endpoints, at the
	// consumer.
	// +kubebuilder:validation:MaxLength=317
	// +optional
	EndpointSlice string `json:"endpointSlice,omitempty"`
}

// NetworkReach says what a peer may reach through the tunnel.
type NetworkReach string

// The reaches.
const (
	// ReachPeering: what the peering exposes to the peer.
	ReachPeering NetworkReach = "Peering"
	// ReachAllPods: every pod of this cluster.
	ReachAllPods NetworkReach = "AllPods"
)

// TunnelEndpointStatus is how the tunnel is doing, written by the gateway.
type TunnelEndpointStatus struct {
	// Latency is the round trip of the last probe through the tunnel.
	// +optional
	Latency *metav1.Duration `json:"latency,omitempty"`
	// LastHandshakeTime is when the last WireGuard handshake completed.
	// +optional
	LastHandshakeTime *metav1.Time `json:"lastHandshakeTime,omitempty"`
	// PeerAddress is where the peer's gateway was last heard from.
	// +optional
	PeerAddress string `json:"peerAddress,omitempty"`
	// RangesInUse are the gateway node's addresses and routes that the
	// peer's ranges, as this cluster sees them, overlap: the gateway
	// refuses to route them, and this cluster's remapping takes them as
	// in use when it decides how to see the peer again.
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +optional
	RangesInUse []string `json:"rangesInUse,omitempty"`
	// Conditions: Established is True while the peer's gateway answers
	// probes through the tunnel.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TunnelEndpoint is this cluster's side of the tunnel to one peer, named
// after the peer's ClusterID. The controller manager keeps it from the
// two NetworkConfigs of the pair; the gateway applies it and reports.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=tep
// +kubebuilder:printcolumn:name="Peer",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Pods seen as",type=string,JSONPath=`.spec.remoteSeenAs.podCIDR`
// +kubebuilder:printcolumn:name="Seen by peer as",type=string,JSONPath=`.spec.localSeenAs.podCIDR`
// +kubebuilder:printcolumn:name="Established",type=string,JSONPath=`.status.conditions[?(@.type=="Established")].status`
// +kubebuilder:printcolumn:name="Latency",type=string,JSONPath=`.status.latency`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TunnelEndpoint struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TunnelEndpointSpec `json:"spec"`
	// +optional
	Status TunnelEndpointStatus `json:"status,omitempty"`
}

// TunnelEndpointList is a list of TunnelEndpoint.
//
// +kubebuilder:object:root=true
type TunnelEndpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TunnelEndpoint `json:"items"`
}

func init() {
	register(&TunnelEndpoint{}, &TunnelEndpointList{})
}
