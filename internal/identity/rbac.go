// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package identity

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// EnsureRoleBinding creates or repairs, in namespace, a Role with rules and
// a RoleBinding of it to user.
func EnsureRoleBinding(ctx context.Context, c client.Client, namespace, name, user string, rules []rbacv1.PolicyRule, labels map[string]string) error {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, role, func() error {
		role.Labels = labels
		role.Rules = rules
		return nil
	}); err != nil {
		return fmt.Errorf("role %s/%s: %w", namespace, name, err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, binding, func() error {
		binding.Labels = labels
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
		binding.Subjects = []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
		return nil
	}); err != nil {
		return fmt.Errorf("RoleBinding %s/%s: %w", namespace, name, err)
	}
	return nil
}

// EnsureClusterRoleBinding creates or repairs, in namespace, a RoleBinding
// named name of subject to the ClusterRole clusterRole: the rights of the
// ClusterRole, in namespace alone. The binder needs no more than `bind`
// on that ClusterRole. A binding to anything else goes (its roleRef
// cannot change), and so does a Role of the same name left by an earlier
// version.
func EnsureClusterRoleBinding(ctx context.Context, c client.Client, namespace, name, clusterRole string, subject rbacv1.Subject, labels map[string]string) error {
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	err := c.Get(ctx, client.ObjectKeyFromObject(binding), binding)
	switch {
	case err == nil && binding.RoleRef == ref:
		if equality.Semantic.DeepEqual(binding.Subjects, []rbacv1.Subject{subject}) && equality.Semantic.DeepEqual(binding.Labels, labels) {
			return nil
		}
		binding.Subjects, binding.Labels = []rbacv1.Subject{subject}, labels
		if err := c.Update(ctx, binding); err != nil {
			return fmt.Errorf("RoleBinding %s/%s: %w", namespace, name, err)
		}
		return nil
	case err == nil:
		if err := c.Delete(ctx, binding); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("RoleBinding %s/%s to %s: %w", namespace, name, binding.RoleRef.Name, err)
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("RoleBinding %s/%s: %w", namespace, name, err)
	}
	if err := c.Delete(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing the Role %s/%s of an earlier version: %w", namespace, name, err)
	}
	binding = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		RoleRef: ref, Subjects: []rbacv1.Subject{subject}}
	if err := c.Create(ctx, binding); err != nil {
		return fmt.Errorf("RoleBinding %s/%s: %w", namespace, name, err)
	}
	return nil
}
