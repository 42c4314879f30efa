// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/controllermanager"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// kubectlOn runs the project's kubectl against member m, as an operator,
// and fails the test if it fails.
func kubectlOn(t *testing.T, m *playground.Member, args ...string) string {
	t.Helper()
	out, err := framework.Kubectl(t, m, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// cordonNS is the namespace of TestCordonAndDrainVirtualNode.
const cordonNS = "offload-cordon"

// podsOn returns the names of the live pods of cordonNS bound to node.
func podsOn(t *testing.T, cl client.Client, node string) ([]string, error) {
	t.Helper()
	var pods corev1.PodList
	if err := cl.List(context.Background(), &pods, client.InNamespace(cordonNS)); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	return out, nil
}

// TestCordonAndDrainVirtualNode: kubectl cordon and drain hold on a
// virtual node as on a real one. Cordoned, it stays cordoned (the virtual
// kubelet, renewing it every 10 s, leaves spec.unschedulable to the
// operator), and no new pod lands on it: a pod that can only go there
// waits, the Deployment's new pods go to the other provider. Uncordoned,
// the waiting pod runs there. Drained, its pods are evicted, their
// provider twins deleted, and the replacements run elsewhere; nothing
// comes back while it is cordoned.
func TestCordonAndDrainVirtualNode(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := context.Background()
	cl := framework.Client(t, a)
	const ns = cordonNS
	offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote})
	startDeployment(t, ns, "web", 6)
	nodeB, err := framework.VirtualNode(cl, b.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	nodeC, err := framework.VirtualNode(cl, c.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kubectlOn(t, a, "uncordon", nodeB.Name) })

	kubectlOn(t, a, "cordon", nodeB.Name)
	// Only node B will do for this pod.
	pinned := pauseOn(ns, "pinned", nodeB.Name)
	if err := cl.Create(ctx, pinned); err != nil {
		t.Fatal(err)
	}
	scale(t, ns, "web", 10)
	before, err := podsOn(t, cl, nodeB.Name)
	if err != nil {
		t.Fatal(err)
	}
	framework.Consistently(t, time.Minute, func() error {
		var n corev1.Node
		if err := cl.Get(ctx, client.ObjectKeyFromObject(nodeB), &n); err != nil {
			return err
		}
		if !n.Spec.Unschedulable {
			return fmt.Errorf("virtual node %s is no longer cordoned", n.Name)
		}
		on, err := podsOn(t, cl, nodeB.Name)
		if err != nil {
			return err
		}
		for _, p := range on {
			if !slices.Contains(before, p) {
				return fmt.Errorf("pod %s was scheduled on the cordoned node %s", p, nodeB.Name)
			}
		}
		return nil
	})
	// The offer stands (only scheduling stopped), and the cordon shows
	// on the provider's ForeignCluster.
	framework.Eventually(t, 30*time.Second, func() error { return cordonShown(t, a, b, true) })

	// The Deployment grew on the other provider; the pinned pod waits.
	framework.Eventually(t, time.Minute, func() error { return allRunning(t, ns, 10, pinned.Name) })
	if err := cl.Get(ctx, client.ObjectKeyFromObject(pinned), pinned); err != nil {
		t.Fatal(err)
	}
	if pinned.Spec.NodeName != "" {
		t.Fatalf("the pod pinned to the cordoned node was bound to %s", pinned.Spec.NodeName)
	}

	kubectlOn(t, a, "uncordon", nodeB.Name)
	framework.Eventually(t, 30*time.Second, func() error { return cordonShown(t, a, b, false) })
	framework.Eventually(t, time.Minute, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pinned), pinned); err != nil {
			return err
		}
		if pinned.Spec.NodeName != nodeB.Name || pinned.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pinned pod on %q, %s; want Running on %s", pinned.Spec.NodeName, pinned.Status.Phase, nodeB.Name)
		}
		return nil
	})
	if err := cl.Delete(ctx, pinned); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pinned), pinned); err == nil {
			return fmt.Errorf("pod %s not deleted yet", pinned.Name)
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})

	// Drain: every pod of node B evicted, its twin gone from provider B,
	// the replacements elsewhere.
	drained, err := podsOn(t, cl, nodeB.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(drained) == 0 {
		t.Fatalf("no pod of %s on %s to drain", ns, nodeB.Name)
	}
	t.Logf("draining %s with %d pods: %v", nodeB.Name, len(drained), drained)
	kubectlOn(t, a, "drain", nodeB.Name, "--ignore-daemonsets", "--timeout=2m")
	framework.Eventually(t, 2*time.Minute, func() error {
		on, err := podsOn(t, cl, nodeB.Name)
		if err != nil {
			return err
		}
		if len(on) != 0 {
			return fmt.Errorf("still on %s: %v", nodeB.Name, on)
		}
		if n := remotePods(t, ns, b); n != 0 {
			return fmt.Errorf("%d pods still in provider %s", n, b.Name)
		}
		if err := allRunning(t, ns, 10); err != nil {
			return err
		}
		if on, err = podsOn(t, cl, nodeC.Name); err != nil {
			return err
		}
		if len(on) != 10 {
			return fmt.Errorf("%d pods on %s, want all 10", len(on), nodeC.Name)
		}
		return nil
	})
	framework.Consistently(t, 10*time.Second, func() error {
		on, err := podsOn(t, cl, nodeB.Name)
		if err != nil {
			return err
		}
		if len(on) != 0 {
			return fmt.Errorf("pods came back to the drained node %s: %v", nodeB.Name, on)
		}
		return nil
	})
}

