// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker"
	"github.com/liqo-go/liqo/internal/install"
)

// TestAggregator, against a real API server: a broker running the
// aggregator alone gives a new consumer a Selection that aggregates; its
// providers are every provider that answers but itself (also a provider
// of the broker here), its namespace is offloaded to them, it keeps no
// way to read its Selection (bindings an earlier orchestrator made go)
// and is introduced to none; its namespace and NamespaceOffloading are
// marked aggregated; a pod made before, whose affinity names providers,
// is made again; bin-packed, they are told the providers fullest first; a
// provider that fails is replaced, as under any policy.
func TestAggregator(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Aggregator: true}, Namespace: install.DefaultNamespace, FailoverAfter: 2 * time.Second})
	ctx := t.Context()
	const consumer, ns = "consumer-1", "web-5e6f7a"
	tenant := discoveryv1alpha1.TenantNamespace(consumer)
	providers(t, w, map[string]string{"one": "0.01", "two": "0.02"})
	// The consumer offers the broker its own resources too.
	w.create(t, peered(consumer, "milan", true, true), virtualNode("liqo-milan", consumer))
	w.create(t, offer(consumer, "0.001")...)
	measured(t, w, consumer, time.Millisecond, nil)
	// What an orchestrator gave it before: the means to read its Selection.
	labels := map[string]string{discoveryv1alpha1.ClusterIDLabel: consumer}
	w.create(t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: brokerv1alpha1.LoginClusterRole, Labels: labels},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: brokerv1alpha1.LoginClusterRole},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "liqo-consumer-" + consumer}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: brokerv1alpha1.ConsumerServiceAccount, Labels: labels},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: brokerv1alpha1.ConsumerServiceAccount},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: tenant, Name: brokerv1alpha1.ConsumerServiceAccount}}},
	)
	chosen := func(want ...string) {
		t.Helper()
		eventually(t, func() error {
			var sel brokerv1alpha1.Selection
			if err := w.c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
				return err
			}
			if !sel.Aggregated() || sel.Spec.Policy != nil {
				return fmt.Errorf("the consumer's Selection spec %+v, want it aggregated, with no policy of its own", sel.Spec)
			}
			if d := sel.Status.Decision; d == nil || !slices.Equal(d.Chosen, want) {
				return fmt.Errorf("decision %+v, want %v chosen", d, want)
			}
			for _, p := range sel.Status.Decision.Providers {
				if p.ClusterID == consumer && p.Verdict != brokerv1alpha1.VerdictExcluded {
					return fmt.Errorf("the consumer, as a provider of its own: %+v, want excluded", p)
				}
			}
			if got := sel.Offered(); slices.Contains(got, consumer) {
				return fmt.Errorf("offered %v: the consumer's own offer sold back to it", got)
			}
			var n corev1.Namespace
			if err := w.c.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
				return err
			}
			if got := n.Annotations[brokerv1alpha1.ProvidersAnnotation]; got != strings.Join(want, ",") {
				return fmt.Errorf("namespace %s offloaded to %q, want %q", ns, got, strings.Join(want, ","))
			}
			// Marked, for the broker's virtual kubelet to name no provider.
			var no offloadingv1alpha1.NamespaceOffloading
			if err := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
				return err
			}
			if n.Labels[brokerv1alpha1.AggregatedLabel] != "true" || no.Labels[brokerv1alpha1.AggregatedLabel] != "true" {
				return fmt.Errorf("namespace labels %v, its NamespaceOffloading's %v: want both marked aggregated", n.Labels, no.Labels)
			}
			return nil
		})
	}
	// Pods made before it was aggregated: one whose affinity names a
	// provider (as the pod webhook gave it then), one naming none.
	pod := func(name string, affinity corev1.NodeSelectorRequirement) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{
			NodeName: "liqo-one", Containers: []corev1.Container{{Name: "c", Image: "pause"}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{affinity}}}}}}}}
	}
	w.create(t,
		pod("named", corev1.NodeSelectorRequirement{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"one", "two"}}),
		pod("unnamed", corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"liqo-one"}}))
	chosen("one", "two")
	// The one that names providers is made again (evicted: the
	// consumer's virtual kubelet creates it anew, named nowhere).
	eventually(t, func() error {
		for name, want := range map[string]bool{"named": true, "unnamed": false} {
			var p corev1.Pod
			err := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)
			if client.IgnoreNotFound(err) != nil {
				return err
			}
			if gone := err != nil || p.DeletionTimestamp != nil; gone != want {
				return fmt.Errorf("pod %s gone or going: %v, want %v", name, gone, want)
			}
		}
		return nil
	})
	eventually(t, func() error {
		for _, name := range []string{brokerv1alpha1.LoginClusterRole, brokerv1alpha1.ConsumerServiceAccount} {
			if err := w.c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: name}, &rbacv1.RoleBinding{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("RoleBinding %s/%s still there (%w): the consumer could read its Selection", tenant, name, err)
			}
		}
		var intros discoveryv1alpha1.IntroductionList
		if err := w.c.List(ctx, &intros, client.InNamespace(install.DefaultNamespace)); err != nil {
			return err
		}
		if len(intros.Items) != 0 {
			return fmt.Errorf("%d introductions, want none: an aggregated consumer learns no provider", len(intros.Items))
		}
		return nil
	})

	// Bin-packed: the fullest provider first, for the pod webhook.
	for _, id := range []string{"one", "two"} {
		var n corev1.Node
		if err := w.c.Get(ctx, client.ObjectKey{Name: "liqo-" + id}, &n); err != nil {
			t.Fatal(err)
		}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi")}
		if err := w.c.Status().Update(ctx, &n); err != nil {
			t.Fatal(err)
		}
	}
	w.create(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big", Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}},
		Spec: corev1.PodSpec{NodeName: "liqo-two", Containers: []corev1.Container{{Name: "c", Image: "pause",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}}}})
	var sel brokerv1alpha1.Selection
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(sel.DeepCopy())
	sel.Spec.Aggregate.Placement = brokerv1alpha1.PlacementBinPack
	if err := w.c.Patch(ctx, &sel, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		var n corev1.Namespace
		if err := w.c.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
			return err
		}
		if got := n.Annotations[brokerv1alpha1.PackOrderAnnotation]; got != "two,one" {
			return fmt.Errorf("pack order %q, want two (half full) before one (empty)", got)
		}
		return nil
	})

	down := time.Now().Add(-time.Minute)
	measured(t, w, "one", 5*time.Millisecond, &down)
	chosen("two")
}
