// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker"
	"github.com/liqo-go/liqo/internal/broker/decide"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// measured writes a provider's Measurement as the broker cluster's
// controller manager would: reachable at latency, or unreachable since.
func measured(t *testing.T, w *world, id string, latency time.Duration, unreachableSince *time.Time) {
	t.Helper()
	ctx := t.Context()
	m := &brokerv1alpha1.Measurement{ObjectMeta: metav1.ObjectMeta{Namespace: install.DefaultNamespace, Name: id}}
	if err := w.c.Create(ctx, m); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	m.Status = brokerv1alpha1.MeasurementStatus{LastProbe: &now, Reachable: unreachableSince == nil, LatencyMicros: latency.Microseconds(),
		Minutes: []brokerv1alpha1.Bucket{{Start: metav1.NewTime(now.Truncate(time.Minute)), Probes: 10, Up: 10, LatencyMicros: latency.Microseconds()}}}
	if unreachableSince != nil {
		m.Status.UnreachableSince, m.Status.LastError = &metav1.Time{Time: *unreachableSince}, "connection refused"
	}
	if err := w.c.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
}

func offer(id, cpuPrice string) []client.Object {
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: discoveryv1alpha1.TenantNamespace(id)}},
		&sharingv1alpha1.Advertisement{
			ObjectMeta: metav1.ObjectMeta{Namespace: discoveryv1alpha1.TenantNamespace(id), Name: sharingv1alpha1.AdvertisementName(id)},
			Spec: sharingv1alpha1.AdvertisementSpec{
				ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: id, ClusterName: id},
				Resources:       corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi")},
				Prices:          corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuPrice)},
				Currency:        "EUR", PricePeriod: "Hour",
				Timestamp: metav1.Now(), TimeToLive: metav1.NewTime(time.Now().Add(time.Hour)),
			},
		},
	}
}

// providers peers the broker with each provider of prices (ID -> cpu
// price): its ForeignCluster, virtual node, offer and a Measurement 5 ms
// away.
func providers(t *testing.T, w *world, prices map[string]string) {
	t.Helper()
	for id, price := range prices {
		w.create(t, peered(id, id, true, false), virtualNode("liqo-"+id, id))
		w.create(t, offer(id, price)...)
		measured(t, w, id, 5*time.Millisecond, nil)
	}
}

// consumerObjects are what a consumer has in the broker: its tenant
// namespace and Selection, and a namespace ns it offloads there.
func consumerObjects(consumer, ns string, spec brokerv1alpha1.SelectionSpec) []client.Object {
	tenant := discoveryv1alpha1.TenantNamespace(consumer)
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}},
		&brokerv1alpha1.Selection{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: brokerv1alpha1.SelectionName}, Spec: spec},
	}
}

