// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

// ClusterIdentity names a cluster: its stable ID and a human-readable name.
type ClusterIdentity struct {
	// ClusterID is the cluster's stable identity. It is a DNS label so that
	// it can appear in object names and label values.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	ClusterID string `json:"clusterID,omitempty"`

	// ClusterName is the name the cluster announces; informational only.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ClusterName string `json:"clusterName,omitempty"`
}

// SecretReference points at a Secret by namespace and name.
type SecretReference struct {
	// Namespace of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

const (
	// ClusterIDLabel carries the ClusterID of the remote cluster an object
	// belongs to, so that everything of one peer can be selected at once.
	ClusterIDLabel = "discovery.liqo.io/cluster-id"

	// IntroducedByLabel is the broker, on a ForeignCluster (and its token
	// Secret) this cluster made from that broker's introduction: such a
	// peering is for the network only, and the broker's Selection keeps
	// it (peering.Brokered).
	IntroducedByLabel = "discovery.liqo.io/introduced-by"
	// UnusedSinceAnnotation is when, on such a ForeignCluster, the
	// Selection stopped enabling the provider (RFC 3339).
	UnusedSinceAnnotation = "discovery.liqo.io/unused-since"

	// DiscoveryTypeLabel records how a ForeignCluster was found.
	DiscoveryTypeLabel = "discovery.liqo.io/discovery-type"

	// TrustCAAnnotation trusts a remote CA that changed: set it to the new
	// CA's fingerprint, as shown in the CATrusted condition's message.
	TrustCAAnnotation = "discovery.liqo.io/trust-ca"

	// UntrustedCAAnnotation set to "true" withdraws trust in the remote
	// CA: nothing is done with the cluster until it is removed.
	UntrustedCAAnnotation = "discovery.liqo.io/untrusted-ca"

	// TrustAuthKeyAnnotation trusts a remote auth service key that changed:
	// set it to the new key's fingerprint, as shown in the Reachable
	// condition's message.
	TrustAuthKeyAnnotation = "discovery.liqo.io/trust-auth-key"
)

// DiscoveryType is how a ForeignCluster was found.
type DiscoveryType string

// The ways a cluster can be found. When several found the same cluster the
// most explicit one wins: Manual over IncomingPeering over WAN over LAN.
const (
	LanDiscovery             DiscoveryType = "LAN"
	WanDiscovery             DiscoveryType = "WAN"
	ManualDiscovery          DiscoveryType = "Manual"
	IncomingPeeringDiscovery DiscoveryType = "IncomingPeering"
)

const (
	// PeeringFinalizer holds a ForeignCluster (outgoing peering) or a
	// PeeringRequest (incoming peering) until the peering's objects are
	// gone, or the bounded force-unpeer timeout passed.
	PeeringFinalizer = "discovery.liqo.io/peering"

	// ManagedByLabel and ManagedByValue mark every object a peering
	// creates, so that one label selector finds what is left of it.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is the ManagedByLabel value of Liqo's objects.
	ManagedByValue = "liqo"

	// TenantLabel marks a tenant namespace: the namespace one cluster keeps
	// for one peer, named liqo-tenant-<peer cluster ID>.
	TenantLabel = "discovery.liqo.io/tenant"
	// TenantRoleAnnotationPrefix is followed by a tenant Role's name: the
	// annotation marks a tenant namespace as used by the direction of the
	// peering that Role serves (liqo-provider: this cluster consumes from
	// the peer; liqo-virtual-kubelet: the peer consumes from this
	// cluster). The namespace goes only when no direction uses it.
	TenantRoleAnnotationPrefix = "discovery.liqo.io/tenant-role."

	// SearchDomainFinalizer holds a SearchDomain until the ForeignClusters
	// it found are released.
	SearchDomainFinalizer = "discovery.liqo.io/searchdomain"

	// AuthenticatedByAnnotation records, on the provider's Secret of a
	// consumer, how the consumer was authenticated.
	AuthenticatedByAnnotation = "discovery.liqo.io/authenticated-by"
	// ExchangedAtAnnotation records when the last exchange happened, so
	// that one never followed by a PeeringRequest can be swept.
	ExchangedAtAnnotation = "discovery.liqo.io/exchanged-at"
	// ProviderCSRAnnotation carries, on the ClusterRole liqo-consumer-<id>,
	// the CSR of the provider's identity the last exchange with that
	// consumer answered with. The consumer reads it from the provider's API
	// server, which it reaches with the pinned CA, before signing the CSR
	// it got in the answer: without a token, nothing else proves the
	// answer's CSR is the provider's and not that of someone between the
	// two.
	ProviderCSRAnnotation = "discovery.liqo.io/provider-csr"
)

// TenantNamespace is the namespace a cluster keeps for the peer clusterID.
func TenantNamespace(clusterID string) string { return "liqo-tenant-" + clusterID }
