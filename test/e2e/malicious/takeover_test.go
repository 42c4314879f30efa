// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestNamespaceCannotTakeOverAnother: two consumer namespaces that select
// the same provider namespace (SelectedName) cannot share it. The first
// claim sticks: a second namespace, even one whose name sorts first, is
// refused with a message naming the provider namespace, while the first
// stays Ready, keeps the provider namespace's origin annotation, and its
// pods keep running there, the same pods.
func TestNamespaceCannotTakeOverAnother(t *testing.T) {
	peered(t)
	a, b, _ := members()
	ctx := t.Context()
	inA, inB := framework.Client(t, a), framework.Client(t, b)
	const victim, taker, target = "zz-victim", "aa-taker", "shared-target"
	// A selected name needs the provider's leave.
	allowNames(t, b, a, &discoveryv1alpha1.OffloadedNamespaces{Names: []string{target}})
	spec := offloadingv1alpha1.NamespaceOffloadingSpec{
		NamespaceMappingStrategy: offloadingv1alpha1.SelectedNameMapping,
		RemoteNamespaceName:      target,
		PodOffloadingStrategy:    offloadingv1alpha1.PodOffloadingRemote,
		ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{b.ClusterID}}},
		}}},
	}

	if got := remoteNamespaceOf(t, offload(t, victim, spec, 1), b.ClusterID); got != target {
		t.Fatalf("%s offloads to %s in %s, want %s", victim, got, b.Name, target)
	}
	names := []string{"victim-0", "victim-1"}
	for _, name := range names {
		if err := inA.Create(ctx, pausePod(victim, name)); err != nil {
			t.Fatal(err)
		}
	}
	// podUIDs returns the UIDs of the victim's pods, local and in B, or
	// an error unless each is there, Running, and not being deleted.
	podUIDs := func() (local, remote map[string]types.UID, err error) {
		local, remote = map[string]types.UID{}, map[string]types.UID{}
		for _, name := range names {
			var lp, rp corev1.Pod
			if err := inA.Get(ctx, client.ObjectKey{Namespace: victim, Name: name}, &lp); err != nil {
				return nil, nil, err
			}
			if err := inB.Get(ctx, client.ObjectKey{Namespace: target, Name: name}, &rp); err != nil {
				return nil, nil, fmt.Errorf("the provider pod of %s: %w", name, err)
			}
			for _, p := range []*corev1.Pod{&lp, &rp} {
				if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
					return nil, nil, fmt.Errorf("pod %s/%s: phase %s, deleting %v; want Running", p.Namespace, p.Name, p.Status.Phase, p.DeletionTimestamp != nil)
				}
			}
			if rp.Annotations[offloadingv1alpha1.OriginUIDAnnotation] != string(lp.UID) {
				return nil, nil, fmt.Errorf("provider pod %s/%s backs UID %q, not %s", target, name, rp.Annotations[offloadingv1alpha1.OriginUIDAnnotation], lp.UID)
			}
			local[name], remote[name] = lp.UID, rp.UID
		}
		return local, remote, nil
	}
	var localBefore, remoteBefore map[string]types.UID
	framework.Eventually(t, 60*time.Second, func() error {
		var err error
		localBefore, remoteBefore, err = podUIDs()
		return err
	})

	startOffloading(t, taker, spec)
	framework.Eventually(t, 30*time.Second, func() error {
		var no offloadingv1alpha1.NamespaceOffloading
		if err := inA.Get(ctx, client.ObjectKey{Namespace: taker, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
			return err
		}
		if meta.IsStatusConditionTrue(no.Status.Conditions, offloadingv1alpha1.ConditionReady) {
			t.Fatalf("%s is Ready with %s taken: %+v", taker, target, no.Status)
		}
		for _, st := range no.Status.RemoteNamespaces {
			if st.ClusterID == b.ClusterID && st.Phase == offloadingv1alpha1.RemoteNamespaceFailed && strings.Contains(st.Message, target) {
				return nil
			}
		}
		return fmt.Errorf("%s has no failed entry for %s naming %s yet: %+v", taker, b.Name, target, no.Status)
	})
	if _, err := offloadingReady(t, victim); err != nil {
		t.Fatal(err)
	}
	var ns corev1.Namespace
	if err := inB.Get(ctx, client.ObjectKey{Name: target}, &ns); err != nil {
		t.Fatal(err)
	}
	if got := ns.Annotations[offloadingv1alpha1.OriginNamespaceAnnotation]; got != victim {
		t.Fatalf("namespace %s in %s: %s=%q, want %s", target, b.Name, offloadingv1alpha1.OriginNamespaceAnnotation, got, victim)
	}

	// Long enough for the provider and the virtual kubelet to have acted
	// on the second claim, had it been taken.
	requireReady(t, waitHeartbeats(t, a, b.ClusterID, 2))
	localAfter, remoteAfter, err := podUIDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if localAfter[name] != localBefore[name] || remoteAfter[name] != remoteBefore[name] {
			t.Errorf("pod %s: local UID %s, provider UID %s; were %s, %s", name, localAfter[name], remoteAfter[name], localBefore[name], remoteBefore[name])
		}
	}
	if _, err := offloadingReady(t, victim); err != nil {
		t.Fatal(err)
	}
	var after corev1.Namespace
	if err := inB.Get(ctx, client.ObjectKey{Name: target}, &after); err != nil {
		t.Fatal(err)
	}
	if got := after.Annotations[offloadingv1alpha1.OriginNamespaceAnnotation]; got != victim || after.UID != ns.UID {
		t.Fatalf("namespace %s in %s: %s=%q, UID %s; want %s and UID %s", target, b.Name, offloadingv1alpha1.OriginNamespaceAnnotation, got, after.UID, victim, ns.UID)
	}
}