// TestOrchestratorPolicy, against a real API server: a consumer's policy
// (two providers, under a price and a latency limit) makes the broker
// choose, from the providers' measurements and offers, the two that pass;
// the Selection's status explains, for the others, the criterion and the
// measured value that ruled them out, and the consumer's namespace is
// offloaded to the chosen. A chosen provider unreachable for the
// failover time is replaced, and the consumer's pods there go at once
// (recreated by the consumer's virtual kubelet elsewhere). An invalid
// policy is reported naming the field, and the last decision stands.
func TestOrchestratorPolicy(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Orchestrator: true}, Namespace: install.DefaultNamespace, FailoverAfter: 3 * time.Second})
	ctx := t.Context()
	const consumer, ns = "consumer-1", "web-3d4e5f"
	tenant := discoveryv1alpha1.TenantNamespace(consumer)
	latency := map[string]time.Duration{"near": 5 * time.Millisecond, "mid": 20 * time.Millisecond, "far": 80 * time.Millisecond, "dear": 4 * time.Millisecond}
	price := map[string]string{"near": "0.03", "mid": "0.02", "far": "0.01", "dear": "0.09"}
	for _, id := range []string{"dear", "far", "mid", "near"} {
		w.create(t, peered(id, id, true, false), virtualNode("liqo-"+id, id))
		w.create(t, offer(id, price[id])...)
		measured(t, w, id, latency[id], nil)
	}
	w.create(t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}},
		&brokerv1alpha1.Selection{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: brokerv1alpha1.SelectionName},
			Spec: brokerv1alpha1.SelectionSpec{Policy: &brokerv1alpha1.Policy{Count: 2, Requirements: brokerv1alpha1.Requirements{
				MaxLatency: &metav1.Duration{Duration: 50 * time.Millisecond},
				MaxPrice:   &brokerv1alpha1.MaxPrice{Currency: "EUR", PerUnit: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.05")}},
			}}}},
	)
	selection := func() (*brokerv1alpha1.Selection, error) {
		var sel brokerv1alpha1.Selection
		return &sel, w.c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: brokerv1alpha1.SelectionName}, &sel)
	}
	annotated := func(want string) error {
		var n corev1.Namespace
		if err := w.c.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
			return err
		}
		if got := n.Annotations[brokerv1alpha1.ProvidersAnnotation]; got != want {
			return fmt.Errorf("namespace's providers %q, want %q", got, want)
		}
		return nil
	}
	verdict := func(d *brokerv1alpha1.Decision, id string) brokerv1alpha1.ProviderDecision {
		for _, p := range d.Providers {
			if p.ClusterID == id {
				return p
			}
		}
		return brokerv1alpha1.ProviderDecision{}
	}

	eventually(t, func() error {
		sel, err := selection()
		if err != nil {
			return err
		}
		d := sel.Status.Decision
		if d == nil || !slices.Equal(d.Chosen, []string{"mid", "near"}) {
			return fmt.Errorf("decision %+v, want mid and near chosen", d)
		}
		if far := verdict(d, "far"); far.Verdict != brokerv1alpha1.VerdictFiltered || far.Criterion != decide.CriterionMaxLatency || far.Measured != "80.0ms" {
			return fmt.Errorf("far: %+v, want filtered by %s at 80.0ms", far, decide.CriterionMaxLatency)
		}
		if dear := verdict(d, "dear"); dear.Verdict != brokerv1alpha1.VerdictFiltered || dear.Criterion != decide.CriterionMaxPrice || !strings.Contains(dear.Measured, "0.09 EUR/h") {
			return fmt.Errorf("dear: %+v, want filtered by %s at 0.09 EUR/h", dear, decide.CriterionMaxPrice)
		}
		if c := meta.FindStatusCondition(sel.Status.Conditions, broker.ConditionReady); c == nil || c.Reason != broker.ReasonServing {
			return fmt.Errorf("Ready %+v", c)
		}
		return annotated("mid,near")
	})

	// Two of the consumer's pods on near; near stops answering.
	for i := range 2 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}},
			Spec:       corev1.PodSpec{NodeName: "liqo-near", Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		}
		w.create(t, pod)
	}
	down := time.Now()
	measured(t, w, "near", 0, &down)
	// As the broker's peering sees it then: its request fails, its
	// virtual node is NotReady. A provider down is still one.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var fc discoveryv1alpha1.ForeignCluster
		if err := w.c.Get(ctx, client.ObjectKey{Name: "near"}, &fc); err != nil {
			return err
		}
		meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{Type: discoveryv1alpha1.ConditionPeeringRequested, Status: metav1.ConditionFalse,
			Reason: discoveryv1alpha1.ReasonRequestFailed, Message: "connection refused"})
		meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{Type: discoveryv1alpha1.ConditionVirtualNodeReady, Status: metav1.ConditionFalse,
			Reason: discoveryv1alpha1.ReasonProviderUnreachable, Message: "connection refused"})
		return w.c.Status().Update(ctx, &fc)
	}); err != nil {
		t.Fatal(err)
	}
	// Not before the failover time: pods stay, the decision stands.
	envtest.Consistently(t, time.Second, func(ctx context.Context) error {
		var pods corev1.PodList
		if err := w.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) != 2 {
			return fmt.Errorf("%d pods before the failover time, want 2", len(pods.Items))
		}
		return annotated("mid,near")
	})
	eventually(t, func() error {
		sel, err := selection()
		if err != nil {
			return err
		}
		d := sel.Status.Decision
		if near := verdict(d, "near"); near.Verdict != brokerv1alpha1.VerdictFiltered || near.Criterion != decide.CriterionAvailability ||
			!strings.Contains(near.Measured, "unreachable since") {
			return fmt.Errorf("near: %+v, want filtered as unreachable", near)
		}
		var pods corev1.PodList
		if err := w.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) != 0 {
			return fmt.Errorf("%d pods still on failed near", len(pods.Items))
		}
		return annotated("mid")
	})
	if time.Since(down) > 10*time.Second {
		t.Errorf("failover took %s after the failure, with a failover time of 3 s", time.Since(down).Round(time.Second))
	}

	// An invalid policy: said, naming the field; the decision stands.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sel, err := selection()
		if err != nil {
			return err
		}
		sel.Spec.Providers, sel.Spec.Excluded = []string{"far"}, []string{"far"}
		return w.c.Update(ctx, sel)
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		sel, err := selection()
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(sel.Status.Conditions, broker.ConditionReady)
		if c == nil || c.Reason != broker.ReasonPolicyInvalid || !strings.Contains(c.Message, "spec.excluded[0]") || c.ObservedGeneration != sel.Generation {
			return fmt.Errorf("Ready %+v, want %s naming spec.excluded[0]", c, broker.ReasonPolicyInvalid)
		}
		if sel.Status.Decision == nil || !slices.Equal(sel.Status.Decision.Chosen, []string{"mid"}) {
			return errors.New("the last decision is gone")
		}
		return annotated("mid")
	})
}

