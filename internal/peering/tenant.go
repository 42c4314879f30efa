// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
)

// ensureTenant creates or repairs the tenant namespace for peer, a Role in
// it with rules, and a RoleBinding of that Role to user.
func ensureTenant(ctx context.Context, c client.Client, peer, roleName, user string, rules []rbacv1.PolicyRule) (string, error) {
	nsName := discoveryv1alpha1.TenantNamespace(peer)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, ns, func() error {
		if !ns.DeletionTimestamp.IsZero() {
			return fmt.Errorf("namespace %s is being deleted; it is created again once gone", nsName)
		}
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		for k, v := range peerLabels(peer) {
			ns.Labels[k] = v
		}
		ns.Labels[discoveryv1alpha1.TenantLabel] = "true"
		return nil
	}); err != nil {
		return "", fmt.Errorf("tenant namespace %s: %w", nsName, err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: roleName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, role, func() error {
		role.Labels = peerLabels(peer)
		role.Rules = rules
		return nil
	}); err != nil {
		return "", fmt.Errorf("role %s/%s: %w", nsName, roleName, err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: roleName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, binding, func() error {
		binding.Labels = peerLabels(peer)
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName}
		binding.Subjects = []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
		return nil
	}); err != nil {
		return "", fmt.Errorf("RoleBinding %s/%s: %w", nsName, roleName, err)
	}
	return nsName, nil
}

// releaseTenant removes one direction's Role and RoleBinding from peer's
// tenant namespace; the namespace itself, which both directions of a
// two-way peering share, goes only when the other direction is not active.
func releaseTenant(ctx context.Context, c client.Client, peer, roleName string, otherDirectionActive bool) error {
	nsName := discoveryv1alpha1.TenantNamespace(peer)
	if !otherDirectionActive {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}}
		return client.IgnoreNotFound(c.Delete(ctx, ns))
	}
	for _, obj := range []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: roleName}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: roleName}},
	} {
		if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("releasing %s/%s: %w", nsName, roleName, err)
		}
	}
	return nil
}

// Names and rules of the tenant Roles.
const (
	// VirtualKubeletRole, in the provider's tenant namespace for a consumer,
	// is bound to liqo-virtual-kubelet-<consumer>.
	VirtualKubeletRole = "liqo-virtual-kubelet"
	// ProviderRole, in the consumer's tenant namespace for a provider, is
	// bound to liqo-provider-<provider>.
	ProviderRole = "liqo-provider"
)

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods;services;configmaps;secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=sharing.liqo.io,resources=advertisements;advertisements/status,verbs=get;list;watch;create;update;patch;delete

var (
	objectVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

	// virtualKubeletRules: what a consumer's virtual kubelet does in the
	// namespaces it offloads to (issue 5 binds the same Role there).
	virtualKubeletRules = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "services", "configmaps", "secrets"}, Verbs: objectVerbs},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: objectVerbs},
	}
	// providerRules: what a provider does in its tenant namespace in the
	// consumer: manage its Advertisements.
	providerRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"sharing.liqo.io"}, Resources: []string{"advertisements", "advertisements/status"}, Verbs: objectVerbs},
	}
)
