// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterConfigName is the only name a ClusterConfig may have: the kind is a
// cluster-wide singleton, and the schema rejects any other name so that two
// configurations can never disagree.
const ClusterConfigName = "cluster"

// ClusterConfigSpec is the desired configuration of the local cluster's Liqo
// components. Every field takes effect at run time, without a restart.
//
// +kubebuilder:validation:XValidation:rule="!has(self.clusterName) || size(self.clusterName) == 0 || self.clusterName.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="clusterName must be a DNS label: lower-case letters, digits and '-'",fieldPath=".clusterName",reason="FieldValueInvalid"
type ClusterConfigSpec struct {
	// ClusterName is the human-readable name this cluster announces to its
	// peers. The controller manager's --cluster-name flag, when set, wins.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	ClusterName string `json:"clusterName,omitempty"`

	// DiscoveryConfig controls how this cluster finds peers and is found.
	// +kubebuilder:default={}
	// +optional
	DiscoveryConfig DiscoveryConfig `json:"discoveryConfig,omitempty"`

	// SharingConfig controls what this cluster offers and accepts.
	// +kubebuilder:default={}
	// +optional
	SharingConfig SharingConfig `json:"sharingConfig,omitempty"`

	// PeeringConfig controls who may peer with this cluster.
	// +kubebuilder:default={}
	// +optional
	PeeringConfig PeeringConfig `json:"peeringConfig,omitempty"`

	// NetworkConfig describes the address ranges of this cluster, used by the
	// network fabric to detect overlaps with peers and remap them.
	// +kubebuilder:default={}
	// +optional
	NetworkConfig NetworkConfig `json:"networkConfig,omitempty"`
}

// DiscoveryConfig holds the discovery switches of the seed design.
type DiscoveryConfig struct {
	// EnableAdvertisement publishes this cluster on the LAN with mDNS. Turning
	// it off withdraws the service with an mDNS goodbye packet.
	// +kubebuilder:default=true
	// +optional
	EnableAdvertisement *bool `json:"enableAdvertisement,omitempty"`

	// EnableDiscovery browses the LAN for other clusters.
	// +kubebuilder:default=true
	// +optional
	EnableDiscovery *bool `json:"enableDiscovery,omitempty"`

	// AutoJoin sets join on ForeignClusters found by discovery, so that they
	// peer without a manual step (subject to the peering policy).
	// +kubebuilder:default=false
	// +optional
	AutoJoin *bool `json:"autojoin,omitempty"`

	// TTL is the time-to-live, in seconds, of the records this cluster
	// announces.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +kubebuilder:default=90
	// +optional
	TTL int32 `json:"ttl,omitempty"`

	// MDNSInterface is the network interface mDNS binds to. mDNS stays off
	// until it is set: on a host with several interfaces, only the operator
	// knows which one is the LAN to share.
	// +kubebuilder:validation:MaxLength=15
	// +optional
	MDNSInterface string `json:"mdnsInterface,omitempty"`

	// MDNSPort is the UDP port of mDNS; 5353 on a real LAN. Test suites
	// use their own port so that they do not see each other.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=5353
	// +optional
	MDNSPort int32 `json:"mdnsPort,omitempty"`

	// ServiceName is the DNS-SD service type announced and browsed.
	// +kubebuilder:validation:Pattern=`^_[a-z0-9_-]+\._(tcp|udp)$`
	// +kubebuilder:default="_liqo_auth._tcp"
	// +optional
	ServiceName string `json:"serviceName,omitempty"`

	// Domain is the mDNS domain.
	// +kubebuilder:default="local."
	// +optional
	Domain string `json:"domain,omitempty"`

	// QueryIntervalSeconds is how often mDNS asks the LAN for clusters.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=10
	// +optional
	QueryIntervalSeconds int32 `json:"queryIntervalSeconds,omitempty"`

	// HealthCheckIntervalSeconds is how often discovered clusters are checked
	// for liveness.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=30
	// +optional
	HealthCheckIntervalSeconds int32 `json:"healthCheckIntervalSeconds,omitempty"`

	// MaxMissedHealthChecks is how many consecutive missed checks make a
	// discovered, not joined, cluster go away.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=3
	// +optional
	MaxMissedHealthChecks int32 `json:"maxMissedHealthChecks,omitempty"`

	// MaxDiscoveredClusters bounds the ForeignClusters that discovery
	// alone knows of (found on the LAN or through DNS, neither added by
	// hand nor peering with this cluster): beyond it, new clusters are not
	// recorded, and the drop is
	// counted in liqo_discovery_dropped_total{reason="too-many-clusters"}.
	// It keeps a flood of announcements from filling the API server.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:default=256
	// +optional
	MaxDiscoveredClusters int32 `json:"maxDiscoveredClusters,omitempty"`
}