// TestOrchestratorFailoverNowhereToGo, against a real API server: when
// every provider in use fails and no other answers (as a broker that lost
// its own network sees it), the consumer's pods are not evicted to wait
// here with nowhere to run: they stay, the Selection says why, and they
// move as soon as a provider answers again.
func TestOrchestratorFailoverNowhereToGo(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Orchestrator: true}, Namespace: install.DefaultNamespace, FailoverAfter: 2 * time.Second})
	ctx := t.Context()
	const consumer, ns = "consumer-1", "web-7a8b9c"
	tenant := discoveryv1alpha1.TenantNamespace(consumer)
	providers(t, w, map[string]string{"one": "0.01", "two": "0.01"})
	w.create(t, consumerObjects(consumer, ns, brokerv1alpha1.SelectionSpec{Policy: &brokerv1alpha1.Policy{Count: 1, Weights: brokerv1alpha1.Weights{Latency: 1}}})...)
	selection := func() (*brokerv1alpha1.Selection, error) {
		var sel brokerv1alpha1.Selection
		return &sel, w.c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: brokerv1alpha1.SelectionName}, &sel)
	}
	var first string
	eventually(t, func() error {
		sel, err := selection()
		if err != nil {
			return err
		}
		if d := sel.Status.Decision; d == nil || len(d.Chosen) != 1 {
			return fmt.Errorf("decision %+v, want one provider chosen", d)
		}
		first = sel.Status.Decision.Chosen[0]
		return nil
	})
	other := map[string]string{"one": "two", "two": "one"}[first]
	for i := range 2 {
		w.create(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}},
			Spec:       corev1.PodSpec{NodeName: "liqo-" + first, Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		})
	}
	podsOn := func(node string) (int, error) {
		var pods corev1.PodList
		if err := w.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		n := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == node {
				n++
			}
		}
		return n, nil
	}

	// Both fail: nowhere to go.
	down := time.Now()
	measured(t, w, "one", 0, &down)
	measured(t, w, "two", 0, &down)
	eventually(t, func() error {
		sel, err := selection()
		if err != nil {
			return err
		}
		if d := sel.Status.Decision; d == nil || len(d.Chosen) != 0 {
			return fmt.Errorf("decision %+v, want none chosen, both down", d)
		}
		c := meta.FindStatusCondition(sel.Status.Conditions, broker.ConditionReady)
		if c == nil || c.Reason != broker.ReasonStranded || !strings.Contains(c.Message, "2 on "+first) {
			return fmt.Errorf("Ready %+v, want %s saying 2 pods stay on %s", c, broker.ReasonStranded, first)
		}
		return nil
	})
	// And they stay while nothing answers.
	envtest.Consistently(t, 3*time.Second, func(context.Context) error {
		n, err := podsOn("liqo-" + first)
		if err != nil {
			return err
		}
		if n != 2 {
			return fmt.Errorf("%d pods on %s, want the 2 kept while no provider answers", n, first)
		}
		return nil
	})

	// The other answers again: the pods leave the one still down.
	measured(t, w, other, 5*time.Millisecond, nil)
	eventually(t, func() error {
		sel, err := selection()
		if err != nil {
			return err
		}
		if d := sel.Status.Decision; d == nil || !slices.Equal(d.Chosen, []string{other}) {
			return fmt.Errorf("decision %+v, want %s chosen", d, other)
		}
		n, err := podsOn("liqo-" + first)
		if err != nil {
			return err
		}
		if n != 0 {
			return fmt.Errorf("%d pods still on failed %s, with %s answering", n, first, other)
		}
		return nil
	})
}

