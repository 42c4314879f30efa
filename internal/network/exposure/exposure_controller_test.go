// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package exposure

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestExposedToThePeer: once the peer answered, its TunnelEndpoint lists the pods this
// cluster runs for it and this cluster's own pods in the namespaces it
// offloads to it, not a pod on a virtual node (it runs in a provider), on
// the host's network, finished, or of a namespace offloaded elsewhere or
// not at all; it follows pods as they come and go; it lists the pods a
// broker that introduced the peer marked for it, while the introduction
// holds; with AllPods reach on
// the peer's ForeignCluster, it reaches everything and lists nothing.
func TestExposedToThePeer(t *testing.T) {
	cfg, c := envtest.StartInstalled(t, "exposure")
	ctx := t.Context()
	const peer, other, broker = "peer-1", "peer-2", "broker-1"
	var introduced atomic.Bool
	envtest.StartManager(t, cfg, func(mgr ctrl.Manager) error {
		return (&Reconciler{Client: mgr.GetClient(), Introducers: func(_ context.Context, p string) ([]string, error) {
			if p == peer && introduced.Load() {
				return []string{broker}, nil
			}
			return nil, nil
		}}).SetupWithManager(mgr)
	})
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "real"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "virtual", Labels: map[string]string{offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue}}},
	} {
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	namespace := func(name string, offloadedTo ...string) {
		t.Helper()
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
		// No controller manager here makes it.
		if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "default"}}); err != nil {
			t.Fatal(err)
		}
		if len(offloadedTo) == 0 {
			return
		}
		no := &offloadingv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: offloadingv1alpha1.NamespaceOffloadingName}}
		if err := c.Create(ctx, no); err != nil {
			t.Fatal(err)
		}
		for _, p := range offloadedTo {
			no.Status.RemoteNamespaces = append(no.Status.RemoteNamespaces, offloadingv1alpha1.RemoteNamespaceStatus{
				ClusterID: p, Namespace: name + "-x", Phase: offloadingv1alpha1.RemoteNamespaceReady})
		}
		if err := c.Status().Update(ctx, no); err != nil {
			t.Fatal(err)
		}
	}
	namespace("run-for-peer")
	namespace("offloaded", peer)
	namespace("offloaded-elsewhere", other)
	namespace("local")
	pod := func(ns, name, node, ip string, edit func(*corev1.Pod)) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		if edit != nil {
			edit(p)
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
		if err := c.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	forPeer := func(p *corev1.Pod) { p.Labels = map[string]string{offloadingv1alpha1.OriginClusterLabel: peer} }
	pod("run-for-peer", "a", "real", "10.100.0.1", forPeer)
	pod("run-for-peer", "b", "real", "10.100.0.2", func(p *corev1.Pod) {
		p.Labels = map[string]string{offloadingv1alpha1.OriginClusterLabel: other}
	})
	pod("offloaded", "c", "real", "10.100.0.3", nil)
	pod("offloaded", "d", "virtual", "10.8.0.4", nil)
	pod("offloaded", "e", "real", "192.168.0.5", func(p *corev1.Pod) { p.Spec.HostNetwork = true })
	pod("offloaded-elsewhere", "f", "real", "10.100.0.6", nil)
	pod("local", "g", "real", "10.100.0.7", nil)

	tep := &netv1alpha1.TunnelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: peer}, Spec: netv1alpha1.TunnelEndpointSpec{
		ClusterID: peer, PublicKey: "Ljk0kCqrl1KXUj2gN4wrxCu5ewcoPuVX3k0o6hMkRWg=",
		Remote: netv1alpha1.Ranges{PodCIDR: "10.100.0.0/14", ExternalCIDR: "10.70.0.0/16"}, RemoteSeenAs: netv1alpha1.Ranges{PodCIDR: "10.0.0.0/14", ExternalCIDR: "10.4.0.0/16"},
	}}
	if err := c.Create(ctx, tep); err != nil {
		t.Fatal(err)
	}
	expect := func(reach netv1alpha1.NetworkReach, want ...string) {
		t.Helper()
		envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(tep), tep); err != nil {
				return err
			}
			if tep.Spec.Reach != reach || !slices.Equal(tep.Spec.Exposed, want) {
				return fmt.Errorf("reach %q, exposed %v; want %q, %v", tep.Spec.Reach, tep.Spec.Exposed, reach, want)
			}
			return nil
		})
	}
	// Before the peer answered, no gateway applies it: nothing listed.
	expect(netv1alpha1.ReachPeering)
	patch := client.MergeFrom(tep.DeepCopy())
	tep.Spec.LocalSeenAs = &netv1alpha1.Ranges{PodCIDR: "10.8.0.0/14", ExternalCIDR: "10.12.0.0/16"}
	if err := c.Patch(ctx, tep, patch); err != nil {
		t.Fatal(err)
	}
	expect(netv1alpha1.ReachPeering, "10.100.0.1/32", "10.100.0.3/32")

	// Pods come and go.
	pod("run-for-peer", "h", "real", "10.100.0.8", forPeer)
	expect(netv1alpha1.ReachPeering, "10.100.0.1/32", "10.100.0.3/32", "10.100.0.8/32")
	if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "offloaded", Name: "c"}}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	expect(netv1alpha1.ReachPeering, "10.100.0.1/32", "10.100.0.8/32")

	// A broker that introduced the peer: the pods it runs here marked for
	// the peer, not those it marked for another, nor those another
	// cluster marked for the peer.
	namespace("run-for-broker")
	pod("run-for-broker", "i", "real", "10.100.0.9", func(p *corev1.Pod) {
		p.Labels = map[string]string{offloadingv1alpha1.OriginClusterLabel: broker, offloadingv1alpha1.ForClusterLabel: peer}
	})
	pod("run-for-broker", "j", "real", "10.100.0.10", func(p *corev1.Pod) {
		p.Labels = map[string]string{offloadingv1alpha1.OriginClusterLabel: broker, offloadingv1alpha1.ForClusterLabel: other}
	})
	pod("run-for-broker", "k", "real", "10.100.0.11", func(p *corev1.Pod) {
		p.Labels = map[string]string{offloadingv1alpha1.OriginClusterLabel: other, offloadingv1alpha1.ForClusterLabel: peer}
	})
	expect(netv1alpha1.ReachPeering, "10.100.0.1/32", "10.100.0.8/32")
	introduced.Store(true)
	intro := &discoveryv1alpha1.Introduction{ObjectMeta: metav1.ObjectMeta{Namespace: "local", Name: peer},
		Spec: discoveryv1alpha1.IntroductionSpec{Consumer: discoveryv1alpha1.ClusterIdentity{ClusterID: peer}}}
	if err := c.Create(ctx, intro); err != nil {
		t.Fatal(err)
	}
	expect(netv1alpha1.ReachPeering, "10.100.0.1/32", "10.100.0.8/32", "10.100.0.9/32")
	introduced.Store(false)
	if err := c.Delete(ctx, intro); err != nil {
		t.Fatal(err)
	}
	expect(netv1alpha1.ReachPeering, "10.100.0.1/32", "10.100.0.8/32")

	// The operator lets the peer reach every pod.
	fc := &discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: "peer", Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: peer}},
		Spec: discoveryv1alpha1.ForeignClusterSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: peer}, NetworkReach: "AllPods"}}
	if err := c.Create(ctx, fc); err != nil {
		t.Fatal(err)
	}
	expect(netv1alpha1.ReachAllPods)
}