// SharingConfig holds the resource-sharing policy.
type SharingConfig struct {
	// EnableBroadcaster makes this cluster advertise resources to the
	// clusters that peer with it.
	// +kubebuilder:default=true
	// +optional
	EnableBroadcaster *bool `json:"enableBroadcaster,omitempty"`

	// SharePercentage is the share of this cluster's free resources offered
	// to each peer.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=50
	// +optional
	SharePercentage int32 `json:"sharePercentage,omitempty"`

	// AutoAccept accepts every Advertisement that stays within
	// MaxAcceptedResources.
	// +kubebuilder:default=true
	// +optional
	AutoAccept *bool `json:"autoAccept,omitempty"`

	// MaxAcceptedResources caps the resources taken from one peer; an
	// Advertisement offering more is refused. Empty means no cap.
	// +optional
	MaxAcceptedResources corev1.ResourceList `json:"maxAcceptedResources,omitempty"`

	// PodSecurityLevel is the Pod Security Standard this cluster enforces
	// (label pod-security.kubernetes.io/enforce) on the namespaces it
	// creates for its consumers' pods. Whatever the level, the admission
	// policy liqo-offloaded-pods refuses host namespaces, host paths and
	// ports, and privileged containers from consumers.
	// +kubebuilder:validation:Enum=baseline;restricted
	// +kubebuilder:default=baseline
	// +optional
	PodSecurityLevel string `json:"podSecurityLevel,omitempty"`

	// AllowedPriorityClasses are the PriorityClasses consumers' pods may
	// run with here; none by default, so that no consumer preempts this
	// cluster's own pods (the admission policy liqo-offloaded-pods
	// refuses any other). The API server gives a pod that names no class
	// the cluster's globalDefault one, if there is one: list it here.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	// +optional
	AllowedPriorityClasses []string `json:"allowedPriorityClasses,omitempty"`

	// AllowedRuntimeClasses are the RuntimeClasses consumers' pods may
	// name here; none by default.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	// +optional
	AllowedRuntimeClasses []string `json:"allowedRuntimeClasses,omitempty"`

	// Price is what this cluster asks for what it offers, shown in its
	// offers, for brokers that compare providers.
	// +optional
	Price *Price `json:"price,omitempty"`

	// ConsumerQuota bounds, for each consumer across all the namespaces
	// this cluster makes for it, what an offer does not name: storage
	// claims and object counts. (Pods, CPU and memory, requests and
	// limits, and ephemeral storage are bounded by the offer itself.)
	// +optional
	ConsumerQuota ConsumerQuota `json:"consumerQuota,omitempty"`

	// ConsumerStorageClass is the StorageClass the volume claims of
	// consumers' pods are made with here (a consumer's claims of class
	// liqo): empty means this cluster's default class, the one annotated
	// storageclass.kubernetes.io/is-default-class, unless its volumes are
	// made by hand (kubernetes.io/no-provisioner: any Available one would
	// bind a consumer's claim; name such a class to share it). The class in force is
	// status.consumerStorageClass, which the offers name; the admission
	// policy liqo-offloaded-claims refuses a consumer's claim of any
	// other. consumerQuota bounds the claims (none by default).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ConsumerStorageClass string `json:"consumerStorageClass,omitempty"`
}

// Price is a provider's price per unit of its resources.
type Price struct {
	// PerUnit is the price of a unit of each resource (a core of cpu, a
	// GiB of memory, a pod, a GPU) per Period; never negative.
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, !string(self[k]).startsWith('-'))",message="a price is never negative"
	PerUnit corev1.ResourceList `json:"perUnit"`
	// Currency of PerUnit (ISO 4217).
	// +kubebuilder:validation:Pattern=`^[A-Z]{3}$`
	Currency string `json:"currency"`
	// Period PerUnit is per.
	// +kubebuilder:validation:Enum=Hour;Month
	// +kubebuilder:default=Hour
	// +optional
	Period string `json:"period,omitempty"`
}

