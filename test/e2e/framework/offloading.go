// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/playground"
	virtualnode "github.com/liqo-go/liqo/internal/virtualkubelet/node"
)

// WaitVirtualNodesReady waits until consumer has a Ready virtual node for
// each provider.
func WaitVirtualNodesReady(t testing.TB, consumer *playground.Member, providers ...*playground.Member) {
	t.Helper()
	for _, p := range providers {
		Eventually(t, 60*time.Second, func() error {
			n, err := VirtualNode(Client(t, consumer), p.ClusterID)
			if err != nil {
				return err
			}
			if virtualnode.Ready(n) != corev1.ConditionTrue {
				return fmt.Errorf("virtual node %s not Ready", n.Name)
			}
			return nil
		})
	}
}

// StartOffloading creates namespace ns in consumer with a
// NamespaceOffloading; both go when the test ends, once their namespaces
// in providers are gone too (CleanupOffloadedNamespace). It does not wait
// for the offloading to be Ready.
func StartOffloading(t testing.TB, consumer *playground.Member, providers []*playground.Member, ns string, spec offloadingv1alpha1.NamespaceOffloadingSpec) *offloadingv1alpha1.NamespaceOffloading {
	t.Helper()
	CleanupOffloadedNamespace(t, consumer, providers, ns)
	c := Client(t, consumer)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	no := &offloadingv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, Spec: spec}
	if err := c.Create(ctx, no); err != nil {
		t.Fatal(err)
	}
	return no
}

// Offload is StartOffloading followed by the wait until the offloading is
// Ready with want provider namespaces; it returns their status entries.
func Offload(t testing.TB, consumer *playground.Member, providers []*playground.Member, ns string, spec offloadingv1alpha1.NamespaceOffloadingSpec, want int) []offloadingv1alpha1.RemoteNamespaceStatus {
	t.Helper()
	no := StartOffloading(t, consumer, providers, ns, spec)
	Eventually(t, 30*time.Second, func() error {
		got, err := OffloadingReady(t, consumer, ns)
		if err != nil {
			return err
		}
		if len(got.Status.RemoteNamespaces) != want {
			return fmt.Errorf("NamespaceOffloading %s has %d provider namespaces, want %d: %+v", ns, len(got.Status.RemoteNamespaces), want, got.Status)
		}
		no = got
		return nil
	})
	return no.Status.RemoteNamespaces
}

// OffloadingReady returns the NamespaceOffloading of ns in consumer, or an
// error unless its Ready condition is True.
func OffloadingReady(t testing.TB, consumer *playground.Member, ns string) (*offloadingv1alpha1.NamespaceOffloading, error) {
	t.Helper()
	var no offloadingv1alpha1.NamespaceOffloading
	if err := Client(t, consumer).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
		return nil, err
	}
	if cond := meta.FindStatusCondition(no.Status.Conditions, offloadingv1alpha1.ConditionReady); cond == nil || cond.Status != metav1.ConditionTrue {
		return nil, fmt.Errorf("NamespaceOffloading %s not Ready: %+v", ns, no.Status)
	}
	return &no, nil
}

// CleanupOffloadedNamespace deletes ns in consumer when the test ends and
// waits until its namespaces in providers are gone too.
func CleanupOffloadedNamespace(t testing.TB, consumer *playground.Member, providers []*playground.Member, ns string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.Background()
		_ = Client(t, consumer).Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		Eventually(t, 90*time.Second, func() error {
			for _, p := range providers {
				var list corev1.NamespaceList
				if err := Client(t, p).List(ctx, &list, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}); err != nil {
					return err
				}
				for _, n := range list.Items {
					if n.Annotations[offloadingv1alpha1.OriginNamespaceAnnotation] == ns {
						return fmt.Errorf("%s still has namespace %s (%s)", p.Name, n.Name, n.Status.Phase)
					}
				}
			}
			if err := Client(t, consumer).Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s still there (%w)", ns, err)
			}
			return nil
		})
	})
}

// AllRunning says why namespace ns of c does not hold exactly want pods,
// all Running and none being deleted; nil when it does.
func AllRunning(ctx context.Context, c client.Client, ns string, want int) error {
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return err
	}
	running := 0
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running++
		}
	}
	if running != want || len(list.Items) != want {
		return fmt.Errorf("namespace %s has %d pods, %d Running, want %d", ns, len(list.Items), running, want)
	}
	return nil
}

// PodsFor counts the pods c's cluster runs for the cluster origin (its
// origin label), not being deleted.
func PodsFor(ctx context.Context, c client.Client, origin string) (int, error) {
	var list corev1.PodList
	if err := c.List(ctx, &list, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: origin}); err != nil {
		return 0, err
	}
	n := 0
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}
