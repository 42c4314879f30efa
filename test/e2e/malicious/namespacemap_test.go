// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/offloading"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestNamespaceMapCannotSquat: the consumer's virtual kubelet cannot map,
// through its NamespaceMap in the provider, a consumer namespace to a
// provider namespace reserved to the provider or to another peer: another
// cluster's tenant namespace, a liqo-* or kube-* name, default. Each such
// write is refused, and once the provider has processed the
// NamespaceMap none of those namespaces was created or handed to the
// consumer.
func TestNamespaceMapCannotSquat(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	inB := framework.Client(t, b)
	// The NamespaceMap exists once something is offloaded to B.
	offload(t, "squat-probe", offloadingv1alpha1.NamespaceOffloadingSpec{}, 2)
	vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))
	nm := &offloadingv1alpha1.NamespaceMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: discoveryv1alpha1.TenantNamespace(a.ClusterID), Name: offloadingv1alpha1.NamespaceMapName,
	}}
	setMapping := func(ctx context.Context, cl client.Client, key string, remote *string) error {
		body, err := json.Marshal(map[string]any{"spec": map[string]any{"mappings": map[string]*string{key: remote}}})
		if err != nil {
			return err
		}
		return cl.Patch(ctx, nm.DeepCopy(), client.RawPatch(types.MergePatchType, body))
	}

	reserved := []struct{ key, remote string }{
		{"squat1", discoveryv1alpha1.TenantNamespace(c.ClusterID)},
		{"squat2", "liqo-anything"},
		{"squat3", "kube-system"},
		{"squat4", "kube-squat"},
		{"squat5", "default"},
	}
	// A mapping that slipped through stays until the end, so that the
	// checks below see what it did; t.Context() is done by then.
	var slipped []string
	t.Cleanup(func() {
		for _, key := range slipped {
			if err := setMapping(context.Background(), inB, key, nil); err != nil {
				t.Errorf("removing mapping %s: %v", key, err)
			}
		}
	})
	for _, tc := range reserved {
		t.Run(tc.remote, func(t *testing.T) {
			err := setMapping(ctx, vk, tc.key, &tc.remote)
			if err == nil {
				slipped = append(slipped, tc.key)
			}
			framework.Refused(t, fmt.Sprintf("mapping %s to %s", tc.key, tc.remote), err)
		})
	}

	// Until the provider has processed the NamespaceMap as it now is.
	framework.Eventually(t, 30*time.Second, func() error {
		var got offloadingv1alpha1.NamespaceMap
		if err := inB.Get(ctx, client.ObjectKeyFromObject(nm), &got); err != nil {
			return err
		}
		if got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("NamespaceMap observed generation %d, generation %d", got.Status.ObservedGeneration, got.Generation)
		}
		return nil
	})
	for _, tc := range reserved {
		var n corev1.Namespace
		err := inB.Get(ctx, client.ObjectKey{Name: tc.remote}, &n)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			t.Fatal(err)
		case tc.remote == "kube-system" || tc.remote == "default":
			// They exist: they must not have been handed to the consumer.
			if owner, ok := n.Labels[offloadingv1alpha1.OriginClusterLabel]; ok {
				t.Errorf("namespace %s carries %s=%s", tc.remote, offloadingv1alpha1.OriginClusterLabel, owner)
			}
			err := inB.Get(ctx, client.ObjectKey{Namespace: tc.remote, Name: offloading.VirtualKubeletRole}, &rbacv1.RoleBinding{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("namespace %s has the virtual kubelet's RoleBinding %s (%v)", tc.remote, offloading.VirtualKubeletRole, err)
			}
		default:
			t.Errorf("namespace %s was created in %s (labels %v, annotations %v)", tc.remote, b.Name, n.Labels, n.Annotations)
		}
	}
}

// TestReservedRemoteNameIsExplained: a local namespace whose default
// remote name falls under a reserved prefix is not offloaded, and its
// NamespaceOffloading says why instead of asking the providers again.
func TestReservedRemoteNameIsExplained(t *testing.T) {
	peered(t)
	a, _, _ := members()
	const ns = "liqo-demo"
	startOffloading(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{})
	framework.Eventually(t, 30*time.Second, func() error {
		var no offloadingv1alpha1.NamespaceOffloading
		if err := framework.Client(t, a).Get(t.Context(), client.ObjectKey{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
			return err
		}
		c := meta.FindStatusCondition(no.Status.Conditions, offloadingv1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ReservedRemoteName" || !strings.Contains(c.Message, "SelectedName") {
			return fmt.Errorf("NamespaceOffloading %s: Ready %+v, want False ReservedRemoteName naming the way out", ns, c)
		}
		return nil
	})
}
