// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PeeringEnabled is a tri-state switch: Auto lets the policy decide.
// +kubebuilder:validation:Enum=Auto;Yes;No
type PeeringEnabled string

// The values of PeeringEnabled.
const (
	PeeringEnabledAuto PeeringEnabled = "Auto"
	PeeringEnabledYes  PeeringEnabled = "Yes"
	PeeringEnabledNo   PeeringEnabled = "No"
)

// OffloadedNamespaces are the provider namespace names a consumer may map
// its namespaces to. Reserved names (default, liqo, liqo-*, kube-*) stay
// refused whatever is listed.
type OffloadedNamespaces struct {
	// Names the consumer may use.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	// +optional
	Names []string `json:"names,omitempty"`
	// Prefixes: the consumer may use any name that starts with one of
	// them.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=62
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9][-a-z0-9]*$`
	// +listType=set
	// +optional
	Prefixes []string `json:"prefixes,omitempty"`
}

// Allows says whether o lets a consumer use the provider namespace name.
func (o *OffloadedNamespaces) Allows(name string) bool {
	if o == nil {
		return false
	}
	if slices.Contains(o.Names, name) {
		return true
	}
	return slices.ContainsFunc(o.Prefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// ForeignClusterSpec is what this cluster knows and wants of a remote one.
//
// +kubebuilder:validation:XValidation:rule="(has(self.clusterIdentity.clusterID) && size(self.clusterIdentity.clusterID) > 0) || (has(self.foreignAuthUrl) && size(self.foreignAuthUrl) > 0)",message="spec.clusterIdentity.clusterID is required unless spec.foreignAuthUrl is set to complete it from",fieldPath=".clusterIdentity.clusterID",reason="FieldValueRequired"
type ForeignClusterSpec struct {
	// ClusterIdentity identifies the remote cluster. The ClusterID cannot
	// change once set: a different ID is a different cluster.
	// +kubebuilder:validation:XValidation:rule="!has(oldSelf.clusterID) || size(oldSelf.clusterID) == 0 || (has(self.clusterID) && self.clusterID == oldSelf.clusterID)",message="clusterID is immutable once set",reason="FieldValueForbidden"
	ClusterIdentity ClusterIdentity `json:"clusterIdentity"`

	// Join requests an outgoing peering with the remote cluster.
	// +optional
	Join bool `json:"join,omitempty"`

	// OutgoingPeeringEnabled allows (Yes), forbids (No) or leaves to policy
	// (Auto) peering towards the remote cluster.
	// +kubebuilder:default=Auto
	// +optional
	OutgoingPeeringEnabled PeeringEnabled `json:"outgoingPeeringEnabled,omitempty"`

	// IncomingPeeringEnabled allows (Yes), forbids (No) or leaves to policy
	// (Auto) peering requests from the remote cluster.
	// +kubebuilder:default=Auto
	// +optional
	IncomingPeeringEnabled PeeringEnabled `json:"incomingPeeringEnabled,omitempty"`

	// NetworkingEnabled controls whether a network tunnel is built to the
	// remote cluster.
	// +kubebuilder:default=Auto
	// +optional
	NetworkingEnabled PeeringEnabled `json:"networkingEnabled,omitempty"`

	// NetworkReach is what the remote cluster may open connections to
	// through the tunnel: Peering (the default), the pods the peering
	// exposes to it (those this cluster runs for it, and its own in the
	// namespaces it offloads to it); AllPods, every pod of this cluster.
	// +kubebuilder:validation:Enum=Peering;AllPods
	// +kubebuilder:default=Peering
	// +optional
	NetworkReach string `json:"networkReach,omitempty"`

	// OffloadedNamespaces lists the namespace names this cluster, as a
	// provider, lets the remote cluster map its namespaces to, beyond the
	// names generated for it (<namespace>-<its suffix>), which it always
	// may use. A mapping with EnforceSameName or SelectedName needs its
	// name here: without it, a consumer could take a name this cluster
	// will want later (cert-manager, monitoring) before it does.
	// +optional
	OffloadedNamespaces *OffloadedNamespaces `json:"offloadedNamespaces,omitempty"`

	// ForeignAuthURL is the HTTPS URL of the remote cluster's auth service.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="size(self) == 0 || (isURL(self) && url(self).getScheme() == 'https' && size(url(self).getHost()) > 0)",message="foreignAuthUrl must be an https:// URL with a host"
	// +optional
	ForeignAuthURL string `json:"foreignAuthUrl,omitempty"`

	// InsecureSkipTLSVerify skips verification of the remote auth service's
	// certificate on first contact; the CA it presents is then pinned.
	// +kubebuilder:default=false
	// +optional
	InsecureSkipTLSVerify *bool `json:"insecureSkipTLSVerify,omitempty"`

	// TTL is how long, in seconds, a discovered cluster stays known without
	// being seen again; 0 means it never expires.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTL int32 `json:"ttl,omitempty"`
}

// Condition types of a ForeignCluster, one per phase of the peering.
const (
	ConditionDiscovered            = "Discovered"
	ConditionAuthenticated         = "Authenticated"
	ConditionPeeringRequested      = "PeeringRequested"
	ConditionAdvertisementAccepted = "AdvertisementAccepted"
	ConditionNetworkEstablished    = "NetworkEstablished"
	ConditionVirtualNodeReady      = "VirtualNodeReady"

	// ConditionReachable is False when the cluster missed its health checks
	// (and was not deleted for it, being joined or inserted by hand).
	ConditionReachable = "Reachable"
	// ConditionCATrusted is False when the remote CA changed or was marked
	// untrusted; its message says how to trust the new one.
	ConditionCATrusted = "CATrusted"
)

// Reasons of VirtualNodeReady.
const (
	// ReasonVirtualNodeReady: the virtual node is Ready and schedulable.
	ReasonVirtualNodeReady = "NodeReady"
	// ReasonVirtualNodeCordoned: the virtual node is Ready and cordoned
	// (spec.unschedulable): its pods run, no new pod is scheduled on it.
	ReasonVirtualNodeCordoned = "Cordoned"
	// ReasonProviderUnreachable: the provider's API server does not
	// answer; the virtual node is NotReady.
	ReasonProviderUnreachable = "ProviderUnreachable"
)

// DiscoverySource is one mechanism that sees the cluster.
type DiscoverySource struct {
	// Name identifies the mechanism: "mdns", or "searchdomain/<name>".
	Name string `json:"name"`
	// Type is the kind of discovery.
	Type DiscoveryType `json:"type"`
	// LastSeen is when the mechanism last saw the cluster.
	LastSeen metav1.Time `json:"lastSeen"`
	// MissedChecks counts consecutive health checks that found the
	// cluster no longer announced by this mechanism.
	// +optional
	MissedChecks int32 `json:"missedChecks,omitempty"`
}

// ForeignClusterStatus is what this cluster has observed of a remote one.
type ForeignClusterStatus struct {
	// Conditions hold one entry per phase of the peering, each with a reason
	// and a message an operator can act on.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// APIServerURL is the remote API server's address, as the auth service
	// announced it.
	// +optional
	APIServerURL string `json:"apiServerURL,omitempty"`

	// LastSeen is the last time discovery or a health check reached the
	// remote cluster.
	// +optional
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`

	// MissedHealthChecks counts consecutive failed health checks.
	// +optional
	MissedHealthChecks int32 `json:"missedHealthChecks,omitempty"`

	// TrustedCAFingerprint is the SHA-256 fingerprint of the remote CA this
	// cluster trusts.
	// +optional
	TrustedCAFingerprint string `json:"trustedCAFingerprint,omitempty"`

	// AuthServiceKeyFingerprint is the SHA-256 of the public key the remote
	// auth service presented on first contact, pinned: every later
	// connection to the auth service must present it, and discovery moves
	// spec.foreignAuthUrl only to an address that presents it.
	// +optional
	AuthServiceKeyFingerprint string `json:"authServiceKeyFingerprint,omitempty"`

	// PendingCAFingerprint is the fingerprint of a CA the remote cluster
	// presents that is not the trusted one: nothing is done with it until
	// an operator trusts it (liqoctl trust). Empty when there is none.
	// +optional
	PendingCAFingerprint string `json:"pendingCAFingerprint,omitempty"`

	// PendingAuthKeyFingerprint is the fingerprint of an auth service key
	// presented at spec.foreignAuthUrl that is not the pinned one: the
	// service is not spoken to until an operator trusts it (liqoctl trust).
	// Empty when there is none.
	// +optional
	PendingAuthKeyFingerprint string `json:"pendingAuthKeyFingerprint,omitempty"`

	// Sources are the discovery mechanisms that currently see the cluster.
	// +listType=map
	// +listMapKey=name
	// +optional
	Sources []DiscoverySource `json:"sources,omitempty"`

	// IncomingPeering is true when the remote cluster peers with this one.
	// +optional
	IncomingPeering bool `json:"incomingPeering,omitempty"`
}