// ConsumerQuota is what a consumer may keep here beyond its offer.
type ConsumerQuota struct {
	// PersistentVolumeClaims a consumer's pods may make, generic
	// ephemeral volumes included.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=0
	// +optional
	PersistentVolumeClaims *int64 `json:"persistentVolumeClaims,omitempty"`
	// Storage the claims may request in all.
	// +kubebuilder:default="0"
	// +optional
	Storage *resource.Quantity `json:"storage,omitempty"`
	// Secrets a consumer may keep.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=500
	// +optional
	Secrets *int64 `json:"secrets,omitempty"`
	// ConfigMaps a consumer may keep (each namespace holds one of its
	// own, kube-root-ca.crt).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=500
	// +optional
	ConfigMaps *int64 `json:"configMaps,omitempty"`
	// Services a consumer may keep.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=200
	// +optional
	Services *int64 `json:"services,omitempty"`
	// EndpointSlices a consumer may keep.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=400
	// +optional
	EndpointSlices *int64 `json:"endpointSlices,omitempty"`
	// PodDisruptionBudgets a consumer may keep; only a broker lets a
	// consumer write them, in the namespaces it orchestrates.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=50
	// +optional
	PodDisruptionBudgets *int64 `json:"podDisruptionBudgets,omitempty"`
}

// PeeringConfig holds the policy that decides who may peer with this cluster.
//
// +kubebuilder:validation:XValidation:rule="!has(self.allowedClusterIDs) || !has(self.deniedClusterIDs) || !self.allowedClusterIDs.exists(id, id in self.deniedClusterIDs)",message="a cluster ID cannot be both allowed and denied",fieldPath=".deniedClusterIDs",reason="FieldValueInvalid"
type PeeringConfig struct {
	// RequireToken makes the auth service demand the peering token from
	// every consumer that is not otherwise trusted.
	// +kubebuilder:default=true
	// +optional
	RequireToken *bool `json:"requireToken,omitempty"`

	// TrustLANPeers lets clusters discovered on the LAN peer without a token,
	// trusting their CA on first use.
	// +kubebuilder:default=false
	// +optional
	TrustLANPeers *bool `json:"trustLANPeers,omitempty"`

	// AllowedClusterIDs, when not empty, is the only set of clusters that may
	// peer with this one.
	// +kubebuilder:validation:MaxItems=256
	// +listType=set
	// +optional
	AllowedClusterIDs []string `json:"allowedClusterIDs,omitempty"`

	// DeniedClusterIDs may never peer with this cluster.
	// +kubebuilder:validation:MaxItems=256
	// +listType=set
	// +optional
	DeniedClusterIDs []string `json:"deniedClusterIDs,omitempty"`

	// Introducers are the clusters (brokers) whose introductions this
	// cluster accepts: a consumer one of them introduces peers with the
	// token this cluster writes in the Introduction, which works for that
	// consumer alone until this cluster deletes it. Each one must be a
	// peer (it writes its Introductions in its tenant namespace here). The
	// consumers still pass the rules above (allowed, denied, the cap).
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +optional
	Introducers []string `json:"introducers,omitempty"`

	// Brokers are the brokers (peers this cluster consumes) whose
	// introductions this cluster uses on its own: it peers, for the
	// network only (no virtual node), with every provider such a broker
	// introduced it to among those its Selection enables, so that its
	// pods reach the pods the broker runs there directly; a provider
	// disabled for BrokeredUnpeerAfterSeconds is unpeered.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +optional
	Brokers []string `json:"brokers,omitempty"`

	// BrokeredUnpeerAfterSeconds is how long a provider a broker
	// introduced stays peered once the Selection no longer enables it.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=600
	// +optional
	BrokeredUnpeerAfterSeconds int32 `json:"brokeredUnpeerAfterSeconds,omitempty"`

	// MaxIncomingPeerings caps the number of clusters peering with this one;
	// 0 means no cap.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxIncomingPeerings int32 `json:"maxIncomingPeerings,omitempty"`

	// ReconcilePeriodSeconds is how often both sides of a peering check that
	// everything it needs exists, and repair drift.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=30
	// +optional
	ReconcilePeriodSeconds int32 `json:"reconcilePeriodSeconds,omitempty"`
}

