// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package offloading decides which namespaces offload where. On the
// consumer, the NamespaceOffloading controller picks the providers a
// namespace offloads to and asks each, through a NamespaceMap in its tenant
// namespace there, for the namespace that receives the pods; a mutating
// webhook lets the namespace's pods onto the matching virtual nodes. On the
// provider, the NamespaceMap controller creates those namespaces and binds
// the consumer's virtual kubelet in each (docs/offloading.md).
package offloading
