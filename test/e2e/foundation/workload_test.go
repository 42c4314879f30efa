// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package foundation_test

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestKwokRunsADeployment: the kwok node is Ready and a 100-pod Deployment
// reaches Running on it, scheduled by the real scheduler.
func TestKwokRunsADeployment(t *testing.T) {
	_, m := members()
	framework.LogOnFailure(t, m)
	c := framework.Client(t, m)

	var node corev1.Node
	if err := c.Get(t.Context(), client.ObjectKey{Name: m.WorkerNodeName(0)}, &node); err != nil {
		t.Fatalf("reading the kwok node: %v", err)
	}
	if !localcluster.NodeReady(&node) {
		t.Fatalf("node %s is not Ready: %+v", node.Name, node.Status.Conditions)
	}

	const replicas = 100
	labels := map[string]string{"app": "kwok-burst"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "kwok-burst", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.example/app:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resourceMilli(100),
					}},
				}}},
			},
		},
	}
	if err := c.Create(t.Context(), dep); err != nil {
		t.Fatalf("creating Deployment: %v", err)
	}
	framework.DeleteOnCleanup(t, c, dep)

	framework.Eventually(t, 2*time.Minute, func() error {
		var pods corev1.PodList
		if err := c.List(t.Context(), &pods, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == node.Name && p.Status.PodIP != "" {
				running++
			}
		}
		if running != replicas {
			return fmt.Errorf("%d of %d pods Running on %s", running, replicas, node.Name)
		}
		return nil
	})
}

func resourceMilli(m int64) resource.Quantity {
	return *resource.NewMilliQuantity(m, resource.DecimalSI)
}
