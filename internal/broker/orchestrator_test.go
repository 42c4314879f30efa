// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

func virtualNode(name, provider string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue, offloadingv1alpha1.RemoteClusterLabel: provider,
		}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// TestOrchestrator: the namespace the broker made for a consumer is
// offloaded to the providers that consumer enabled, and its new pods may
// go only to those; disabling a provider evicts the consumer's pods
// there, within the namespace's PodDisruptionBudgets, and keeps the
// provider until the last is gone; the consumer's Selection says, per
// provider, what is happening, and an enabled provider without a Ready
// virtual node is reported unavailable and taken out.
func TestOrchestrator(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Orchestrator: true}})
	ctx := t.Context()
	const consumer, ns = "consumer-1", "web-0a1b2c"
	tenant := discoveryv1alpha1.TenantNamespace(consumer)
	w.create(t,
		virtualNode("liqo-rome", "provider-1"), virtualNode("liqo-paris", "provider-2"),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}},
		&brokerv1alpha1.Selection{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: brokerv1alpha1.SelectionName},
			Spec: brokerv1alpha1.SelectionSpec{Providers: []string{"provider-1"}}},
	)

	// expect waits until the namespace's marks, its NamespaceOffloading's
	// providers and the Selection's report are as said.
	expect := func(annotation string, offloadedTo []string, reason string, states map[string]brokerv1alpha1.SelectedProvider) {
		t.Helper()
		eventually(t, func() error {
			var n corev1.Namespace
			if err := w.c.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
				return err
			}
			if n.Labels[brokerv1alpha1.OrchestratedLabel] != brokerv1alpha1.OrchestratedValue || n.Annotations[brokerv1alpha1.ProvidersAnnotation] != annotation {
				return fmt.Errorf("namespace labels %v annotations %v, want orchestrated for %q", n.Labels, n.Annotations, annotation)
			}
			// The consumer's virtual kubelet may copy its budgets here.
			var rb rbacv1.RoleBinding
			if err := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: brokerv1alpha1.BudgetsClusterRole}, &rb); err != nil {
				return err
			}
			if rb.RoleRef.Name != brokerv1alpha1.BudgetsClusterRole || len(rb.Subjects) != 1 || rb.Subjects[0].Name != "liqo-virtual-kubelet-"+consumer {
				return fmt.Errorf("RoleBinding %s: %+v %+v, want the consumer's virtual kubelet bound", rb.Name, rb.RoleRef, rb.Subjects)
			}
			var no offloadingv1alpha1.NamespaceOffloading
			if err := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
				return err
			}
			if no.Spec.PodOffloadingStrategy != offloadingv1alpha1.PodOffloadingRemote || no.Spec.ClusterSelector == nil || len(no.Spec.ClusterSelector.NodeSelectorTerms) != 1 {
				return fmt.Errorf("NamespaceOffloading spec %+v, want Remote with one term", no.Spec)
			}
			req := no.Spec.ClusterSelector.NodeSelectorTerms[0].MatchExpressions
			if len(req) != 1 || req[0].Key != offloadingv1alpha1.RemoteClusterLabel || !slices.Equal(req[0].Values, offloadedTo) {
				return fmt.Errorf("offloaded by %+v, want to %v", req, offloadedTo)
			}
			var sel brokerv1alpha1.Selection
			if err := w.c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
				return err
			}
			c := meta.FindStatusCondition(sel.Status.Conditions, broker.ConditionReady)
			if c == nil || c.Reason != reason || sel.Status.ObservedGeneration != sel.Generation {
				return fmt.Errorf("Selection Ready %+v (generation %d, observed %d), want reason %s", c, sel.Generation, sel.Status.ObservedGeneration, reason)
			}
			got := map[string]brokerv1alpha1.SelectedProvider{}
			for _, p := range sel.Status.Providers {
				got[p.ClusterID] = p
			}
			if len(got) != len(states) {
				return fmt.Errorf("Selection providers %+v, want %+v", sel.Status.Providers, states)
			}
			for id, want := range states {
				want.ClusterID = id
				if got[id] != want {
					return fmt.Errorf("Selection providers %+v, want %+v", sel.Status.Providers, states)
				}
			}
			return nil
		})
	}
	serving := func(pods int32) brokerv1alpha1.SelectedProvider {
		return brokerv1alpha1.SelectedProvider{State: brokerv1alpha1.ProviderServing, Pods: pods}
	}

	expect("provider-1", []string{"provider-1"}, broker.ReasonServing, map[string]brokerv1alpha1.SelectedProvider{"provider-1": serving(0)})

	// Three of the consumer's pods, bound to provider-1's virtual node
	// (no scheduler here), one PodDisruptionBudget keeping them all.
	// Running and Ready, as the provider reports them: the eviction API
	// ignores budgets for pods still Pending.
	for i := range 3 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "web", offloadingv1alpha1.OriginClusterLabel: consumer}},
			Spec:       corev1.PodSpec{NodeName: "liqo-rome", Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		}
		w.create(t, pod)
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if err := w.c.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: &intstr.IntOrString{Type: intstr.Int, IntVal: 3}, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
	}}
	w.create(t, pdb)
	// As the disruption controller (not running here) sees it: no
	// disruption allowed.
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, CurrentHealthy: 3, DesiredHealthy: 3, ExpectedPods: 3}
	if err := w.c.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	expect("provider-1", []string{"provider-1"}, broker.ReasonServing, map[string]brokerv1alpha1.SelectedProvider{"provider-1": serving(3)})

	var sel brokerv1alpha1.Selection
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
		t.Fatal(err)
	}
	sel.Spec.Providers = []string{"provider-2"}
	if err := w.c.Update(ctx, &sel); err != nil {
		t.Fatal(err)
	}
	draining := map[string]brokerv1alpha1.SelectedProvider{
		"provider-1": {State: brokerv1alpha1.ProviderDraining, Pods: 3, Held: 3}, "provider-2": serving(0),
	}
	expect("provider-2", []string{"provider-1", "provider-2"}, broker.ReasonDraining, draining)
	terminating := func() (int, error) {
		var pods corev1.PodList
		if err := w.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		n := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				n++
			}
		}
		return n, nil
	}
	if n, err := terminating(); err != nil || n != 0 {
		t.Fatalf("%d pods terminating (%v) while the PodDisruptionBudget forbids it", n, err)
	}

	// Without the budget, the drain goes on: the pods terminate, and
	// provider-1 stays offloaded to until they are gone.
	if err := w.c.Delete(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		if n, err := terminating(); err != nil || n != 3 {
			return fmt.Errorf("%d pods terminating (%w), want the 3 on the disabled provider", n, err)
		}
		return nil
	})
	draining["provider-1"] = brokerv1alpha1.SelectedProvider{State: brokerv1alpha1.ProviderDraining, Pods: 3}
	expect("provider-2", []string{"provider-1", "provider-2"}, broker.ReasonDraining, draining)
	for i := range 3 {
		// As the broker's virtual kubelet does once the provider confirms.
		if err := w.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i)}}, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	expect("provider-2", []string{"provider-2"}, broker.ReasonServing, map[string]brokerv1alpha1.SelectedProvider{"provider-2": serving(0)})
	// The operator sees the drain in the metrics: held by the budget,
	// then three evictions.
	if held, evicted := counter(t, "liqo_broker_evictions_total", "provider-1", "held"), counter(t, "liqo_broker_evictions_total", "provider-1", "evicted"); held < 1 || evicted != 3 {
		t.Errorf("liqo_broker_evictions_total for provider-1: held %v, evicted %v; want at least 1 and 3", held, evicted)
	}

	// provider-2's virtual node turns NotReady: unavailable, and no new
	// pod goes there.
	var paris corev1.Node
	if err := w.c.Get(ctx, client.ObjectKey{Name: "liqo-paris"}, &paris); err != nil {
		t.Fatal(err)
	}
	paris.Status.Conditions[0].Status = corev1.ConditionFalse
	if err := w.c.Status().Update(ctx, &paris); err != nil {
		t.Fatal(err)
	}
	expect("", []string{"provider-2"}, broker.ReasonUnavailable, map[string]brokerv1alpha1.SelectedProvider{
		"provider-2": {State: brokerv1alpha1.ProviderUnavailable},
	})
}