// TestOrchestratorPolicyChoosesNone, against a real API server: a policy
// that no provider passes chooses none, and the consumer's pods, running
// on a provider it had enabled by hand, stay there rather than wait here
// with nowhere to run; the Selection says so and why. Once a provider
// passes, they move to it.
func TestOrchestratorPolicyChoosesNone(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Orchestrator: true}, Namespace: install.DefaultNamespace, FailoverAfter: 2 * time.Second})
	ctx := t.Context()
	const consumer, ns = "consumer-1", "web-1c2d3e"
	tenant := discoveryv1alpha1.TenantNamespace(consumer)
	providers(t, w, map[string]string{"one": "0.09", "two": "0.09"})
	w.create(t, consumerObjects(consumer, ns, brokerv1alpha1.SelectionSpec{Providers: []string{"one"}})...)
	for i := range 2 {
		w.create(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}},
			Spec:       corev1.PodSpec{NodeName: "liqo-one", Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		})
	}
	key := client.ObjectKey{Namespace: tenant, Name: brokerv1alpha1.SelectionName}
	onOne := func() (int, error) {
		var pods corev1.PodList
		if err := w.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		n := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == "liqo-one" && p.DeletionTimestamp == nil { // evicted: ending, with no kubelet here to end it
				n++
			}
		}
		return n, nil
	}

	// A policy whose price limit both providers fail.
	none, changed := broker.Decisions("none"), broker.Decisions("changed")
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var sel brokerv1alpha1.Selection
		if err := w.c.Get(ctx, key, &sel); err != nil {
			return err
		}
		sel.Spec.Providers = nil
		sel.Spec.Policy = &brokerv1alpha1.Policy{Count: 1, Weights: brokerv1alpha1.Weights{Price: 1},
			Requirements: brokerv1alpha1.Requirements{MaxPrice: &brokerv1alpha1.MaxPrice{Currency: "EUR", PerUnit: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.05")}}}}
		return w.c.Update(ctx, &sel)
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		var sel brokerv1alpha1.Selection
		if err := w.c.Get(ctx, key, &sel); err != nil {
			return err
		}
		if d := sel.Status.Decision; d == nil || sel.Status.ObservedGeneration != sel.Generation || len(d.Chosen) != 0 {
			return fmt.Errorf("decision %+v, want none chosen", d)
		}
		c := meta.FindStatusCondition(sel.Status.Conditions, broker.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != broker.ReasonNoProvider || !strings.Contains(c.Message, "stay where they run (2 on one)") ||
			!strings.Contains(c.Message, decide.CriterionMaxPrice) {
			return fmt.Errorf("Ready %+v, want %s saying the 2 pods stay on one, and why none was chosen", c, broker.ReasonNoProvider)
		}
		if n := broker.Decisions("none") - none; n < 1 {
			return fmt.Errorf("%v decisions counted with outcome none, want at least 1", n)
		}
		return nil
	})
	envtest.Consistently(t, 3*time.Second, func(context.Context) error {
		if n, err := onOne(); err != nil || n != 2 {
			return fmt.Errorf("%d pods on one (%w), want the 2 left there while the policy chooses none", n, err)
		}
		return nil
	})

	// two cuts its price: chosen, and the pods leave one.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var adv sharingv1alpha1.Advertisement
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace("two"), Name: sharingv1alpha1.AdvertisementName("two")}, &adv); err != nil {
			return err
		}
		adv.Spec.Prices = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.01")}
		return w.c.Update(ctx, &adv)
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		var sel brokerv1alpha1.Selection
		if err := w.c.Get(ctx, key, &sel); err != nil {
			return err
		}
		if d := sel.Status.Decision; d == nil || !slices.Equal(d.Chosen, []string{"two"}) {
			return fmt.Errorf("decision %+v, want two chosen", d)
		}
		if n, err := onOne(); err != nil || n != 0 {
			return fmt.Errorf("%d pods still on one (%w), with two chosen", n, err)
		}
		if n := broker.Decisions("changed") - changed; n < 1 {
			return fmt.Errorf("%v decisions counted with outcome changed, want at least 1", n)
		}
		return nil
	})
}

