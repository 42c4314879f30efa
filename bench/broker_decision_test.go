// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package bench

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
	"github.com/liqo-go/liqo/internal/virtualkubelet/node"
)

// BenchmarkBrokerDecision times the orchestrator's decision for one
// consumer under a policy over 100 providers, against a real API server
// holding real objects: 100 accepted peerings, virtual nodes, offers and
// Measurements (synthetic figures), the consumer's Selection and its
// pods. Each round changes one provider's latency, as the prober would,
// and times the decision (reading everything, cached, deciding, holding
// the reservations, read live and written when they change: the issue's
// goal is p99 50 ms or less) and the whole reconcile, which also writes
// the Selection's status (100 providers' explanations) when the decision
// changed.
func BenchmarkBrokerDecision(b *testing.B) {
	const providers, rounds = 100, 100
	cfg, c := envtest.StartInstalled(b, "decision")
	ctx := b.Context()
	const consumer, ns = "consumer-1", "app-5f6a7b"
	tenant := discoveryv1alpha1.TenantNamespace(consumer)
	create := func(objs ...client.Object) {
		for _, o := range objs {
			status := o.DeepCopyObject().(client.Object)
			if err := c.Create(ctx, o); err != nil {
				b.Fatal(err)
			}
			switch s := status.(type) {
			case *discoveryv1alpha1.ForeignCluster, *corev1.Node, *brokerv1alpha1.Measurement:
				s.SetResourceVersion(o.GetResourceVersion())
				if err := c.Status().Update(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	now := metav1.Now()
	latency := func(i, round int) int64 { return int64(2000 + (i*37+round*11)%60000) }
	for i := range providers {
		id := fmt.Sprintf("provider-%03d", i)
		fc := &discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: id},
			Spec: discoveryv1alpha1.ForeignClusterSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: id, ClusterName: id}}}
		meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{Type: discoveryv1alpha1.ConditionPeeringRequested,
			Status: metav1.ConditionTrue, Reason: discoveryv1alpha1.ReasonAccepted, Message: "accepted"})
		zone := fmt.Sprintf("zone-%d", i%5)
		vnode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "liqo-" + id, Labels: map[string]string{
			offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue, offloadingv1alpha1.RemoteClusterLabel: id}},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprint(4 + i%28)), corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", 8+i%56)), corev1.ResourcePods: resource.MustParse("110")},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		var minutes []brokerv1alpha1.Bucket
		for m := range 60 {
			minutes = append(minutes, brokerv1alpha1.Bucket{Start: metav1.NewTime(now.Add(time.Duration(m-59) * time.Minute).Truncate(time.Minute)), Probes: 30, Up: int32(30 - (i+m)%2), LatencyMicros: latency(i, 0)})
		}
		create(fc, vnode,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: discoveryv1alpha1.TenantNamespace(id)}},
			&sharingv1alpha1.Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: discoveryv1alpha1.TenantNamespace(id), Name: sharingv1alpha1.AdvertisementName(id)},
				Spec: sharingv1alpha1.AdvertisementSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: id, ClusterName: id},
					Resources: vnode.Status.Allocatable, Labels: map[string]string{corev1.LabelTopologyZone: zone},
					Prices: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("0.0%d", 1+i%9))}, Currency: "EUR", PricePeriod: "Hour",
					Timestamp: now, TimeToLive: metav1.NewTime(now.Add(time.Hour))}},
			&brokerv1alpha1.Measurement{ObjectMeta: metav1.ObjectMeta{Namespace: install.DefaultNamespace, Name: id},
				Status: brokerv1alpha1.MeasurementStatus{LastProbe: &now, Reachable: true, LatencyMicros: latency(i, 0), Minutes: minutes}},
		)
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})
	for i := range 20 {
		create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}}}})
	}
	create(&brokerv1alpha1.Selection{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: brokerv1alpha1.SelectionName},
		Spec: brokerv1alpha1.SelectionSpec{Policy: &brokerv1alpha1.Policy{Count: 5, Margin: ptr.To[int32](50), StableFor: &metav1.Duration{Duration: 10 * time.Second},
			Weights:      brokerv1alpha1.Weights{Price: 3, Latency: 2, Uptime: 1, Free: 1, Spread: 2},
			Requirements: brokerv1alpha1.Requirements{MaxLatency: &metav1.Duration{Duration: 50 * time.Millisecond}}}}})

	// The orchestrator alone, on a manager's cache, driven by hand.
	mgr := envtest.StartManager(b, cfg, func(mgr ctrl.Manager) error { return node.IndexPods(ctx, mgr) })
	var decided []time.Duration
	o := &broker.Orchestrator{Client: mgr.GetClient(), Live: c, Namespace: install.DefaultNamespace,
		Decided: func(d time.Duration) { decided = append(decided, d) }}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: consumer}}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		b.Fatal("the manager's cache did not start")
	}
	if _, err := o.Reconcile(ctx, req); err != nil { // the informers fill
		b.Fatal(err)
	}
	var took []time.Duration
	writes := 0
	for round := 1; round <= rounds; round++ {
		// One provider's latency moves, as the prober writes it.
		i := round % providers
		var m brokerv1alpha1.Measurement
		if err := c.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: fmt.Sprintf("provider-%03d", i)}, &m); err != nil {
			b.Fatal(err)
		}
		m.Status.LatencyMicros = latency(i, round)
		if err := c.Status().Update(ctx, &m); err != nil {
			b.Fatal(err)
		}
		var before brokerv1alpha1.Selection
		if err := mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: tenant, Name: brokerv1alpha1.SelectionName}, &before); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := o.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		var after brokerv1alpha1.Selection
		if err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: brokerv1alpha1.SelectionName}, &after); err != nil {
			b.Fatal(err)
		}
		if after.ResourceVersion != before.ResourceVersion {
			writes++
		}
		if after.Status.Decision == nil || len(after.Status.Decision.Chosen) != 5 {
			b.Fatalf("round %d: decision %+v, want 5 chosen", round, after.Status.Decision)
		}
	}
	decided = decided[1:] // the first, on cold caches, before the rounds
	slices.Sort(took)
	slices.Sort(decided)
	p50, p99 := decided[len(decided)/2], decided[len(decided)*99/100]
	r50, r99 := took[len(took)/2], took[len(took)*99/100]
	b.ReportMetric(float64(p50.Microseconds())/1000, "decision-p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "decision-p99-ms")
	b.ReportMetric(float64(r99.Microseconds())/1000, "reconcile-p99-ms")
	fmt.Printf("broker decision over %d providers (real objects, %d rounds): p50 %s, p99 %s (goal: p99 50 ms); "+
		"with the Selection's status written (%d rounds): p50 %s, p99 %s\n",
		providers, len(decided), p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), writes, r50.Round(10*time.Microsecond), r99.Round(10*time.Microsecond))
}
