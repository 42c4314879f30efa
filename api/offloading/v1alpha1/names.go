// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

// Labels, annotations, taints and finalizers of offloading: on virtual
// nodes, on consumer namespaces and pods, and on what a provider runs for
// a consumer.
const (
	// VirtualNodeLabel marks the virtual nodes Liqo creates; they are never
	// counted as the cluster's own resources.
	VirtualNodeLabel = "offloading.liqo.io/type"
	// VirtualNodeValue is VirtualNodeLabel's value on a virtual node.
	VirtualNodeValue = "virtual-node"
	// RemoteClusterLabel carries, on a virtual node, the provider's ClusterID.
	RemoteClusterLabel = "offloading.liqo.io/remote-cluster-id"
	// VirtualNodeTaint keeps every pod that does not tolerate it off
	// virtual nodes.
	VirtualNodeTaint = "offloading.liqo.io/virtual-node"
	// VirtualNodeNameAnnotation records, on a provider's ForeignCluster, the
	// name its virtual node was given: the name stays the provider's,
	// reserved, even while the node is gone.
	VirtualNodeNameAnnotation = "offloading.liqo.io/virtual-node-name"
	// PoolLabel carries, on a virtual node for one pool of a provider's
	// offer (an Advertisement's pools), the pool's key: a hash of its
	// selector (PoolSelectorAnnotation), which the node's name ends with.
	PoolLabel = "offloading.liqo.io/pool"
	// PoolSelectorAnnotation carries, on a pool's virtual node, the pool
	// as a label selector (region=eu,!zone: its labels, and those it
	// lacks), which the node's pods are placed by at the provider.
	PoolSelectorAnnotation = "offloading.liqo.io/pool-selector"
	// LargestPodsAnnotation carries, on a virtual node, the largest pods
	// its offer can take (the Advertisement's largestPods, as JSON): a
	// pod none of them holds is not bound to the node.
	LargestPodsAnnotation = "offloading.liqo.io/largest-pods"

	// OffloadingEnabledLabel marks a consumer namespace that has a
	// NamespaceOffloading: the pod webhook selects namespaces by it, so
	// that a webhook outage only ever affects offloaded namespaces.
	OffloadingEnabledLabel = "offloading.liqo.io/enabled"
	// NamespacesFinalizer holds a NamespaceOffloading until its provider
	// namespaces are released.
	NamespacesFinalizer = "offloading.liqo.io/namespaces"

	// OriginClusterLabel names, on what a provider runs for a consumer
	// (namespaces, pods, objects), that consumer.
	OriginClusterLabel = "offloading.liqo.io/origin-cluster-id"
	// EndpointSliceManagedBy is the endpointslice.kubernetes.io/managed-by
	// value of the EndpointSlices a consumer's virtual kubelet writes in a
	// provider: the provider's own EndpointSlice controller leaves them
	// alone, and the provider holds the consumer to it (what it checks
	// again is found by it).
	EndpointSliceManagedBy = "virtual-kubelet.liqo.io"
	// ForClusterLabel names, on what a broker offloads in turn for one of
	// its consumers, that consumer: the provider lets the consumer reach
	// those pods when the broker introduced it (the direct data plane).
	// The virtual kubelet sets it from its own origin label, never from
	// the consumer's object.
	ForClusterLabel = "offloading.liqo.io/for-cluster-id"
	// DNSServiceLabel marks, in a provider's Liqo namespace, the Service
	// one consumer's offloaded pods ask DNS at (the consumer named by
	// OriginClusterLabel): the provider's DNS proxy answers there with the
	// consumer's namespace names (internal/offloading/dnsproxy).
	DNSServiceLabel = "offloading.liqo.io/dns"
	// ConsumerDNSAnnotation marks a provider pod whose DNS the consumer's
	// virtual kubelet pointed at the provider's DNS for it (the pod asked
	// for ClusterFirst, with no dnsConfig of its own). A cluster that
	// offloads such a pod in turn (a broker) gives it ClusterFirst again
	// before it looks at its own provider's DNS.
	ConsumerDNSAnnotation = "offloading.liqo.io/consumer-dns"
	// OriginUIDAnnotation records, on a provider copy, the UID of the
	// consumer object it reflects: a copy of an older object of the same
	// name is replaced, never taken for the new one.
	OriginUIDAnnotation = "offloading.liqo.io/origin-uid"
	// OriginNamespaceAnnotation records, on a provider copy or namespace,
	// the consumer namespace it comes from.
	OriginNamespaceAnnotation = "offloading.liqo.io/origin-namespace"

	// ServiceAccountTokenAnnotation asks, set to "true" on a pod, for its
	// service account token in the provider: the virtual kubelet requests
	// a token bound to the local pod, keeps it in a Secret of the provider
	// namespace and mounts it where the pod expects its token. Without it
	// an offloaded pod gets no token of the consumer.
	ServiceAccountTokenAnnotation = "offloading.liqo.io/service-account-token"
)

