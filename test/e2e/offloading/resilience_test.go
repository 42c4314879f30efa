// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/playground"
	virtualnode "github.com/liqo-go/liqo/internal/virtualkubelet/node"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestProviderAPIServerDown: with a provider's API server stopped for 30 s
// its virtual node goes NotReady and no pod is lost or duplicated; once it
// is back, every local pod is Running again with exactly one provider pod.
func TestProviderAPIServerDown(t *testing.T) {
	peered(t)
	a, b, _ := members()
	cl := framework.Client(t, a)
	const ns, replicas = "offload-outage", 30
	offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote})
	startDeployment(t, ns, "web", replicas)
	framework.Eventually(t, 30*time.Second, func() error { return podPairs(t, ns, replicas) })
	before := localPodUIDs(t, ns)

	stoppedAt := time.Now()
	restart := framework.StopAPIServer(t, b)
	framework.Eventually(t, 30*time.Second, func() error {
		n, err := framework.VirtualNode(cl, b.ClusterID)
		if err != nil {
			return err
		}
		if virtualnode.Ready(n) != corev1.ConditionFalse {
			return fmt.Errorf("virtual node %s is %s, want NotReady while the provider is down", n.Name, virtualnode.Ready(n))
		}
		return nil
	})
	// No pod is lost or duplicated while the provider is away.
	framework.Consistently(t, 30*time.Second-time.Since(stoppedAt), func() error {
		if now := localPodUIDs(t, ns); !maps.Equal(before, now) {
			return fmt.Errorf("local pods changed while the provider was down: %d before, %d now", len(before), len(now))
		}
		return nil
	})
	restart()
	framework.Eventually(t, 60*time.Second, func() error {
		n, err := framework.VirtualNode(cl, b.ClusterID)
		if err != nil {
			return err
		}
		if virtualnode.Ready(n) != corev1.ConditionTrue {
			return fmt.Errorf("virtual node %s not Ready again", n.Name)
		}
		return nil
	})
	framework.Eventually(t, 90*time.Second, func() error { return allRunning(t, ns, replicas) })
	framework.Eventually(t, 30*time.Second, func() error { return podPairs(t, ns, replicas) })
	if after := localPodUIDs(t, ns); !maps.Equal(before, after) {
		t.Errorf("the local pods were replaced during the outage: %d kept of %d", len(intersect(before, after)), len(before))
	}
}

// TestControllerManagerRestart: the consumer's controller manager is
// stopped in the middle of a burst; meanwhile the Deployment scales and a
// local pod is force-deleted, leaving an orphan in a provider. Restarted,
// it converges: every local pod has exactly one provider pod, and no
// provider pod is left without its local pod.
func TestControllerManagerRestart(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := context.Background()
	cl := framework.Client(t, a)
	const ns = "offload-restart"
	offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote})
	createConfig(t, ns, "burst")
	if err := cl.Create(ctx, deployment(ns, "burst", 200)); err != nil {
		t.Fatal(err)
	}
	// Mid-burst: some provider pods exist, not all.
	framework.Eventually(t, 60*time.Second, func() error {
		if n := remotePods(t, ns, b, c); n < 20 {
			return fmt.Errorf("%d provider pods so far", n)
		}
		return nil
	})
	if err := a.StopControllerManager(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = a.StartControllerManager(context.Background())
		}
	})
	t.Logf("controller manager stopped with %d provider pods of 200", remotePods(t, ns, b, c))
	// While it is down: the Deployment shrinks, and a running pod is
	// force-deleted (its provider pod is now an orphan).
	scale(t, ns, "burst", 120)
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].Status.Phase == corev1.PodRunning {
			if err := cl.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0)); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	// The scale-down happens while the controller manager is down: the
	// ReplicaSet marks the surplus pods for deletion, which only the
	// virtual kubelet can confirm.
	framework.Eventually(t, 30*time.Second, func() error {
		if n := len(localPodUIDs(t, ns)); n > 120 {
			return fmt.Errorf("%d pods not being deleted, want at most 120", n)
		}
		return nil
	})
	if err := a.StartControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	framework.Eventually(t, 3*time.Minute, func() error { return allRunning(t, ns, 120) })
	framework.Eventually(t, 60*time.Second, func() error { return podPairs(t, ns, 120) })
	framework.Eventually(t, 60*time.Second, func() error {
		if n := remotePods(t, ns, b, c); n != 120 {
			return fmt.Errorf("%d provider pods (terminating included), want 120", n)
		}
		return nil
	})
}

// startDeployment creates the ConfigMap and Secret of Deployment name,
// then the Deployment of replicas pods, and waits until all of them run.
func startDeployment(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	a, _, _ := members()
	createConfig(t, ns, name)
	if err := framework.Client(t, a).Create(context.Background(), deployment(ns, name, replicas)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func() error { return allRunning(t, ns, int(replicas)) })
}