// TestOrchestratorConsumerView, against a real API server: two consumers
// use one provider, which the broker stops reaching. The one whose own
// view (its ConsumerView, written with its identity, fresh) still finds
// the provider answering keeps it and its pods there, the decision
// saying both views; the other, with no such view, fails over at once: a
// consumer's view changes its own decision only. Once its view stops
// coming, it fails over too.
func TestOrchestratorConsumerView(t *testing.T) {
	const failAfter = 2 * time.Second
	w := startBroker(t, broker.Options{Modes: broker.Modes{Orchestrator: true}, Namespace: install.DefaultNamespace, FailoverAfter: failAfter})
	ctx := t.Context()
	providers(t, w, map[string]string{"one": "0.01", "two": "0.05"})
	consumers := []string{"seeing", "blind"}
	for _, consumer := range consumers {
		ns := "app-" + consumer
		w.create(t, consumerObjects(consumer, ns, brokerv1alpha1.SelectionSpec{Policy: &brokerv1alpha1.Policy{Count: 1, Weights: brokerv1alpha1.Weights{Price: 1}}})...)
		w.create(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}},
			Spec: corev1.PodSpec{NodeName: "liqo-one", Containers: []corev1.Container{{Name: "c", Image: "pause"}}}})
	}
	decision := func(consumer string) (*brokerv1alpha1.Decision, error) {
		var sel brokerv1alpha1.Selection
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer), Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
			return nil, err
		}
		if sel.Status.Decision == nil {
			return nil, errors.New("no decision yet")
		}
		return sel.Status.Decision, nil
	}
	onOne := func(consumer string) (bool, error) {
		var pod corev1.Pod
		err := w.c.Get(ctx, client.ObjectKey{Namespace: "app-" + consumer, Name: "web"}, &pod)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && pod.Spec.NodeName == "liqo-one", err
	}
	viewKey := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace("seeing"), Name: brokerv1alpha1.ConsumerViewName}
	eventually(t, func() error {
		for _, consumer := range consumers {
			d, err := decision(consumer)
			if err != nil || !slices.Equal(d.Chosen, []string{"one"}) {
				return fmt.Errorf("%s's decision %+v (%w), want one", consumer, d, err)
			}
		}
		// The broker made the views, empty.
		var v brokerv1alpha1.ConsumerView
		return w.c.Get(ctx, viewKey, &v)
	})

	// The seeing consumer writes, every 200 ms, that one answers it.
	writing, stopWriting := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for writing.Err() == nil {
			_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var v brokerv1alpha1.ConsumerView
				if err := w.c.Get(writing, viewKey, &v); err != nil {
					return err
				}
				v.Spec = brokerv1alpha1.ConsumerViewSpec{CheckedAt: &metav1.Time{Time: time.Now()},
					Providers: []brokerv1alpha1.ProviderSight{{ClusterID: "one", Answered: true}, {ClusterID: "two", Answered: true}}}
				return w.c.Update(writing, &v)
			})
			select {
			case <-writing.Done():
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { stopWriting(); <-done })

	// one stops answering the broker.
	down := time.Now().Add(-time.Minute)
	measured(t, w, "one", 0, &down)
	eventually(t, func() error {
		d, err := decision("blind")
		if err != nil || !slices.Equal(d.Chosen, []string{"two"}) {
			return fmt.Errorf("blind's decision %+v (%w), want two: one is down and it has no view of its own", d, err)
		}
		if on, err := onOne("blind"); err != nil || on {
			return fmt.Errorf("blind's pod still on one (%w)", err)
		}
		return nil
	})
	seeingKeeps := func(context.Context) error {
		d, err := decision("seeing")
		if err != nil {
			return err
		}
		var v brokerv1alpha1.ProviderDecision
		for _, p := range d.Providers {
			if p.ClusterID == "one" {
				v = p
			}
		}
		if !slices.Equal(d.Chosen, []string{"one"}) || v.Verdict != brokerv1alpha1.VerdictKept || !strings.Contains(v.Message, "broker finds it down") ||
			!strings.Contains(v.Message, "consumer's own check finds it answering") {
			return fmt.Errorf("seeing's decision chose %v, one %+v; want one kept on the consumer's view", d.Chosen, v)
		}
		if on, err := onOne("seeing"); err != nil || !on {
			return fmt.Errorf("seeing's pod left one (%w), which its own view finds answering", err)
		}
		return nil
	}
	eventually(t, func() error { return seeingKeeps(ctx) })
	envtest.Consistently(t, 3*time.Second, seeingKeeps)

	// Its view stops coming: past the failover time, it fails over too.
	stopWriting()
	<-done
	eventually(t, func() error {
		d, err := decision("seeing")
		if err != nil || !slices.Equal(d.Chosen, []string{"two"}) {
			return fmt.Errorf("seeing's decision %+v (%w), want two once its view is stale", d, err)
		}
		if on, err := onOne("seeing"); err != nil || on {
			return fmt.Errorf("seeing's pod still on one (%w)", err)
		}
		return nil
	})
}

