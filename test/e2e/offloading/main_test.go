// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package offloading_test checks pod offloading against three real
// clusters: cluster-1 consumes, cluster-2 and cluster-3 provide. A
// Deployment in an offloaded namespace runs in the providers with its
// status reflected back; its ConfigMaps, Secrets and Services follow; the
// whole survives a provider's API server stopped and the consumer's
// controller manager restarted; unpeering leaves nothing.
package offloading_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

var suite *framework.Suite

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, framework.Options{
		Clusters: 3,
		ClusterConfig: func(_ string, spec *configv1alpha1.ClusterConfigSpec) {
			spec.DiscoveryConfig.EnableDiscovery = ptr.To(false)
			spec.DiscoveryConfig.EnableAdvertisement = ptr.To(false)
			spec.PeeringConfig.ReconcilePeriodSeconds = 3
		},
	}, &suite))
}

func members() (consumer, p1, p2 *playground.Member) {
	return suite.Members[0], suite.Members[1], suite.Members[2]
}

// peered peers the consumer with each provider it is not joined to (none
// at first, or one a test unpeered) and waits for a Ready virtual node per
// provider: the tests run in any order (-shuffle).
func peered(t *testing.T) {
	t.Helper()
	a, b, c := members()
	framework.LogOnFailure(t, a, b, c)
	for _, p := range []*playground.Member{b, c} {
		fc, err := foreigncluster.Find(t.Context(), framework.Client(t, a), p.ClusterID)
		if err != nil {
			t.Fatal(err)
		}
		if fc == nil || !fc.Spec.Join {
			framework.AddWithToken(t, a, p)
		}
	}
	framework.WaitVirtualNodesReady(t, a, b, c)
}

// pauseOn is a pod ns/name of one pause container, pinned to node.
func pauseOn(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Containers:   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

// offload is framework.Offload with this suite's consumer and both its
// providers.
func offload(t *testing.T, ns string, spec offloadingv1alpha1.NamespaceOffloadingSpec) []offloadingv1alpha1.RemoteNamespaceStatus {
	t.Helper()
	a, b, c := members()
	return framework.Offload(t, a, []*playground.Member{b, c}, ns, spec, 2)
}

// deployment is a Deployment of replicas pods labelled app=name that read
// a ConfigMap and a Secret.
func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "app", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}},
						EnvFrom: []corev1.EnvFromSource{
							{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name + "-config"}}},
							{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name + "-secret"}}},
						},
					}},
				},
			},
		},
	}
}

// podPairs compares the consumer's pods of namespace ns with the provider
// pods that back them. It returns an error unless every local pod bound to
// a virtual node has exactly one provider pod (same name, its UID), every
// provider pod has its local pod, and want local pods exist.
func podPairs(t *testing.T, ns string, want int) error {
	t.Helper()
	a, b, c := members()
	ctx := context.Background()
	var local corev1.PodList
	if err := framework.Client(t, a).List(ctx, &local, client.InNamespace(ns)); err != nil {
		return err
	}
	byUID := map[string]*corev1.Pod{}
	for i := range local.Items {
		p := &local.Items[i]
		if p.DeletionTimestamp == nil {
			byUID[string(p.UID)] = p
		}
	}
	if len(byUID) != want {
		return fmt.Errorf("%d local pods, want %d", len(byUID), want)
	}
	backed := map[string]int{}
	for _, p := range []*playground.Member{b, c} {
		var remote corev1.PodList
		if err := framework.Client(t, p).List(ctx, &remote, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: a.ClusterID}); err != nil {
			return err
		}
		for _, rp := range remote.Items {
			if rp.Annotations[offloadingv1alpha1.OriginNamespaceAnnotation] != ns || rp.DeletionTimestamp != nil {
				continue
			}
			uid := rp.Annotations[offloadingv1alpha1.OriginUIDAnnotation]
			lp, ok := byUID[uid]
			if !ok {
				return fmt.Errorf("provider %s runs %s/%s for no local pod", p.Name, rp.Namespace, rp.Name)
			}
			if lp.Name != rp.Name {
				return fmt.Errorf("provider pod %s backs local pod %s", rp.Name, lp.Name)
			}
			backed[uid]++
		}
	}
	for uid, p := range byUID {
		if backed[uid] != 1 {
			return fmt.Errorf("local pod %s (node %q, phase %s) has %d provider pods, want 1", p.Name, p.Spec.NodeName, p.Status.Phase, backed[uid])
		}
	}
	return nil
}

// allRunning checks that want pods of ns, leaving out those named in
// except, run in the consumer, on virtual nodes, Ready. This suite's
// clusters have no network: a pod shows no IP, and says why (a provider's
// address is shown only as the network fabric agreed it).
func allRunning(t *testing.T, ns string, want int, except ...string) error {
	t.Helper()
	a, _, _ := members()
	var list corev1.PodList
	if err := framework.Client(t, a).List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return err
	}
	pods := slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return slices.Contains(except, p.Name) })
	running := 0
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		ready, unreachable := false, false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
			unreachable = unreachable || (c.Type == offloadingv1alpha1.ConditionPodAddress && c.Reason == offloadingv1alpha1.ReasonNoNetwork)
		}
		if p.Status.Phase == corev1.PodRunning && ready && p.Status.PodIP == "" && unreachable {
			running++
		}
	}
	if running != want || len(pods) != want {
		return fmt.Errorf("%d of %d pods Running and Ready without an address (no network), want %d", running, len(pods), want)
	}
	return nil
}

// remotePods counts the provider pods, terminating ones included, made for
// the consumer namespace ns.
func remotePods(t *testing.T, ns string, providers ...*playground.Member) int {
	t.Helper()
	a, _, _ := members()
	n := 0
	for _, p := range providers {
		var pods corev1.PodList
		if err := framework.Client(t, p).List(context.Background(), &pods, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: a.ClusterID}); err != nil {
			t.Fatal(err)
		}
		for _, rp := range pods.Items {
			if rp.Annotations[offloadingv1alpha1.OriginNamespaceAnnotation] == ns {
				n++
			}
		}
	}
	return n
}