func createConfig(t *testing.T, ns, name string) {
	t.Helper()
	a, _, _ := members()
	cl := framework.Client(t, a)
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-config"}, Data: map[string]string{"K": "v"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-secret"}, StringData: map[string]string{"S": "v"}},
	} {
		if err := cl.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func localPodUIDs(t *testing.T, ns string) map[string]bool {
	t.Helper()
	a, _, _ := members()
	var pods corev1.PodList
	if err := framework.Client(t, a).List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[string(p.UID)] = true
		}
	}
	return out
}

func intersect(a, b map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		if b[k] {
			out[k] = true
		}
	}
	return out
}

// TestConsumerControlPlaneDown: with 50 pods offloaded, the consumer's
// API server and controller manager stop for 2 minutes, and 5 provider
// pods are deleted by hand meanwhile. The providers make them again on
// their own (their ShadowPods), and all 50 run there before the consumer
// is back; once it is, every local pod, the same as before, has exactly
// one provider pod.
func TestConsumerControlPlaneDown(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := context.Background()
	const ns, replicas, deleted, down = "offload-consumer-down", 50, 5, 2 * time.Minute
	offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote})
	startDeployment(t, ns, "kept", replicas)
	framework.Eventually(t, 30*time.Second, func() error { return podPairs(t, ns, replicas) })
	before := localPodUIDs(t, ns)

	stoppedAt := time.Now()
	if err := a.StopControllerManager(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = a.StartControllerManager(context.Background())
		}
	})
	restart := framework.StopAPIServer(t, a)

	// Deleted by hand in the providers, while nothing at the consumer
	// can see it.
	gone := map[types.UID]bool{}
	for _, p := range []*playground.Member{b, c} {
		var pods corev1.PodList
		if err := framework.Client(t, p).List(ctx, &pods, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: a.ClusterID}); err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			if pod := &pods.Items[i]; len(gone) < deleted && pod.Annotations[offloadingv1alpha1.OriginNamespaceAnnotation] == ns {
				if err := framework.Client(t, p).Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
					t.Fatal(err)
				}
				gone[pod.UID] = true
			}
		}
	}
	if len(gone) != deleted {
		t.Fatalf("%d provider pods deleted, want %d", len(gone), deleted)
	}
	// Every local pod runs in a provider again, once, before the
	// consumer is back; and so it stays while it is away.
	running := func() error {
		seen := map[string]int{}
		for _, p := range []*playground.Member{b, c} {
			var pods corev1.PodList
			if err := framework.Client(t, p).List(ctx, &pods, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: a.ClusterID}); err != nil {
				return err
			}
			for _, pod := range pods.Items {
				if pod.Annotations[offloadingv1alpha1.OriginNamespaceAnnotation] != ns || pod.DeletionTimestamp != nil {
					continue
				}
				if gone[pod.UID] {
					return fmt.Errorf("provider pod %s/%s, deleted by hand, is still there", pod.Namespace, pod.Name)
				}
				if pod.Status.Phase != corev1.PodRunning {
					return fmt.Errorf("provider pod %s/%s is %s", pod.Namespace, pod.Name, pod.Status.Phase)
				}
				seen[pod.Annotations[offloadingv1alpha1.OriginUIDAnnotation]]++
			}
		}
		for uid := range before {
			if seen[uid] != 1 {
				return fmt.Errorf("local pod %s has %d provider pods running, want 1 (%d local pods, %d provider pods)", uid, seen[uid], len(before), len(seen))
			}
		}
		if len(seen) != len(before) {
			return fmt.Errorf("provider pods for %d local pods, want %d", len(seen), len(before))
		}
		return nil
	}
	framework.Eventually(t, 90*time.Second, running)
	t.Logf("the %d provider pods deleted were made again %s after the consumer stopped", deleted, time.Since(stoppedAt).Round(time.Second))
	framework.Consistently(t, down-time.Since(stoppedAt), running)

	restart()
	if err := a.StartControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	framework.Eventually(t, 3*time.Minute, func() error { return allRunning(t, ns, replicas) })
	framework.Eventually(t, 60*time.Second, func() error { return podPairs(t, ns, replicas) })
	framework.Eventually(t, 60*time.Second, func() error {
		if n := remotePods(t, ns, b, c); n != replicas {
			return fmt.Errorf("%d provider pods (terminating included), want %d", n, replicas)
		}
		return nil
	})
	if after := localPodUIDs(t, ns); !maps.Equal(before, after) {
		t.Errorf("the local pods were replaced while the consumer was down: %d kept of %d", len(intersect(before, after)), len(before))
	}
}