// TestOrchestratorReservations, against a real API server: two consumers
// whose policies both prefer a provider that fits only one of them: one
// holds it, the other gets the next best, never both; the ledger and the
// catalog show what each holds; a consumer that drops its policy holds
// nothing any more.
func TestOrchestratorReservations(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Orchestrator: true, Catalog: true}, Namespace: install.DefaultNamespace})
	ctx := t.Context()
	for id, latency := range map[string]time.Duration{"big": 5 * time.Millisecond, "next": 20 * time.Millisecond} {
		vn := virtualNode("liqo-"+id, id)
		vn.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
		w.create(t, peered(id, id, true, false), vn)
		w.create(t, offer(id, "0.01")...)
		measured(t, w, id, latency, nil)
	}
	w.create(t,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "catalog-reader"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{brokerv1alpha1.GroupVersion.Group}, Resources: []string{broker.CatalogResource}, Verbs: []string{"get"}}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "users"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "users", Name: "default"}})
	reader := w.token(t, "users", "reader", "catalog-reader")
	consumers := []string{"consumer-1", "consumer-2"}
	for i, consumer := range consumers {
		ns := fmt.Sprintf("app-%d", i)
		w.create(t,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: discoveryv1alpha1.TenantNamespace(consumer)}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}},
			// 3 cores asked, not scheduled yet: of 4 free at each provider.
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}}},
		)
	}
	// Both at once.
	for _, consumer := range consumers {
		w.create(t, &brokerv1alpha1.Selection{ObjectMeta: metav1.ObjectMeta{Namespace: discoveryv1alpha1.TenantNamespace(consumer), Name: brokerv1alpha1.SelectionName},
			Spec: brokerv1alpha1.SelectionSpec{Policy: &brokerv1alpha1.Policy{Count: 1, Weights: brokerv1alpha1.Weights{Latency: 1}}}})
	}
	chosen := func(ctx context.Context) (map[string]string, error) {
		out := map[string]string{}
		for _, consumer := range consumers {
			var sel brokerv1alpha1.Selection
			if err := w.c.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer), Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
				return nil, err
			}
			if d := sel.Status.Decision; d != nil && len(d.Chosen) == 1 {
				out[consumer] = d.Chosen[0]
			}
		}
		return out, nil
	}
	neverBoth := func(ctx context.Context) error {
		got, err := chosen(ctx)
		if err != nil {
			return err
		}
		if got["consumer-1"] == "big" && got["consumer-2"] == "big" {
			return errors.New("both consumers hold big, which fits one")
		}
		return nil
	}
	eventually(t, func() error {
		got, err := chosen(ctx)
		if err != nil {
			return err
		}
		if len(got) != 2 || got["consumer-1"] == got["consumer-2"] {
			return fmt.Errorf("chosen %v, want big for one and next for the other", got)
		}
		var big, next brokerv1alpha1.Reservation
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: "big"}, &big); err != nil {
			return err
		}
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: "next"}, &next); err != nil {
			return err
		}
		for _, r := range []*brokerv1alpha1.Reservation{&big, &next} {
			if len(r.Status.Consumers) != 1 || r.Status.Consumers[0].Consumer != consumerOn(got, r.Name) || r.Status.Reserved.Cpu().Value() != 3 {
				return fmt.Errorf("the ledger of %s: %+v, want %s holding 3 cores", r.Name, r.Status, consumerOn(got, r.Name))
			}
		}
		return nil
	})
	envtest.Consistently(t, 2*time.Second, neverBoth)
	a := w.get(t, "/api/v1/clusters/big", reader)
	var c broker.Cluster
	if a.code != http.StatusOK || json.Unmarshal(a.body, &c) != nil || c.Reserved.Cpu().Value() != 3 {
		t.Errorf("the catalog's big: %d %s, want 3 cores reserved", a.code, a.body)
	}

	// consumer-1 drops its policy: it holds nothing any more.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var sel brokerv1alpha1.Selection
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace("consumer-1"), Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
			return err
		}
		sel.Spec.Policy = nil
		return w.c.Update(ctx, &sel)
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		var list brokerv1alpha1.ReservationList
		if err := w.c.List(ctx, &list); err != nil {
			return err
		}
		for _, r := range list.Items {
			for _, e := range r.Status.Consumers {
				if e.Consumer == "consumer-1" {
					return fmt.Errorf("consumer-1 still holds %v of %s", e.Resources, r.Name)
				}
			}
		}
		return nil
	})
}

