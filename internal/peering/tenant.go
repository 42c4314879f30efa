// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
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
		// Never adopt a namespace made for another cluster (a consumer's
		// offloaded namespace, another peer's): its owner could delete it
		// or act in it.
		if owner := ns.Labels[offloadingv1alpha1.OriginClusterLabel]; owner != "" {
			return fmt.Errorf("namespace %s exists as a namespace of consumer %s: refusing to use it as the tenant namespace of %s", nsName, owner, peer)
		}
		if owner := ns.Labels[discoveryv1alpha1.ClusterIDLabel]; owner != "" && owner != peer {
			return fmt.Errorf("namespace %s belongs to cluster %s: refusing to use it as the tenant namespace of %s", nsName, owner, peer)
		}
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		for k, v := range peerLabels(peer) {
			ns.Labels[k] = v
		}
		ns.Labels[discoveryv1alpha1.TenantLabel] = "true"
		if ns.Annotations == nil {
			ns.Annotations = map[string]string{}
		}
		ns.Annotations[discoveryv1alpha1.TenantRoleAnnotationPrefix+roleName] = "true"
		return nil
	}); err != nil {
		return "", fmt.Errorf("tenant namespace %s: %w", nsName, err)
	}
	if err := identity.EnsureRoleBinding(ctx, c, nsName, roleName, user, rules, peerLabels(peer)); err != nil {
		return "", err
	}
	return nsName, nil
}

// releaseTenant removes one direction's Role, RoleBinding and mark from
// peer's tenant namespace; the namespace itself, which both directions of
// a two-way peering share, goes only when the other direction neither is
// active nor marks it. The namespace is deleted only in the version read,
// so a direction that starts meanwhile (and marks it) keeps it: without
// that, a peering starting while the other direction's reconciler looks
// at a PeeringRequest that does not exist lost its new namespace.
func releaseTenant(ctx context.Context, c client.Client, peer, roleName, otherRole string, otherDirectionActive bool) error {
	nsName := discoveryv1alpha1.TenantNamespace(peer)
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: nsName}, &ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !ns.DeletionTimestamp.IsZero() {
		return nil
	}
	own, other := discoveryv1alpha1.TenantRoleAnnotationPrefix+roleName, discoveryv1alpha1.TenantRoleAnnotationPrefix+otherRole
	if !otherDirectionActive && ns.Annotations[other] == "" {
		err := c.Delete(ctx, &ns, client.Preconditions{ResourceVersion: &ns.ResourceVersion})
		if apierrors.IsConflict(err) {
			return fmt.Errorf("tenant namespace %s changed while being released; looking again: %w", nsName, err)
		}
		return client.IgnoreNotFound(err)
	}
	// ensureTenant marks the namespace before it makes the Role, and the
	// mark goes last here: unmarked, this direction has nothing in it (a
	// consumer's Incoming reconciler, looking at a join with no request
	// from the provider, writes nothing).
	if _, ok := ns.Annotations[own]; !ok {
		return nil
	}
	for _, obj := range []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: roleName}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: roleName}},
	} {
		if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("releasing %s/%s: %w", nsName, roleName, err)
		}
	}
	patch := client.MergeFromWithOptions(ns.DeepCopy(), client.MergeFromWithOptimisticLock{})
	delete(ns.Annotations, own)
	return client.IgnoreNotFound(c.Patch(ctx, &ns, patch))
}

// tenantGone passes the deletion of a tenant namespace: what waited for it
// to go may make it again.
var tenantGone = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc: func(e event.DeleteEvent) bool {
		l := e.Object.GetLabels()
		return l[discoveryv1alpha1.TenantLabel] == "true" && l[discoveryv1alpha1.ClusterIDLabel] != ""
	},
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
// +kubebuilder:rbac:groups=offloading.liqo.io,resources=namespacemaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=sharing.liqo.io,resources=advertisements;advertisements/status,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=net.liqo.io,resources=networkconfigs,verbs=get;list;watch;create;update;patch;delete

var (
	objectVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

	// virtualKubeletRules: what a consumer's virtual kubelet does in its
	// tenant namespace: ask for the namespaces it offloads to, where the
	// provider binds the ClusterRole liqo-virtual-kubelet, and state the
	// consumer's network parameters (the status, how the provider sees
	// them, is the provider's answer).
	virtualKubeletRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"offloading.liqo.io"}, Resources: []string{"namespacemaps"}, Verbs: objectVerbs},
		{APIGroups: []string{"offloading.liqo.io"}, Resources: []string{"namespacemaps/status"}, Verbs: []string{"get"}},
		{APIGroups: []string{"net.liqo.io"}, Resources: []string{"networkconfigs"}, Verbs: objectVerbs},
	}
	// introducerRules: what a consumer this cluster accepts as an
	// introducer (ClusterConfig spec.peeringConfig.introducers) may do
	// besides, in its tenant namespace: introduce its own consumers. Any
	// other peer may write no Introduction at all, so none can grow this
	// cluster's cache of them.
	introducerRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"discovery.liqo.io"}, Resources: []string{"introductions"}, Verbs: objectVerbs},
	}
	// providerRules: what a provider does in its tenant namespace in the
	// consumer: manage its Advertisement (the admission policy
	// liqo-provider-advertisements holds it to its own name) and its
	// network parameters; the statuses, the consumer's decisions, are the
	// consumer's.
	providerRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"sharing.liqo.io"}, Resources: []string{"advertisements"}, Verbs: objectVerbs},
		{APIGroups: []string{"net.liqo.io"}, Resources: []string{"networkconfigs"}, Verbs: objectVerbs},
	}
)
