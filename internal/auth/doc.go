// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package auth is the cluster's auth service: an HTTPS endpoint, served by
// the controller manager, that tells peers who this cluster is (ClusterID,
// name, API server URL, Liqo namespace) and hands out its CA certificate.
// Discovery points at it (a ForeignCluster's foreignAuthUrl); peering adds
// the token exchange to the same service.
package auth