// TestReservationOfAGoneConsumerReleased, against a real API server: a
// ledger naming a consumer that has no Selection any more (gone while the
// broker was away, so nothing else wakes it) is found from the ledger
// itself, and the holding released.
func TestReservationOfAGoneConsumerReleased(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Orchestrator: true}, Namespace: install.DefaultNamespace})
	ctx := t.Context()
	r := &brokerv1alpha1.Reservation{ObjectMeta: metav1.ObjectMeta{Namespace: install.DefaultNamespace, Name: "provider-1"}}
	w.create(t, r)
	r.Status = brokerv1alpha1.ReservationStatus{
		Consumers: []brokerv1alpha1.ConsumerReservation{{Consumer: "gone-consumer", Since: metav1.Now(),
			Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}},
		Reserved: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")},
	}
	if err := w.c.Status().Update(ctx, r); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			return err
		}
		if len(r.Status.Consumers) != 0 || !r.Status.Reserved.Cpu().IsZero() {
			return fmt.Errorf("the ledger still holds %+v", r.Status)
		}
		return nil
	})
}

// consumerOn returns the consumer whose choice is provider.
func consumerOn(chosen map[string]string, provider string) string {
	for c, p := range chosen {
		if p == provider {
			return c
		}
	}
	return ""
}

// TestOrchestratorPolicyChange: a consumer changing its policy's weights
// gets the choice the new weights make at once, not after the
// hysteresis that holds back changes the measurements make.
func TestOrchestratorPolicyChange(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Orchestrator: true}, Namespace: install.DefaultNamespace})
	ctx := t.Context()
	for id, cpu := range map[string]string{"near": "16", "dear": "32"} {
		vn := virtualNode("liqo-"+id, id)
		vn.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(cpu + "Gi"), corev1.ResourcePods: resource.MustParse("110")}
		w.create(t, peered(id, id, true, false), vn)
		w.create(t, offer(id, map[string]string{"near": "0.02", "dear": "0.04"}[id])...)
		measured(t, w, id, 5*time.Millisecond, nil)
	}
	const consumer = "consumer-1"
	tenant := discoveryv1alpha1.TenantNamespace(consumer)
	w.create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}},
		&brokerv1alpha1.Selection{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: brokerv1alpha1.SelectionName},
			Spec: brokerv1alpha1.SelectionSpec{Policy: &brokerv1alpha1.Policy{Count: 1, Weights: brokerv1alpha1.Weights{Price: 10}}}})
	chosen := func(want string) {
		t.Helper()
		eventually(t, func() error {
			var sel brokerv1alpha1.Selection
			if err := w.c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
				return err
			}
			if d := sel.Status.Decision; sel.Status.ObservedGeneration != sel.Generation || d == nil || !slices.Equal(d.Chosen, []string{want}) {
				return fmt.Errorf("generation %d (observed %d): decision %+v, want %s", sel.Generation, sel.Status.ObservedGeneration, d, want)
			}
			return nil
		})
	}
	chosen("near")
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var sel brokerv1alpha1.Selection
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
			return err
		}
		sel.Spec.Policy.Weights = brokerv1alpha1.Weights{Free: 10}
		return w.c.Update(ctx, &sel)
	}); err != nil {
		t.Fatal(err)
	}
	chosen("dear")
}

// TestProviderPricesChecked: a provider cannot win every price
// comparison by offering at a negative price, nor name more priced
// resources than a decision should weigh: its Advertisement is refused,
// naming the field.
func TestProviderPricesChecked(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Catalog: true}, Namespace: install.DefaultNamespace})
	objs := offer("cheat", "-0.01")
	w.create(t, objs[0])
	err := w.c.Create(t.Context(), objs[1])
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.prices") || !strings.Contains(err.Error(), "never negative") {
		t.Errorf("a negative price: %v, want refused naming spec.prices", err)
	}
	objs = offer("greedy", "0.01")
	adv := objs[1].(*sharingv1alpha1.Advertisement)
	for i := range 40 {
		adv.Spec.Prices[corev1.ResourceName(fmt.Sprintf("example.com/r%d", i))] = resource.MustParse("1")
	}
	w.create(t, objs[0])
	if err := w.c.Create(t.Context(), adv); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.prices") {
		t.Errorf("41 prices: %v, want refused naming spec.prices", err)
	}
}

