// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package localcluster starts real Kubernetes clusters on this machine, for
// tests, benchmarks and the playground: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler as local processes built from
// their Go modules (see hack/tools), and kwok simulating the worker nodes.
//
// Every cluster lives in its own directory, which holds its certificates,
// etcd data, logs, an admin kubeconfig and a state file listing the process
// groups it started. Everything listens on 127.0.0.1 only.
//
// Processes are never left behind: each runs in its own process group; when
// the caller owns them (the default) they are also killed by the kernel if
// the caller dies (Pdeathsig), and Stop kills every group. Detached clusters
// (the playground) outlive the command that started them and are stopped
// with StopDir from any process. Reap is the last line of defence: it kills
// any process whose command line mentions a cluster directory.
package localcluster