// TestOrchestratedPodsReachVirtualNodes: a consumer's virtual kubelet may
// create, in a namespace the broker orchestrates for it, pods tolerating
// the virtual nodes' taint (the pod webhook adds it, towards the
// providers the consumer enabled); anywhere else, and any other taint,
// the admission policy still refuses, naming the field.
func TestOrchestratedPodsReachVirtualNodes(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Orchestrator: true}})
	ctx := t.Context()
	const consumer = "consumer-1"
	origin := map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer}
	orchestrated := map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer, brokerv1alpha1.OrchestratedLabel: brokerv1alpha1.OrchestratedValue}
	w.create(t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain", Labels: origin}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "orchestrated", Labels: orchestrated}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "plain", Name: "default"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "orchestrated", Name: "default"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pod-writer"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"},
		}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "vk-pod-writer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "pod-writer"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "liqo-virtual-kubelet-" + consumer}}},
	)
	cfg := rest.CopyConfig(w.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "liqo-virtual-kubelet-" + consumer}
	vk, err := client.New(cfg, client.Options{Scheme: w.c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	pod := func(ns, taint string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "p-", Labels: origin},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}, Tolerations: []corev1.Toleration{
				{Key: taint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			}},
		}
	}
	// The policies take effect a moment after they are made (longer on a
	// loaded machine).
	envtest.Eventually(t, time.Minute, func(context.Context) error {
		err := vk.Create(ctx, pod("plain", offloadingv1alpha1.VirtualNodeTaint), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "spec.tolerations") {
			return fmt.Errorf("a pod tolerating virtual nodes in a namespace not orchestrated: %w, want refused naming spec.tolerations", err)
		}
		return nil
	})
	if err := vk.Create(ctx, pod("orchestrated", offloadingv1alpha1.VirtualNodeTaint), client.DryRunAll); err != nil {
		t.Errorf("a pod tolerating virtual nodes in an orchestrated namespace: %v, want allowed", err)
	}
	if err := vk.Create(ctx, pod("orchestrated", "node-role.kubernetes.io/control-plane"), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "spec.tolerations") {
		t.Errorf("a pod tolerating the control plane in an orchestrated namespace: %v, want refused naming spec.tolerations", err)
	}
}

