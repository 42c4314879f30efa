// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

const (
	// VirtualKubeletRole is the Role, in each provider namespace, bound to
	// the consumer's virtual kubelet.
	VirtualKubeletRole = "liqo-virtual-kubelet"
)

// +kubebuilder:rbac:groups="",resources=pods;services;configmaps;secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=pods/exec;pods/attach;pods/portforward,verbs=get;create
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;patch;delete

// VirtualKubeletRules is what a consumer's virtual kubelet may do in a
// provider namespace it offloads to: run pods, read their logs, exec into
// them, and manage the objects they need.
var VirtualKubeletRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods", "services", "configmaps", "secrets"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
	{APIGroups: []string{""}, Resources: []string{"pods/exec", "pods/attach", "pods/portforward"}, Verbs: []string{"get", "create"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
}
