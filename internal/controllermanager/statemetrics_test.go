// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package controllermanager

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestStateMetrics: against a real API server, the collector counts the
// ForeignClusters by condition, the offers by phase, the virtual nodes by
// provider and readiness (a real node is not one), and the pods bound to
// them by provider and phase (a pod of a real node is not one; a phase a
// provider made up is Unknown); a standby replica reports nothing.
func TestStateMetrics(t *testing.T) {
	_, c := envtest.StartInstalled(t, "state")
	ctx := t.Context()
	mustCreate := func(o interface {
		GetName() string
	}, create func() error) {
		t.Helper()
		if err := create(); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
	for i, id := range []string{"provider-1", "provider-2"} {
		fc := &discoveryv1alpha1.ForeignCluster{
			ObjectMeta: metav1.ObjectMeta{Name: id, Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: id}},
			Spec:       discoveryv1alpha1.ForeignClusterSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: id}},
		}
		mustCreate(fc, func() error { return c.Create(ctx, fc) })
		status := metav1.ConditionTrue
		if i == 1 {
			status = metav1.ConditionFalse
		}
		fc.Status.Conditions = []metav1.Condition{
			{Type: discoveryv1alpha1.ConditionReachable, Status: metav1.ConditionTrue, Reason: "AuthServiceAnswered", LastTransitionTime: metav1.Now()},
			{Type: discoveryv1alpha1.ConditionVirtualNodeReady, Status: status, Reason: "Test", LastTransitionTime: metav1.Now()},
		}
		mustCreate(fc, func() error { return c.Status().Update(ctx, fc) })

		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: discoveryv1alpha1.TenantNamespace(id)}}
		mustCreate(ns, func() error { return c.Create(ctx, ns) })
		adv := &sharingv1alpha1.Advertisement{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: sharingv1alpha1.AdvertisementName(id)},
			Spec: sharingv1alpha1.AdvertisementSpec{
				ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: id},
				Resources:       corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
				Timestamp:       metav1.Now(), TimeToLive: metav1.NewTime(time.Now().Add(time.Hour)),
			},
		}
		mustCreate(adv, func() error { return c.Create(ctx, adv) })
		adv.Status.Phase, adv.Status.Reason = sharingv1alpha1.AdvertisementAccepted, "Accepted"
		if i == 1 {
			adv.Status.Phase, adv.Status.Reason = sharingv1alpha1.AdvertisementRefused, "OverMax"
		}
		mustCreate(adv, func() error { return c.Status().Update(ctx, adv) })
	}
	node := func(name, provider string, ready corev1.ConditionStatus) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if provider != "" {
			n.Labels[offloadingv1alpha1.VirtualNodeLabel] = offloadingv1alpha1.VirtualNodeValue
			n.Labels[offloadingv1alpha1.RemoteClusterLabel] = provider
		}
		mustCreate(n, func() error { return c.Create(ctx, n) })
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		mustCreate(n, func() error { return c.Status().Update(ctx, n) })
	}
	node("liqo-provider-1", "provider-1", corev1.ConditionTrue)
	node("liqo-provider-2", "provider-2", corev1.ConditionFalse)
	node("real", "", corev1.ConditionTrue)
	// No controller manager makes the namespace's default ServiceAccount,
	// which admission asks of every pod.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "default"}}
	mustCreate(sa, func() error { return c.Create(ctx, sa) })
	pod := func(name, nodeName string, phase corev1.PodPhase) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Image: "app"}}},
		}
		mustCreate(p, func() error { return c.Create(ctx, p) })
		p.Status.Phase = phase
		mustCreate(p, func() error { return c.Status().Update(ctx, p) })
	}
	pod("a", "liqo-provider-1", corev1.PodRunning)
	pod("b", "liqo-provider-1", corev1.PodRunning)
	pod("c", "liqo-provider-1", corev1.PodPending)
	pod("d", "real", corev1.PodRunning)
	pod("e", "liqo-provider-1", "Made-Up-By-The-Provider")

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&stateCollector{reader: c})
	want := `
# HELP liqo_offers Offers (Advertisements) providers made this cluster, by phase (ACCEPTED, REFUSED, or empty while undecided) and reason.
# TYPE liqo_offers gauge
liqo_offers{phase="ACCEPTED",reason="Accepted"} 1
liqo_offers{phase="REFUSED",reason="OverMax"} 1
# HELP liqo_offloaded_pods Pods bound to this cluster's virtual nodes, by provider and phase.
# TYPE liqo_offloaded_pods gauge
liqo_offloaded_pods{phase="Pending",provider="provider-1"} 1
liqo_offloaded_pods{phase="Running",provider="provider-1"} 2
liqo_offloaded_pods{phase="Unknown",provider="provider-1"} 1
# HELP liqo_peers ForeignClusters by condition (Reachable, CATrusted, Authenticated, PeeringRequested, AdvertisementAccepted, NetworkEstablished, VirtualNodeReady) and its status.
# TYPE liqo_peers gauge
liqo_peers{condition="Reachable",status="True"} 2
liqo_peers{condition="VirtualNodeReady",status="False"} 1
liqo_peers{condition="VirtualNodeReady",status="True"} 1
# HELP liqo_virtual_nodes This cluster's virtual nodes, by provider and Ready status.
# TYPE liqo_virtual_nodes gauge
liqo_virtual_nodes{provider="provider-1",ready="True"} 1
liqo_virtual_nodes{provider="provider-2",ready="False"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	// A standby replica reports nothing.
	standby := prometheus.NewPedanticRegistry()
	standby.MustRegister(&stateCollector{reader: c, elected: make(chan struct{})})
	if n, err := testutil.GatherAndCount(standby); err != nil || n != 0 {
		t.Fatalf("a standby reported %d series (%v), want none", n, err)
	}
}