// TestFirstSelection: a consumer peered with the broker gets an empty
// Selection (nothing offered, its pods wait), which says so; a cluster
// the broker only consumes gets none.
func TestFirstSelection(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Orchestrator: true}})
	ctx := t.Context()
	w.create(t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: discoveryv1alpha1.TenantNamespace("consumer-1")}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: discoveryv1alpha1.TenantNamespace("provider-1")}},
		peered("consumer-1", "milan", false, true), peered("provider-1", "rome", true, false),
	)
	eventually(t, func() error {
		var sel brokerv1alpha1.Selection
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace("consumer-1"), Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(sel.Status.Conditions, broker.ConditionReady); len(sel.Spec.Providers) != 0 || c == nil || c.Reason != broker.ReasonNoProvider {
			return fmt.Errorf("consumer-1's first selection: %+v, want empty and saying no provider is enabled", sel)
		}
		return nil
	})
	var sels brokerv1alpha1.SelectionList
	if err := w.c.List(ctx, &sels); err != nil || len(sels.Items) != 1 {
		t.Errorf("%d selections (%v), want consumer-1's alone", len(sels.Items), err)
	}
	// What liqoctl broker login uses: the consumer's service account,
	// bound to the selection's rights, whose tokens the consumer's own
	// identity may request.
	tenant := discoveryv1alpha1.TenantNamespace("consumer-1")
	eventually(t, func() error {
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: brokerv1alpha1.ConsumerServiceAccount}, &corev1.ServiceAccount{}); err != nil {
			return err
		}
		for name, subject := range map[string]string{brokerv1alpha1.ConsumerServiceAccount: brokerv1alpha1.ConsumerServiceAccount, brokerv1alpha1.LoginClusterRole: "liqo-consumer-consumer-1"} {
			var rb rbacv1.RoleBinding
			if err := w.c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: name}, &rb); err != nil {
				return err
			}
			if rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != name || len(rb.Subjects) != 1 || rb.Subjects[0].Name != subject {
				return fmt.Errorf("RoleBinding %s: %+v %+v", name, rb.RoleRef, rb.Subjects)
			}
		}
		return nil
	})
}

// counter reads a counter of the process's metrics registry by its
// provider and result labels.
func counter(t *testing.T, name, provider, result string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["provider"] == provider && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
