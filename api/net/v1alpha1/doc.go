// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package v1alpha1 holds the net.liqo.io/v1alpha1 API of the network
// fabric: the NetworkConfig a cluster writes into its tenant namespace in
// a peer (its ranges and its gateway; the peer answers with how it sees
// them), and the TunnelEndpoint each cluster keeps for each peer (what
// its gateway applies, and how the tunnel is doing).
//
// +kubebuilder:object:generate=true
// +groupName=net.liqo.io
package v1alpha1