// TestOrchestratorMovesPaced: a policy's maxMovesPerMinute bounds how
// many of the consumer's pods a change of selection evicts: with 2, of
// the 5 pods on a provider disabled, 2 go and 3 are held, the Selection
// saying so; a minute later 2 more go; lifting the bound lets the last
// go at once.
func TestOrchestratorMovesPaced(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Orchestrator: true}, Namespace: install.DefaultNamespace})
	ctx := t.Context()
	providers(t, w, map[string]string{"cheap": "0.01", "dear": "0.04"})
	const consumer, ns = "consumer-1", "web-7a8b9c"
	tenant := discoveryv1alpha1.TenantNamespace(consumer)
	w.create(t, consumerObjects(consumer, ns, brokerv1alpha1.SelectionSpec{
		Policy: &brokerv1alpha1.Policy{Count: 1, Weights: brokerv1alpha1.Weights{Price: 10}, MaxMovesPerMinute: 2}})...)
	for i := range 5 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}},
			Spec:       corev1.PodSpec{NodeName: "liqo-cheap", Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		}
		w.create(t, pod)
	}
	update := func(change func(*brokerv1alpha1.SelectionSpec)) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var sel brokerv1alpha1.Selection
			if err := w.c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
				return err
			}
			change(&sel.Spec)
			return w.c.Update(ctx, &sel)
		}); err != nil {
			t.Fatal(err)
		}
	}
	// state is how many of the pods terminate, and the Selection's
	// report on cheap and its Ready condition.
	state := func() (terminating int, cheap brokerv1alpha1.SelectedProvider, ready *metav1.Condition, err error) {
		var pods corev1.PodList
		if err := w.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return 0, cheap, nil, err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				terminating++
			}
		}
		var sel brokerv1alpha1.Selection
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
			return 0, cheap, nil, err
		}
		for _, p := range sel.Status.Providers {
			if p.ClusterID == "cheap" {
				cheap = p
			}
		}
		return terminating, cheap, meta.FindStatusCondition(sel.Status.Conditions, broker.ConditionReady), nil
	}
	eventually(t, func() error {
		n, cheap, ready, err := state()
		if err != nil {
			return err
		}
		if n != 0 || cheap.State != brokerv1alpha1.ProviderServing || cheap.Pods != 5 || ready == nil || ready.Reason != broker.ReasonServing {
			return fmt.Errorf("%d terminating, cheap %+v, Ready %+v; want the 5 pods served on cheap", n, cheap, ready)
		}
		return nil
	})

	update(func(s *brokerv1alpha1.SelectionSpec) { s.Excluded = []string{"cheap"} })
	moved := time.Now()
	paced := func(context.Context) error {
		n, cheap, ready, err := state()
		if err != nil {
			return err
		}
		if n != 2 || cheap.State != brokerv1alpha1.ProviderDraining || cheap.Held != 3 || ready == nil || ready.Reason != broker.ReasonDraining ||
			!strings.Contains(ready.Message, "maxMovesPerMinute (2) holds 3 on cheap") {
			return fmt.Errorf("%d terminating, cheap %+v, Ready %+v; want 2 moved and 3 held by maxMovesPerMinute", n, cheap, ready)
		}
		return nil
	}
	eventually(t, func() error { return paced(ctx) })
	// Held, not moved on the orchestrator's next passes.
	envtest.Consistently(t, 2*time.Second, paced)
	if c := counter(t, "liqo_broker_evictions_total", "cheap", "paced"); c < 1 {
		t.Errorf("liqo_broker_evictions_total{provider=cheap,result=paced} %v, want at least 1", c)
	}

	// A minute after the first moves, their places free: 2 more go, by
	// the orchestrator's own retry (nothing else changes meanwhile).
	envtest.Eventually(t, 90*time.Second, func(context.Context) error {
		n, cheap, _, err := state()
		if err != nil {
			return err
		}
		if n != 4 || cheap.Held != 1 {
			return fmt.Errorf("%d terminating, cheap %+v; want 4 moved and 1 held once the minute is over", n, cheap)
		}
		return nil
	})
	if since := time.Since(moved); since < 55*time.Second {
		t.Errorf("the next moves came %s after the first, want a minute", since.Round(time.Second))
	}

	update(func(s *brokerv1alpha1.SelectionSpec) { s.Policy.MaxMovesPerMinute = 0 })
	eventually(t, func() error {
		n, cheap, _, err := state()
		if err != nil {
			return err
		}
		if n != 5 || cheap.Held != 0 {
			return fmt.Errorf("%d terminating, cheap %+v; want all 5 moving once the bound is lifted", n, cheap)
		}
		return nil
	})
}
