// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// allowNames has provider let consumer map its namespaces to the names
// allowed lists (its ForeignCluster for the consumer), until the test ends.
func allowNames(t *testing.T, provider, consumer *playground.Member, allowed *discoveryv1alpha1.OffloadedNamespaces) {
	t.Helper()
	c := framework.Client(t, provider)
	set := func(ctx context.Context, to *discoveryv1alpha1.OffloadedNamespaces) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			fc, err := foreigncluster.Find(ctx, c, consumer.ClusterID)
			if err != nil {
				return fmt.Errorf("the ForeignCluster of %s in %s: %w", consumer.Name, provider.Name, err)
			}
			if fc == nil {
				return fmt.Errorf("no ForeignCluster of %s in %s", consumer.Name, provider.Name)
			}
			fc.Spec.OffloadedNamespaces = to
			return c.Update(ctx, fc)
		})
	}
	if err := set(t.Context(), allowed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := set(context.Background(), nil); err != nil {
			t.Error(err)
		}
	})
}

// remoteFailure waits until the offloading of ns says that provider
// refused its namespace, and returns why.
func remoteFailure(t *testing.T, ns string, provider *playground.Member) string {
	t.Helper()
	a, _, _ := members()
	var msg string
	framework.Eventually(t, 30*time.Second, func() error {
		var no offloadingv1alpha1.NamespaceOffloading
		if err := framework.Client(t, a).Get(t.Context(), client.ObjectKey{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
			return err
		}
		for _, st := range no.Status.RemoteNamespaces {
			if st.ClusterID == provider.ClusterID && st.Phase == offloadingv1alpha1.RemoteNamespaceFailed {
				msg = st.Message
				return nil
			}
		}
		return fmt.Errorf("the offloading of %s: %+v, want %s Failed", ns, no.Status.RemoteNamespaces, provider.Name)
	})
	return msg
}

// TestConsumerCannotTakeNamesTheProviderWillUse: a consumer that keeps
// its namespace's name in the provider (EnforceSameName), or maps to a
// name of its choice through its NamespaceMap with its virtual kubelet's
// identity, gets neither unless the provider lists the name for it: a
// name such as cert-manager or monitoring stays free for the provider's
// own install later. The refusal says where the provider allows names.
// Once the provider allows a prefix for this consumer, names under it
// are made; a namespace that exists and is not the consumer's is never
// handed over. The other provider serves throughout.
func TestConsumerCannotTakeNamesTheProviderWillUse(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	inB := framework.Client(t, b)
	same := offloadingv1alpha1.NamespaceOffloadingSpec{NamespaceMappingStrategy: offloadingv1alpha1.EnforceSameNameMapping}

	startOffloading(t, "cert-manager", same)
	if msg := remoteFailure(t, "cert-manager", b); !strings.Contains(msg, "spec.offloadedNamespaces") {
		t.Errorf("the refusal of cert-manager does not say where the provider allows names: %q", msg)
	}
	// Straight through the NamespaceMap, as the consumer's virtual
	// kubelet.
	vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))
	key := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(a.ClusterID), Name: offloadingv1alpha1.NamespaceMapName}
	var nm offloadingv1alpha1.NamespaceMap
	framework.Allowed(t, "the virtual kubelet mapping monitoring", retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := vk.Get(ctx, key, &nm); err != nil {
			return err
		}
		nm.Spec.Mappings["monitoring"] = "monitoring"
		return vk.Update(ctx, &nm)
	}))
	t.Cleanup(func() {
		_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := inB.Get(context.Background(), key, &nm); err != nil {
				return err
			}
			delete(nm.Spec.Mappings, "monitoring")
			return inB.Update(context.Background(), &nm)
		})
	})
	framework.Eventually(t, 30*time.Second, func() error {
		if err := inB.Get(ctx, key, &nm); err != nil {
			return err
		}
		st, ok := nm.Status.Namespaces["monitoring"]
		if nm.Status.ObservedGeneration != nm.Generation || !ok || st.Phase != offloadingv1alpha1.RemoteNamespaceFailed {
			return fmt.Errorf("the NamespaceMap's status of monitoring: %+v (generation %d observed %d), want Failed", st, nm.Generation, nm.Status.ObservedGeneration)
		}
		return nil
	})
	for _, name := range []string{"cert-manager", "monitoring"} {
		if err := inB.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace %s exists in %s (%v): the consumer took it", name, b.Name, err)
		}
	}

	// The provider allows a prefix for this consumer: names under it are
	// made, others still refused; a namespace of the provider's own
	// under it is never handed over.
	allowNames(t, b, a, &discoveryv1alpha1.OffloadedNamespaces{Prefixes: []string{"team-"}})
	own := &corev1.Namespace{}
	own.Name = "team-provider"
	if err := inB.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	framework.DeleteOnCleanup(t, inB, own)
	sameOnB := same
	sameOnB.ClusterSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{b.ClusterID}}},
	}}}
	if got := remoteNamespaceOf(t, offload(t, "team-x", sameOnB, 1), b.ClusterID); got != "team-x" {
		t.Errorf("team-x offloads to %s in %s, want team-x", got, b.Name)
	}
	startOffloading(t, "team-provider", sameOnB)
	if msg := remoteFailure(t, "team-provider", b); !strings.Contains(msg, "not this consumer's") {
		t.Errorf("the provider's own team-provider: %q, want it refused as not the consumer's", msg)
	}
	if err := inB.Get(ctx, client.ObjectKeyFromObject(own), own); err != nil || own.Labels[offloadingv1alpha1.OriginClusterLabel] != "" {
		t.Errorf("the provider's own namespace team-provider: labels %v, %v", own.Labels, err)
	}
	requireReady(t, waitHeartbeats(t, a, c.ClusterID, 1))
}