// NetworkConfig describes this cluster's address ranges.
type NetworkConfig struct {
	// PodCIDR is the range pod IPs are taken from.
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="podCIDR must be a CIDR such as 10.244.0.0/16"
	// +kubebuilder:validation:MaxLength=43
	// +optional
	PodCIDR string `json:"podCIDR,omitempty"`

	// ServiceCIDR is the range service cluster IPs are taken from.
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="serviceCIDR must be a CIDR such as 10.96.0.0/12"
	// +kubebuilder:validation:MaxLength=43
	// +optional
	ServiceCIDR string `json:"serviceCIDR,omitempty"`

	// ExternalCIDR is the range for addresses that are neither this
	// cluster's pods nor a peer's: the gateway's own address in the tunnel
	// is its first host. Peers remap it like the pod range.
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).ip().family() == 4 && cidr(self) == cidr(self).masked() && cidr(self).prefixLength() <= 30",message="externalCIDR must be a masked IPv4 CIDR of /30 or larger, such as 10.70.0.0/16"
	// +kubebuilder:validation:MaxLength=18
	// +kubebuilder:default="10.70.0.0/16"
	// +optional
	ExternalCIDR string `json:"externalCIDR,omitempty"`

	// ReservedSubnets are ranges the fabric must never use for remapping:
	// the nodes' network, anything routed beside the cluster.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="self.all(c, isCIDR(c))",message="every reserved subnet must be a CIDR"
	// +optional
	ReservedSubnets []string `json:"reservedSubnets,omitempty"`

	// RemappingPool is where a peer's range that overlaps one in use here
	// is remapped to; the private ranges of RFC 1918 when empty.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=18
	// +kubebuilder:validation:XValidation:rule="self.all(c, isCIDR(c) && cidr(c).ip().family() == 4)",message="every pool entry must be an IPv4 CIDR"
	// +optional
	RemappingPool []string `json:"remappingPool,omitempty"`
}

// ClusterConfigStatus reports the identity the controller manager settled on
// and whether the configuration is in force.
type ClusterConfigStatus struct {
	// ClusterID is this cluster's identity, stable across restarts.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`

	// ClusterName is the name in force (from the flag or the spec).
	// +optional
	ClusterName string `json:"clusterName,omitempty"`

	// AuthURL is the URL peers reach this cluster's auth service at.
	// +optional
	AuthURL string `json:"authURL,omitempty"`

	// ConsumerStorageClass is the StorageClass consumers' claims are
	// made with here: spec.sharingConfig.consumerStorageClass, or this
	// cluster's default class; empty when there is none (consumers
	// cannot keep volumes here).
	// +optional
	ConsumerStorageClass string `json:"consumerStorageClass,omitempty"`

	// Conditions say whether the configuration has been applied.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClusterConfig is the cluster-wide configuration of Liqo. Exactly one
// exists, named "cluster"; the controller manager creates it with defaults
// when it is missing.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=lcc
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'cluster'",message="ClusterConfig is a singleton: metadata.name must be 'cluster'"
// +kubebuilder:printcolumn:name="Cluster ID",type=string,JSONPath=`.status.clusterID`
// +kubebuilder:printcolumn:name="Cluster Name",type=string,JSONPath=`.status.clusterName`
// +kubebuilder:printcolumn:name="Discovery",type=boolean,JSONPath=`.spec.discoveryConfig.enableDiscovery`
// +kubebuilder:printcolumn:name="Autojoin",type=boolean,JSONPath=`.spec.discoveryConfig.autojoin`
// +kubebuilder:printcolumn:name="Share %",type=integer,JSONPath=`.spec.sharingConfig.sharePercentage`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:default={}
	// +optional
	Spec ClusterConfigSpec `json:"spec,omitempty"`
	// +optional
	Status ClusterConfigStatus `json:"status,omitempty"`
}

// ClusterConfigList is a list of ClusterConfig.
//
// +kubebuilder:object:root=true
type ClusterConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterConfig `json:"items"`
}

func init() {
	register(&ClusterConfig{}, &ClusterConfigList{})
}
