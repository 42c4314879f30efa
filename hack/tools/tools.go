//go:build tools

// Package tools pins the versions of the binaries that tests, the playground
// and code generation need. They are built into the repository's bin/ by
// `make tools`; nothing here is imported by the project itself.
package tools

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
	_ "golang.zx2c4.com/wireguard"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/metrics-server/cmd/metrics-server"
)
