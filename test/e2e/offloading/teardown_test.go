// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/playground"
	virtualnode "github.com/liqo-go/liqo/internal/virtualkubelet/node"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestUnpeerDrains: unpeering a provider drains its virtual node (the pods
// it ran are deleted there, and replaced on the other provider), and
// unpeering both leaves no Liqo-created object on any side. A test run
// after it peers again (peered).
func TestUnpeerDrains(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := context.Background()
	cl := framework.Client(t, a)
	const ns, replicas = "offload-teardown", 40
	offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote})
	// Its 40 pods would be offloaded again once a later test peers anew.
	framework.DeleteOnCleanup(t, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	startDeployment(t, ns, "web", replicas)
	if n := remotePods(t, ns, c); n == 0 {
		t.Fatalf("no pod runs in %s: the test needs both providers", c.Name)
	}

	t.Run("unpeering a provider moves its pods to the other", func(t *testing.T) {
		framework.SetJoin(t, a, c.ClusterID, false)
		framework.Eventually(t, 60*time.Second, func() error { return leftovers(t, a, c) })
		framework.Eventually(t, 2*time.Minute, func() error { return allRunning(t, ns, replicas) })
		framework.Eventually(t, 30*time.Second, func() error { return podPairs(t, ns, replicas) })
		if n := remotePods(t, ns, b); n != replicas {
			t.Errorf("%s runs %d pods, want all %d", b.Name, n, replicas)
		}
	})

	t.Run("unpeering the last provider leaves nothing", func(t *testing.T) {
		framework.SetJoin(t, a, b.ClusterID, false)
		framework.Eventually(t, 60*time.Second, func() error { return leftovers(t, a, b) })
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				t.Errorf("pod %s still bound to %s with no provider left", p.Name, p.Spec.NodeName)
			}
		}
	})
}

// leftovers reports what an offloading peering left on either side: the
// provider's namespaces and pods for the consumer and its NamespaceMap,
// the consumer's virtual node for the provider, and pods still bound to it.
func leftovers(t *testing.T, consumer, provider *playground.Member) error {
	t.Helper()
	ctx := context.Background()
	pc, cc := framework.Client(t, provider), framework.Client(t, consumer)
	var nss corev1.NamespaceList
	if err := pc.List(ctx, &nss, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}); err != nil {
		return err
	}
	if len(nss.Items) > 0 {
		return fmt.Errorf("%s keeps %d namespaces for %s (first %s, %s)", provider.Name, len(nss.Items), consumer.Name, nss.Items[0].Name, nss.Items[0].Status.Phase)
	}
	var pods corev1.PodList
	if err := pc.List(ctx, &pods, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}); err != nil {
		return err
	}
	if len(pods.Items) > 0 {
		return fmt.Errorf("%s keeps %d pods for %s", provider.Name, len(pods.Items), consumer.Name)
	}
	err := pc.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer.ClusterID), Name: offloadingv1alpha1.NamespaceMapName},
		&offloadingv1alpha1.NamespaceMap{})
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s keeps the NamespaceMap of %s (%w)", provider.Name, consumer.Name, err)
	}
	var nodes corev1.NodeList
	if err := cc.List(ctx, &nodes, client.MatchingLabels{offloadingv1alpha1.RemoteClusterLabel: provider.ClusterID}); err != nil {
		return err
	}
	if len(nodes.Items) > 0 {
		return fmt.Errorf("%s keeps virtual node %s", consumer.Name, nodes.Items[0].Name)
	}
	var local corev1.PodList
	if err := cc.List(ctx, &local); err != nil {
		return err
	}
	for _, p := range local.Items {
		if p.Spec.NodeName == virtualnode.Name(discoveryv1alpha1.ClusterIdentity{ClusterID: provider.ClusterID, ClusterName: provider.Name}) {
			return fmt.Errorf("pod %s/%s still bound to the removed virtual node", p.Namespace, p.Name)
		}
	}
	return nil
}
