// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestOffloadedPodsArePlacedByTheProvider: with its virtual kubelet's
// identity, a consumer cannot place a pod itself in the provider: not on
// a node it names (a control-plane node), not tolerating the provider's
// taints, not with a system priority class that would preempt the
// provider's own pods, not with a runtime class the provider did not
// allow; each refusal names the field. The provider allows a priority
// class and a runtime class in its ClusterConfig, and then they pass. The
// virtual kubelet forwards none of these from the consumer's pods, and
// the other provider's virtual node stays Ready throughout.
func TestOffloadedPodsArePlacedByTheProvider(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	const ns = "placed"
	remoteNS := remoteNamespaceOf(t, offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{}, 2), b.ClusterID)
	inA, inB := framework.Client(t, a), framework.Client(t, b)
	vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))
	var nodes corev1.NodeList
	if err := inB.List(ctx, &nodes); err != nil || len(nodes.Items) == 0 {
		t.Fatalf("%s's nodes: %d, %v", b.Name, len(nodes.Items), err)
	}
	// A runtime class the provider has, for its own pods.
	unconfined := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "unconfined"}, Handler: "runc"}
	if err := inB.Create(ctx, unconfined); err != nil {
		t.Fatal(err)
	}
	framework.DeleteOnCleanup(t, inB, unconfined)

	for _, tc := range []struct {
		name, field string
		mutate      func(*corev1.PodSpec)
	}{
		{"on-a-named-node", "spec.nodeName", func(s *corev1.PodSpec) { s.NodeName = nodes.Items[0].Name }},
		{"tolerating-every-taint", "spec.tolerations", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}},
		{"tolerating-the-control-plane", "spec.tolerations", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}},
		{"system-priority", "spec.priorityClassName", func(s *corev1.PodSpec) { s.PriorityClassName = "system-node-critical" }},
		{"runtime-class", "spec.runtimeClassName", func(s *corev1.PodSpec) { s.RuntimeClassName = ptr.To(unconfined.Name) }},
	} {
		t.Run("refused "+tc.name, func(t *testing.T) {
			pod := labelled(pausePod(remoteNS, "direct-"+tc.name), a)
			tc.mutate(&pod.Spec)
			err := vk.Create(ctx, pod, client.DryRunAll)
			framework.Refused(t, "a pod "+tc.name, err)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("the refusal does not name %s: %v", tc.field, err)
			}
		})
	}
	t.Run("a pod with the tolerations every pod gets passes", func(t *testing.T) {
		pod := labelled(pausePod(remoteNS, "direct-default-tolerations"), a)
		pod.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(30))}}
		framework.Allowed(t, "a pod tolerating a node not ready", vk.Create(ctx, pod, client.DryRunAll))
	})

	t.Run("what the provider allows passes", func(t *testing.T) {
		low := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "consumers-low"}, Value: 10}
		if err := inB.Create(ctx, low); err != nil {
			t.Fatal(err)
		}
		framework.DeleteOnCleanup(t, inB, low)
		pod := labelled(pausePod(remoteNS, "direct-allowed"), a)
		pod.Spec.PriorityClassName = low.Name
		framework.Refused(t, "a priority class not yet allowed", vk.Create(ctx, pod, client.DryRunAll))
		framework.SetClusterConfig(t, b, func(spec *configv1alpha1.ClusterConfigSpec) {
			spec.SharingConfig.AllowedPriorityClasses = []string{low.Name}
		})
		t.Cleanup(func() {
			framework.SetClusterConfig(t, b, func(spec *configv1alpha1.ClusterConfigSpec) { spec.SharingConfig.AllowedPriorityClasses = nil })
		})
		// The policy reads the ClusterConfig through an informer: it
		// takes the change within moments.
		framework.Eventually(t, 30*time.Second, func() error { return vk.Create(ctx, pod.DeepCopy(), client.DryRunAll) })
	})

	t.Run("the consumer's pods keep none of it", func(t *testing.T) {
		node, err := framework.VirtualNode(inA, b.ClusterID)
		if err != nil {
			t.Fatal(err)
		}
		pod := pausePod(ns, "tolerant")
		pod.Spec.NodeName = node.Name
		pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		if err := inA.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		var remote corev1.Pod
		framework.Eventually(t, 30*time.Second, func() error {
			return inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: pod.Name}, &remote)
		})
		for _, tol := range remote.Spec.Tolerations {
			if tol.Key != corev1.TaintNodeNotReady && tol.Key != corev1.TaintNodeUnreachable {
				t.Errorf("the provider's copy tolerates %+v", tol)
			}
		}
	})
	requireReady(t, waitHeartbeats(t, a, c.ClusterID, 1))
}
