// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

const (
	// VirtualKubeletRole is the RoleBinding, in each provider namespace,
	// of the consumer's virtual kubelet to the ClusterRole of the same
	// name (the chart's files/rbac/peers.yaml).
	VirtualKubeletRole = "liqo-virtual-kubelet"
	// TokenRequesterRole is the RoleBinding, in each namespace this
	// cluster offloads, of the controller manager to the ClusterRole of
	// the same name: it requests the tokens of that namespace's service
	// accounts for the offloaded pods that ask, and no other.
	TokenRequesterRole = "liqo-token-requester" //nolint:gosec // a role's name, not a credential
	// SlicePrunerRole is the RoleBinding, in each provider namespace, of
	// the controller manager to the ClusterRole of the same name: it
	// deletes there the consumer's EndpointSlices that name what the
	// consumer may no longer name (EndpointSlicePruner), and no other.
	SlicePrunerRole = "liqo-endpointslice-pruner"
	// ShadowPodKeeperRole is the RoleBinding, in each provider namespace,
	// of the controller manager to the ClusterRole of the same name: it
	// makes there the pods the consumer's ShadowPods keep
	// (ShadowPodReconciler), and nowhere else.
	ShadowPodKeeperRole = "liqo-shadowpod-keeper"
)

// The controller manager binds the peers' ClusterRoles; it holds none of
// their rights itself.
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,resourceNames=liqo-virtual-kubelet;liqo-token-requester;liqo-endpointslice-pruner;liqo-shadowpod-keeper,verbs=bind
