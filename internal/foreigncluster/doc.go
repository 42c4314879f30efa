// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package foreigncluster keeps one ForeignCluster per remote ClusterID,
// whatever found it. The Registry is what discovery mechanisms (mDNS,
// DNS-SD) report to; the Reconciler completes ForeignClusters from the
// remote auth service, pins and guards the remote CA, and remembers the
// operator's join choice; the Checker ages discovered clusters out and
// marks the others unreachable.
package foreigncluster
