// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package clusterconfig keeps the ClusterConfig singleton in place and
// publishes the configuration in force to the rest of the controller
// manager. The singleton is recreated with defaults if deleted, and its
// status reports the cluster identity the controller manager settled on.
package clusterconfig
