// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package malicious_test plays a peer turned hostile against three real
// clusters: cluster-1 consumes, cluster-2 and cluster-3 provide. The
// attacker holds only the credentials a peering hands a peer (the
// provider's kubeconfig in the consumer, the consumer's virtual kubelet
// identity in the provider) and uses them as far as they reach: to make
// the consumer send credentials to a server of its choosing, to run
// privileged pods or expose node ports in the provider, to claim
// namespaces that are not its own, to remove or relabel another
// provider's virtual node, and to take one offloaded namespace's provider
// namespace for another. Every attack must be refused, or accepted
// without effect, and the victim's state must be intact afterwards.
package malicious_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/playground"
	virtualnode "github.com/liqo-go/liqo/internal/virtualkubelet/node"
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

// members returns the consumer and the two providers.
func members() (consumer, p1, p2 *playground.Member) {
	return suite.Members[0], suite.Members[1], suite.Members[2]
}

var peerOnce sync.Once

// peered peers the consumer with both providers once for the suite and
// waits for a Ready virtual node per provider.
func peered(t *testing.T) {
	t.Helper()
	a, b, c := members()
	framework.LogOnFailure(t, a, b, c)
	peerOnce.Do(func() {
		framework.AddWithToken(t, a, b)
		framework.AddWithToken(t, a, c)
	})
	framework.WaitVirtualNodesReady(t, a, b, c)
}

// startOffloading, offload and offloadingReady are the framework's, with
// this suite's consumer and providers.
func startOffloading(t *testing.T, ns string, spec offloadingv1alpha1.NamespaceOffloadingSpec) {
	t.Helper()
	a, b, c := members()
	framework.StartOffloading(t, a, []*playground.Member{b, c}, ns, spec)
}

func offload(t *testing.T, ns string, spec offloadingv1alpha1.NamespaceOffloadingSpec, providers int) []offloadingv1alpha1.RemoteNamespaceStatus {
	t.Helper()
	a, b, c := members()
	return framework.Offload(t, a, []*playground.Member{b, c}, ns, spec, providers)
}

func offloadingReady(t *testing.T, ns string) (*offloadingv1alpha1.NamespaceOffloading, error) {
	t.Helper()
	a, _, _ := members()
	return framework.OffloadingReady(t, a, ns)
}

// remoteNamespaceOf returns the provider namespace of providerID among
// the status entries of a NamespaceOffloading.
func remoteNamespaceOf(t *testing.T, entries []offloadingv1alpha1.RemoteNamespaceStatus, providerID string) string {
	t.Helper()
	for _, e := range entries {
		if e.ClusterID == providerID {
			return e.Namespace
		}
	}
	t.Fatalf("no provider namespace for %s in %+v", providerID, entries)
	return ""
}

// pausePod is a pod of one pause container.
func pausePod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

// heartbeatPeriod bounds the time between two heartbeats of a virtual
// node: its reconciler probes the provider and renews the node's Lease
// every 10 s.
const heartbeatPeriod = 15 * time.Second

// waitHeartbeats returns, as it then is, the virtual node of providerID in
// m once it has shown n heartbeats later than the one it showed when
// called. Each heartbeat follows a probe of the provider with what the
// node reconciler read at that time, so two of them after a write prove
// that the reconciler has acted on it. The test fails if the node is
// removed or replaced meanwhile.
//
// The heartbeat is the renewal of the node's Lease, as with a kubelet: the
// Ready condition's LastHeartbeatTime moves only when the status changes,
// or every few minutes.
func waitHeartbeats(t *testing.T, m *playground.Member, providerID string, n int) *corev1.Node {
	t.Helper()
	c := framework.Client(t, m)
	ctx := context.Background()
	node, err := framework.VirtualNode(c, providerID)
	if err != nil {
		t.Fatalf("before waiting for its heartbeats: %v", err)
	}
	uid := node.UID
	key := client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node.Name}
	renewTime := func() (time.Time, error) {
		var lease coordinationv1.Lease
		if err := c.Get(ctx, key, &lease); err != nil {
			return time.Time{}, err
		}
		if lease.Spec.RenewTime == nil {
			return time.Time{}, fmt.Errorf("lease %s has no renewTime", key)
		}
		return lease.Spec.RenewTime.Time, nil
	}
	last, err := renewTime()
	if err != nil {
		t.Fatalf("the heartbeat of virtual node %s: %v", node.Name, err)
	}
	seen := 0
	framework.Eventually(t, time.Duration(n)*heartbeatPeriod+10*time.Second, func() error {
		var got corev1.Node
		err := c.Get(ctx, client.ObjectKey{Name: node.Name}, &got)
		switch {
		case apierrors.IsNotFound(err):
			t.Fatalf("virtual node %s of %s was removed", node.Name, providerID)
		case err != nil:
			return err
		case got.UID != uid:
			t.Fatalf("virtual node %s of %s was replaced (UID %s, was %s)", node.Name, providerID, got.UID, uid)
		}
		renewed, err := renewTime()
		if err != nil {
			return err
		}
		if renewed.After(last) {
			seen++
			last = renewed
		}
		node = &got
		if seen < n {
			return fmt.Errorf("virtual node %s: %d of %d heartbeats seen", node.Name, seen, n)
		}
		return nil
	})
	return node
}

// readyError says why n is not Ready, or nil if it is.
func readyError(n *corev1.Node) error {
	if s := virtualnode.Ready(n); s != corev1.ConditionTrue {
		return fmt.Errorf("virtual node %s is not Ready (%s): %+v", n.Name, s, n.Status.Conditions)
	}
	return nil
}

// requireReady fails the test unless n is Ready.
func requireReady(t *testing.T, n *corev1.Node) {
	t.Helper()
	if err := readyError(n); err != nil {
		t.Fatal(err)
	}
}

// labelled marks obj as a consumer's virtual kubelet marks what it writes
// in a provider, with the consumer's ID (the admission policy
// liqo-offloaded-objects refuses anything else): the attacks below then
// meet the rule they try.
func labelled[T client.Object](obj T, consumer *playground.Member) T {
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[offloadingv1alpha1.OriginClusterLabel] = consumer.ClusterID
	obj.SetLabels(l)
	return obj
}