// IsVirtualNode reports whether labels are those of a Liqo virtual node.
func IsVirtualNode(labels map[string]string) bool {
	return labels[VirtualNodeLabel] == VirtualNodeValue
}

// ConditionReady is the NamespaceOffloading condition that says whether
// every selected provider has its namespace.
const ConditionReady = "Ready"

// ReasonProviderRejected is the reason of a local pod that failed because
// the provider refused to run it (its Pod Security level, Liqo's admission
// policy for consumers, an invalid spec), as a kubelet fails a pod it
// cannot admit.
const ReasonProviderRejected = "ProviderRejected"

// The pod condition that says whether a provider pod's address is shown
// on the consumer's pod, and its reasons. The consumer shows a provider
// pod's IP only as the network fabric agreed it: inside the provider's
// pod or external range, translated into how the consumer sees them.
// Any other address is the provider's choice, and the consumer's
// EndpointSlices would send its own clients there.
const (
	ConditionPodAddress = "offloading.liqo.io/PodAddress"
	// ReasonAddressTranslated: the provider's address, as this cluster
	// reaches it through the tunnel.
	ReasonAddressTranslated = "Translated"
	// ReasonNoNetwork: no network is agreed with the provider: its
	// addresses would not be reachable.
	ReasonNoNetwork = "NoNetwork"
	// ReasonAddressOutsideRanges: the provider reported an address
	// outside the ranges agreed with it.
	ReasonAddressOutsideRanges = "OutsideAgreedRanges"
	// ReasonTransit: on an aggregator, the address of its external range
	// through which the consumer reaches the pod placed at a provider
	// (its gateway leads it there); the provider's is not shown.
	ReasonTransit = "Transit"
	// ReasonNoTransit: on an aggregator, no transit address is assigned
	// to the pod (yet): the consumer is shown no address.
	ReasonNoTransit = "NoTransit"
	// ReasonAddressDirect: the address of the pod in the provider a
	// broker runs it in, as this cluster reaches it through its own
	// tunnel with that provider.
	ReasonAddressDirect = "TranslatedDirect"
)

// ConditionProviderAddress is on a pod a broker runs for a consumer, and
// says where it runs: its reason is the provider's ClusterID, its message the
// pod's addresses in that provider (comma-separated), before the broker's
// own translation. The consumer's virtual kubelet copies it with the
// pod's other conditions and, with a tunnel of its own to that provider,
// shows those addresses as it reaches them.
const ConditionProviderAddress = "offloading.liqo.io/ProviderAddress"

// ReadyRemoteNamespace returns the namespace no offloads to in provider,
// once the provider reported it Ready.
func (no *NamespaceOffloading) ReadyRemoteNamespace(provider string) (string, bool) {
	for _, st := range no.Status.RemoteNamespaces {
		if st.ClusterID == provider && st.Phase == RemoteNamespaceReady {
			return st.Namespace, true
		}
	}
	return "", false
}
