// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/sharing"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestDaemonSetAndTolerationUpdate, in a namespace offloaded with Remote:
// a DaemonSet's pods (pinned by name to each node) run on each of the
// cluster's own nodes and on no virtual node, its template not tolerating
// their taint; an offloaded pod whose tolerations an update replaces keeps
// the virtual-node toleration, as the API server keeps those it added, and
// the update goes through.
func TestDaemonSetAndTolerationUpdate(t *testing.T) {
	peered(t)
	a, _, _ := members()
	ctx := context.Background()
	cl := framework.Client(t, a)
	const ns = "offload-pinned"
	offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote})

	var nodes corev1.NodeList
	if err := cl.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	var ownNodes []string
	for _, n := range nodes.Items {
		if !sharing.IsVirtual(&n) && !n.Spec.Unschedulable && len(n.Spec.Taints) == 0 {
			ownNodes = append(ownNodes, n.Name)
		}
	}
	if len(ownNodes) == 0 {
		t.Fatal("the consumer has no untainted node of its own")
	}
	labels := map[string]string{"app": "daemon"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "daemon"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	if err := cl.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	t.Run("a DaemonSet runs on the cluster's own nodes only", func(t *testing.T) {
		framework.Eventually(t, 2*time.Minute, func() error {
			var pods corev1.PodList
			if err := cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
				return err
			}
			var running []string
			for _, p := range pods.Items {
				if !slices.Contains(ownNodes, p.Spec.NodeName) {
					return fmt.Errorf("daemon pod %s on node %q, not one of the cluster's own %v", p.Name, p.Spec.NodeName, ownNodes)
				}
				if p.Status.Phase == corev1.PodRunning {
					running = append(running, p.Spec.NodeName)
				}
			}
			if len(running) != len(ownNodes) {
				return fmt.Errorf("daemon pods running on %v, want one on each of %v", running, ownNodes)
			}
			return nil
		})
	})

	t.Run("an update replacing an offloaded pod's tolerations keeps the virtual node's", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tolerations"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		}
		if err := cl.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, func() error {
			if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			if pod.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s is %s", pod.Name, pod.Status.Phase)
			}
			return nil
		})
		mine := corev1.Toleration{Key: "example.com/own", Operator: corev1.TolerationOpEqual, Value: "bar", Effect: corev1.TaintEffectNoSchedule}
		generation := pod.Generation
		// As a client that sets the list it wants: the API server puts
		// back the not-ready and unreachable tolerations it added, the
		// webhook the virtual node's. The virtual kubelet may write the pod's
		// status meanwhile.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			pod.Spec.Tolerations = []corev1.Toleration{mine}
			return cl.Update(ctx, pod)
		}); err != nil {
			t.Fatalf("updating the tolerations: %v", err)
		}
		if !slices.ContainsFunc(pod.Spec.Tolerations, func(tl corev1.Toleration) bool { return tl.Key == offloadingv1alpha1.VirtualNodeTaint }) ||
			!slices.Contains(pod.Spec.Tolerations, mine) {
			t.Errorf("tolerations after the update: %+v, want the new one and the virtual node's", pod.Spec.Tolerations)
		}
		if pod.Generation <= generation {
			t.Errorf("generation %d after the update, was %d", pod.Generation, generation)
		}
	})
}
