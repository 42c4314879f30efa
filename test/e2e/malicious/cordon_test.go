// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestProviderCannotUndoWhatTheOperatorDid: the consumer's operator
// cordons a provider's virtual node, taints it and labels it. With the
// kubeconfig it holds for the consumer, the provider rewrites its offer
// (new resources, the operator's label key, a hostname) and tries to
// uncordon or delete the node itself: the cordon, the taint and the label
// stay, and the node is neither changed nor deleted by it.
func TestProviderCannotUndoWhatTheOperatorDid(t *testing.T) {
	peered(t)
	a, b, _ := members()
	ctx := t.Context()
	inA := framework.Client(t, a)
	provider := framework.ClientFor(t, framework.ProviderConfig(t, b, a.ClusterID))
	node, err := framework.VirtualNode(inA, b.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	operator := func(change func(n *corev1.Node)) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var n corev1.Node
			if err := inA.Get(context.Background(), client.ObjectKeyFromObject(node), &n); err != nil {
				return err
			}
			change(&n)
			return inA.Update(context.Background(), &n)
		}); err != nil {
			t.Fatal(err)
		}
	}
	operator(func(n *corev1.Node) {
		n.Spec.Unschedulable = true
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "maintenance", Value: "soon", Effect: corev1.TaintEffectPreferNoSchedule})
		n.Labels["team"] = "blue"
	})
	t.Cleanup(func() {
		operator(func(n *corev1.Node) {
			n.Spec.Unschedulable = false
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == "maintenance" })
			delete(n.Labels, "team")
		})
	})

	own := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(b.ClusterID), Name: sharingv1alpha1.AdvertisementName(b.ClusterID)}
	framework.Allowed(t, "rewriting its own offer", retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var adv sharingv1alpha1.Advertisement
		if err := provider.Get(ctx, own, &adv); err != nil {
			return err
		}
		adv.Spec.Labels = map[string]string{"team": "red", "kubernetes.io/hostname": "elsewhere", "topology.kubernetes.io/zone": "z9"}
		adv.Spec.Resources[corev1.ResourcePods] = resource.MustParse("7")
		return provider.Update(ctx, &adv)
	}))
	var asProvider corev1.Node
	framework.Denied(t, "reading the consumer's virtual node", provider.Get(ctx, client.ObjectKeyFromObject(node), &asProvider))
	uncordon := node.DeepCopy()
	uncordon.Spec.Unschedulable = false
	framework.Denied(t, "uncordoning the consumer's virtual node", provider.Update(ctx, uncordon))
	framework.Denied(t, "deleting the consumer's virtual node", provider.Delete(ctx, node.DeepCopy()))

	// Two renewals later (each writes the node the virtual kubelet's way),
	// what the operator did stands.
	got := waitHeartbeats(t, a, b.ClusterID, 2)
	requireReady(t, got)
	if !got.Spec.Unschedulable {
		t.Errorf("virtual node %s was uncordoned", got.Name)
	}
	if !slices.ContainsFunc(got.Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == "maintenance" }) {
		t.Errorf("the operator's taint is gone: %v", got.Spec.Taints)
	}
	if got.Labels["team"] != "blue" || got.Labels["kubernetes.io/hostname"] != node.Name {
		t.Errorf("labels of %s: team=%q, hostname=%q; want the operator's and the node's own", got.Name, got.Labels["team"], got.Labels["kubernetes.io/hostname"])
	}
}