// cordonShown checks that provider's offer is still Accepted in consumer
// and that its ForeignCluster's VirtualNodeReady says whether the node is
// cordoned.
func cordonShown(t *testing.T, consumer, provider *playground.Member, cordoned bool) error {
	t.Helper()
	cl := framework.Client(t, consumer)
	var adv sharingv1alpha1.Advertisement
	key := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(provider.ClusterID), Name: sharingv1alpha1.AdvertisementName(provider.ClusterID)}
	if err := cl.Get(context.Background(), key, &adv); err != nil {
		return err
	}
	if adv.Status.Phase != sharingv1alpha1.AdvertisementAccepted {
		return fmt.Errorf("the offer of %s is %s, want it still Accepted", provider.Name, adv.Status.Phase)
	}
	fc, err := foreigncluster.Find(context.Background(), cl, provider.ClusterID)
	if err != nil {
		return err
	}
	if fc == nil {
		return fmt.Errorf("no ForeignCluster of %s", provider.Name)
	}
	want := discoveryv1alpha1.ReasonVirtualNodeReady
	if cordoned {
		want = discoveryv1alpha1.ReasonVirtualNodeCordoned
	}
	cond := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionVirtualNodeReady)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != want {
		return fmt.Errorf("VirtualNodeReady of %s: %+v, want True/%s", provider.Name, cond, want)
	}
	return nil
}