// ForeignCluster is a remote cluster this cluster knows of, however it was
// found. There is one per ClusterID.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=fc
// +kubebuilder:printcolumn:name="Cluster ID",type=string,JSONPath=`.spec.clusterIdentity.clusterID`
// +kubebuilder:printcolumn:name="Cluster Name",type=string,JSONPath=`.spec.clusterIdentity.clusterName`
// +kubebuilder:printcolumn:name="Discovery",type=string,JSONPath=`.metadata.labels.discovery\.liqo\.io/discovery-type`
// +kubebuilder:printcolumn:name="Join",type=boolean,JSONPath=`.spec.join`
// +kubebuilder:printcolumn:name="Authenticated",type=string,JSONPath=`.status.conditions[?(@.type=="Authenticated")].status`
// +kubebuilder:printcolumn:name="Outgoing",type=string,JSONPath=`.status.conditions[?(@.type=="PeeringRequested")].status`
// +kubebuilder:printcolumn:name="Incoming",type=boolean,JSONPath=`.status.incomingPeering`
// +kubebuilder:printcolumn:name="Auth URL",type=string,JSONPath=`.spec.foreignAuthUrl`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ForeignCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ForeignClusterSpec `json:"spec"`
	// +optional
	Status ForeignClusterStatus `json:"status,omitempty"`
}

// ForeignClusterList is a list of ForeignCluster.
//
// +kubebuilder:object:root=true
type ForeignClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ForeignCluster `json:"items"`
}

func init() {
	register(&ForeignCluster{}, &ForeignClusterList{})
}
