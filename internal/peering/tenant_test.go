// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/liqo-go/liqo/api"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
)

// TestReleaseTenantKeepsTheOtherDirection: the incoming direction's
// cleanup (for a PeeringRequest that does not exist) runs while this
// cluster's own peering towards the same cluster has just made the tenant
// namespace, before it holds the finalizer the cleanup looks at. The
// namespace is marked as the outgoing direction's, so it stays; before,
// it was deleted and the new peering waited for it to come back.
func TestReleaseTenantKeepsTheOtherDirection(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).Build()
	if _, err := ensureTenant(ctx, c, "peer", ProviderRole, "liqo-provider-peer", providerRules); err != nil {
		t.Fatal(err)
	}
	if err := releaseTenant(ctx, c, "peer", VirtualKubeletRole, ProviderRole, false); err != nil {
		t.Fatal(err)
	}
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: discoveryv1alpha1.TenantNamespace("peer")}, &ns); err != nil {
		t.Fatalf("the tenant namespace of the outgoing peering went with the incoming one's release: %v", err)
	}
	// Once the outgoing direction releases it too, it goes.
	if err := releaseTenant(ctx, c, "peer", ProviderRole, VirtualKubeletRole, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(&ns), &ns); !apierrors.IsNotFound(err) {
		t.Fatalf("the tenant namespace is still there after both directions released it: %v", err)
	}
}

// TestReleaseTenantKeepsItsMarkOnlyForItself: in a two-way peering, the
// direction that ends removes its Role, binding and mark, and leaves the
// namespace and the other direction's Role.
func TestReleaseTenantKeepsItsMarkOnlyForItself(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).Build()
	for _, role := range []string{ProviderRole, VirtualKubeletRole} {
		if _, err := ensureTenant(ctx, c, "peer", role, "user-"+role, providerRules); err != nil {
			t.Fatal(err)
		}
	}
	if err := releaseTenant(ctx, c, "peer", VirtualKubeletRole, ProviderRole, false); err != nil {
		t.Fatal(err)
	}
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: discoveryv1alpha1.TenantNamespace("peer")}, &ns); err != nil {
		t.Fatal(err)
	}
	if _, ok := ns.Annotations[discoveryv1alpha1.TenantRoleAnnotationPrefix+VirtualKubeletRole]; ok {
		t.Errorf("the released direction still marks the namespace: %v", ns.Annotations)
	}
	if _, ok := ns.Annotations[discoveryv1alpha1.TenantRoleAnnotationPrefix+ProviderRole]; !ok {
		t.Errorf("the other direction's mark is gone: %v", ns.Annotations)
	}
	for role, want := range map[string]bool{ProviderRole: true, VirtualKubeletRole: false} {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: role}, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}})
		if got := err == nil; got != want {
			t.Errorf("Role %s present: %v, want %v (%v)", role, got, want, err)
		}
	}
}

// TestReleaseTenantUnmarkedWritesNothing: a direction that never marked
// the namespace has nothing in it, and its release, which the consumer
// runs on every reconcile of a join the provider has not answered yet,
// writes nothing.
func TestReleaseTenantUnmarkedWritesNothing(t *testing.T) {
	ctx := context.Background()
	var writes []string
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			writes = append(writes, fmt.Sprintf("delete %T %s", obj, obj.GetName()))
			return c.Delete(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			writes = append(writes, fmt.Sprintf("patch %T %s", obj, obj.GetName()))
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	if _, err := ensureTenant(ctx, c, "peer", ProviderRole, "liqo-provider-peer", providerRules); err != nil {
		t.Fatal(err)
	}
	writes = nil
	if err := releaseTenant(ctx, c, "peer", VirtualKubeletRole, ProviderRole, true); err != nil {
		t.Fatal(err)
	}
	if len(writes) != 0 {
		t.Errorf("releasing a direction that never marked the namespace wrote %q", writes)
	}
	// The marked direction's release still removes its Role and mark.
	if err := releaseTenant(ctx, c, "peer", ProviderRole, VirtualKubeletRole, true); err != nil {
		t.Fatal(err)
	}
	if len(writes) != 3 {
		t.Errorf("releasing the marked direction wrote %q, want its RoleBinding, Role and mark", writes)
	}
}