// TestOperatorLabelAndTaintStay: an operator's label and taint on a
// virtual node survive a change of the provider's offer (the node's
// capacity) and a restart of the consumer's controller manager; a label
// of the virtual kubelet's own that is removed by hand comes back.
func TestOperatorLabelAndTaintStay(t *testing.T) {
	peered(t)
	a, b, _ := members()
	ctx := context.Background()
	cl := framework.Client(t, a)
	node, err := framework.VirtualNode(cl, b.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	kubectlOn(t, a, "label", "node", node.Name, "team=blue")
	kubectlOn(t, a, "taint", "node", node.Name, "maintenance=soon:PreferNoSchedule")
	kubectlOn(t, a, "label", "node", node.Name, "kubernetes.io/role-")
	t.Cleanup(func() {
		kubectlOn(t, a, "label", "node", node.Name, "team-")
		kubectlOn(t, a, "taint", "node", node.Name, "maintenance=soon:PreferNoSchedule-")
	})
	kept := func(n *corev1.Node) error {
		if n.Labels["team"] != "blue" {
			return fmt.Errorf("the operator's label is gone: %v", n.Labels)
		}
		if !slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == "maintenance" }) {
			return fmt.Errorf("the operator's taint is gone: %v", n.Spec.Taints)
		}
		if !slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == offloadingv1alpha1.VirtualNodeTaint }) {
			return fmt.Errorf("the virtual node's own taint is gone: %v", n.Spec.Taints)
		}
		return nil
	}
	framework.Eventually(t, 30*time.Second, func() error {
		var n corev1.Node
		if err := cl.Get(ctx, client.ObjectKeyFromObject(node), &n); err != nil {
			return err
		}
		if n.Labels["kubernetes.io/role"] != "agent" {
			return fmt.Errorf("the virtual kubelet's label kubernetes.io/role was not put back: %v", n.Labels)
		}
		return kept(&n)
	})

	// A new offer: the provider shares a quarter instead of half.
	capacity := node.Status.Capacity[corev1.ResourcePods]
	framework.SetClusterConfig(t, b, func(spec *configv1alpha1.ClusterConfigSpec) { spec.SharingConfig.SharePercentage = 25 })
	t.Cleanup(func() {
		framework.SetClusterConfig(t, b, func(spec *configv1alpha1.ClusterConfigSpec) { spec.SharingConfig.SharePercentage = 50 })
	})
	framework.Eventually(t, time.Minute, func() error {
		var n corev1.Node
		if err := cl.Get(ctx, client.ObjectKeyFromObject(node), &n); err != nil {
			return err
		}
		if got := n.Status.Capacity[corev1.ResourcePods]; got.Cmp(capacity) == 0 {
			return fmt.Errorf("capacity still %s pods", got.String())
		}
		return kept(&n)
	})

	// A restart: the virtual kubelet renews the node's Lease once it is
	// back, having written the node by then.
	if err := a.StopControllerManager(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if err := a.StartControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		var lease coordinationv1.Lease
		if err := cl.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node.Name}, &lease); err != nil {
			return err
		}
		if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(restarted) {
			return fmt.Errorf("lease of %s not renewed since the restart", node.Name)
		}
		return nil
	})
	var n corev1.Node
	if err := cl.Get(ctx, client.ObjectKeyFromObject(node), &n); err != nil {
		t.Fatal(err)
	}
	if err := kept(&n); err != nil {
		t.Fatalf("after the controller manager's restart: %v", err)
	}
}

// TestDeleteVirtualNodeIsRefused: kubectl delete node of a virtual node is
// refused with what to do instead, and the node and its pods stay; the
// controller manager itself still removes virtual nodes when it unpeers
// (TestUnpeerDrains).
func TestDeleteVirtualNodeIsRefused(t *testing.T) {
	peered(t)
	a, b, _ := members()
	cl := framework.Client(t, a)
	node, err := framework.VirtualNode(cl, b.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	// The policy is in place once the controller manager has written it.
	framework.Eventually(t, time.Minute, func() error {
		var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
		return cl.Get(context.Background(), client.ObjectKey{Name: controllermanager.VirtualNodePolicyName}, &binding)
	})
	// The API server loads a new policy within a second or so: asked
	// with dry runs (which admission sees too) until it refuses.
	framework.Eventually(t, 30*time.Second, func() error {
		if err := cl.Delete(context.Background(), node.DeepCopy(), client.DryRunAll); !apierrors.IsForbidden(err) {
			return fmt.Errorf("dry run of deleting %s: %w, want a refusal", node.Name, err)
		}
		return nil
	})
	refusal := cl.Delete(context.Background(), node.DeepCopy())
	if !apierrors.IsForbidden(refusal) {
		t.Fatalf("deleting virtual node %s as an operator: %v, want refused", node.Name, refusal)
	}
	t.Logf("refused: %v", refusal)
	for _, want := range []string{node.Name, b.ClusterID, "kubectl cordon", "kubectl drain", "liqoctl remove"} {
		if !strings.Contains(refusal.Error(), want) {
			t.Errorf("refusal %q does not say %q", refusal, want)
		}
	}
	if _, err := framework.Kubectl(t, a, "", "delete", "node", node.Name); err == nil || !strings.Contains(err.Error(), "kubectl cordon") {
		t.Errorf("kubectl delete node %s: %v; want refused, saying what to do", node.Name, err)
	}
	var n corev1.Node
	if err := cl.Get(context.Background(), client.ObjectKeyFromObject(node), &n); err != nil || n.UID != node.UID || n.DeletionTimestamp != nil {
		t.Fatalf("virtual node after the refused deletions: %v (UID %s, was %s)", err, n.UID, node.UID)
	}
}
