// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package virtualkubelet is Liqo's virtual kubelet, hosted in the
// controller manager, in the shape of virtual-kubelet's node package: the
// reflectors decide what a provider should run and hold, a provider
// (package provider, the contract) holds it.
//
//   - node: one virtual Node per accepted Advertisement, its Lease, its
//     readiness, its pods deleted when it goes.
//   - pods: each pod bound to a virtual node runs as a provider pod; the
//     provider pod's status flows back.
//   - token: the service account tokens a pod asks for, projected into
//     the provider.
//   - objects: ConfigMaps, Secrets and Services copied to the providers.
//   - api: the virtual nodes' kubelet API (logs, exec, attach,
//     port-forward).
//   - provider: the contract; provider/remote is the remote cluster behind
//     a peering, provider/memory an in-memory provider for tests.
//
// Setup wires them into a manager.
package virtualkubelet
