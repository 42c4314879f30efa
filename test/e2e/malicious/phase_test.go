// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestProviderCannotMakeUpAPodPhase: a provider that writes, with its own
// credentials, a phase Kubernetes does not know on the pod it runs for its
// consumer (its API server takes any) gets it shown as Unknown on the
// consumer's pod, and no metric series of that name in the consumer's
// controller manager. The other provider serves throughout.
func TestProviderCannotMakeUpAPodPhase(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	const ns = "phased"
	const madeUp = "Hijacked"
	remoteNS := remoteNamespaceOf(t, offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{}, 2), b.ClusterID)
	inA, inB := framework.Client(t, a), framework.Client(t, b)
	node, err := framework.VirtualNode(inA, b.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	pod := pausePod(ns, "phased")
	pod.Spec.NodeName = node.Name
	pod.Spec.Tolerations = []corev1.Toleration{{Key: offloadingv1alpha1.VirtualNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	if err := inA.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var remote corev1.Pod
	framework.Eventually(t, 30*time.Second, func() error {
		if err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: pod.Name}, &remote); err != nil {
			return err
		}
		if remote.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("provider pod %s", remote.Status.Phase)
		}
		return nil
	})
	patch := fmt.Sprintf(`{"status":{"phase":%q}}`, madeUp)
	if err := inB.Status().Patch(ctx, &remote, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		if err := inA.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodUnknown {
			return fmt.Errorf("pod %s shows phase %q, want Unknown", pod.Name, pod.Status.Phase)
		}
		return nil
	})
	if n := framework.Metric(t, a, "liqo_offloaded_pods", map[string]string{"phase": madeUp}); n != 0 {
		t.Errorf("the consumer's metrics count %v pods of phase %s", n, madeUp)
	}
	if n := framework.Metric(t, a, "liqo_offloaded_pods", map[string]string{"provider": b.ClusterID, "phase": string(corev1.PodUnknown)}); n < 1 {
		t.Errorf("the consumer's metrics count %v Unknown pods at %s, want the one with a made-up phase", n, b.Name)
	}
	requireReady(t, waitHeartbeats(t, a, c.ClusterID, 1))
}
