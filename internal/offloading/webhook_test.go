// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

func node(labels map[string]string, virtual bool) *corev1.Node {
	n := &corev1.Node{}
	n.Labels = map[string]string{}
	for k, v := range labels {
		n.Labels[k] = v
	}
	if virtual {
		n.Labels[offloadingv1alpha1.VirtualNodeLabel] = offloadingv1alpha1.VirtualNodeValue
	}
	return n
}

// TestMutatePod checks where a mutated pod may be scheduled, by matching
// its required node affinity against real and virtual nodes.
func TestMutatePod(t *testing.T) {
	zoneA := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}},
	}}}}
	real := node(nil, false)
	virtA, virtB := node(map[string]string{"zone": "a"}, true), node(map[string]string{"zone": "b"}, true)
	tests := []struct {
		name        string
		spec        offloadingv1alpha1.NamespaceOffloadingSpec
		own         *corev1.NodeSelector
		tolerates   bool
		schedulable map[*corev1.Node]bool
	}{
		{"local stays local", offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingLocal}, nil,
			false, map[*corev1.Node]bool{real: true, virtA: true, virtB: true}},
		{"default is local and remote", offloadingv1alpha1.NamespaceOffloadingSpec{}, nil,
			true, map[*corev1.Node]bool{real: true, virtA: true, virtB: true}},
		{"remote only", offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote}, nil,
			true, map[*corev1.Node]bool{real: false, virtA: true, virtB: true}},
		{"remote with a selector", offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote, ClusterSelector: zoneA}, nil,
			true, map[*corev1.Node]bool{real: false, virtA: true, virtB: false}},
		{"local and remote with a selector", offloadingv1alpha1.NamespaceOffloadingSpec{ClusterSelector: zoneA}, nil,
			true, map[*corev1.Node]bool{real: true, virtA: true, virtB: false}},
		{"the pod's own affinity still holds", offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote},
			&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "zone", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a"}},
			}}}},
			true, map[*corev1.Node]bool{real: false, virtA: false, virtB: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{}
			if tt.own != nil {
				pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: tt.own.DeepCopy()}}
			}
			MutatePod(pod, &tt.spec)
			taint := corev1.Taint{Key: offloadingv1alpha1.VirtualNodeTaint, Value: "true", Effect: corev1.TaintEffectNoExecute}
			tolerates := false
			for _, tol := range pod.Spec.Tolerations {
				tolerates = tolerates || tol.ToleratesTaint(klog.Background(), &taint, false)
			}
			if tolerates != tt.tolerates {
				t.Errorf("tolerates the virtual-node taint: %v, want %v", tolerates, tt.tolerates)
			}
			for n, want := range tt.schedulable {
				got := true
				if pod.Spec.Affinity != nil && pod.Spec.Affinity.NodeAffinity != nil && pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
					sel, err := nodeaffinity.NewNodeSelector(pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
					if err != nil {
						t.Fatal(err)
					}
					got = sel.Match(n)
				}
				if got != want {
					t.Errorf("node %v: affinity matches %v, want %v", n.Labels, got, want)
				}
			}
		})
	}
}

func TestRemoteNamespaceName(t *testing.T) {
	id := "5e8a5a66-8ae5-4124-9b70-6a5eefa3bdc3"
	long := strings.Repeat("n", 63)
	tests := []struct {
		local string
		spec  offloadingv1alpha1.NamespaceOffloadingSpec
		want  string
	}{
		{"demo", offloadingv1alpha1.NamespaceOffloadingSpec{}, "demo-5e8a5a66"},
		{"demo", offloadingv1alpha1.NamespaceOffloadingSpec{NamespaceMappingStrategy: offloadingv1alpha1.EnforceSameNameMapping}, "demo"},
		{"demo", offloadingv1alpha1.NamespaceOffloadingSpec{NamespaceMappingStrategy: offloadingv1alpha1.SelectedNameMapping, RemoteNamespaceName: "there"}, "there"},
		{long, offloadingv1alpha1.NamespaceOffloadingSpec{}, long[:54] + "-5e8a5a66"},
	}
	for _, tt := range tests {
		got := RemoteNamespaceName(tt.local, id, &tt.spec)
		if got != tt.want || len(got) > 63 {
			t.Errorf("RemoteNamespaceName(%q, %+v) = %q, want %q", tt.local, tt.spec, got, tt.want)
		}
	}
}

// TestRestrictToProviders: in a namespace a broker orchestrates, a pod
// may land only on the virtual nodes of the consumer's enabled providers,
// on none when there is none, and never where its own affinity forbids.
func TestRestrictToProviders(t *testing.T) {
	provider := func(id string) *corev1.Node {
		return node(map[string]string{offloadingv1alpha1.RemoteClusterLabel: id}, true)
	}
	p1, p2, p3 := provider("p1"), provider("p2"), provider("p3")
	// As the orchestrator keeps it: enabled and draining providers.
	spec := offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote,
		ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"p1", "p2"}},
		}}}}}
	for _, tc := range []struct {
		name        string
		providers   []string
		own         []string
		schedulable map[*corev1.Node]bool
	}{
		{"the enabled provider, not the draining one", []string{"p2"}, nil, map[*corev1.Node]bool{p1: false, p2: true, p3: false}},
		{"none enabled", nil, nil, map[*corev1.Node]bool{p1: false, p2: false, p3: false}},
		{"not beyond the namespace's selector", []string{"p3"}, nil, map[*corev1.Node]bool{p1: false, p2: false, p3: false}},
		{"not where the pod refuses to go", []string{"p1", "p2"}, []string{"p1"}, map[*corev1.Node]bool{p1: true, p2: false, p3: false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{}
			if tc.own != nil {
				pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: tc.own},
					}}}}}}
			}
			MutatePod(pod, &spec)
			RestrictToProviders(pod, tc.providers)
			sel, err := nodeaffinity.NewNodeSelector(pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
			if err != nil {
				t.Fatal(err)
			}
			for n, want := range tc.schedulable {
				if got := sel.Match(n); got != want {
					t.Errorf("provider %s: affinity matches %v, want %v", n.Labels[offloadingv1alpha1.RemoteClusterLabel], got, want)
				}
			}
		})
	}
}

// TestOrchestrated: only a namespace the broker marked is orchestrated,
// to the providers its annotation lists.
func TestOrchestrated(t *testing.T) {
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        []string
		ok          bool
	}{
		{"unmarked", nil, map[string]string{brokerv1alpha1.ProvidersAnnotation: "p1"}, nil, false},
		{"marked, two providers", map[string]string{brokerv1alpha1.OrchestratedLabel: brokerv1alpha1.OrchestratedValue},
			map[string]string{brokerv1alpha1.ProvidersAnnotation: "p1,p2"}, []string{"p1", "p2"}, true},
		{"marked, none", map[string]string{brokerv1alpha1.OrchestratedLabel: brokerv1alpha1.OrchestratedValue}, nil, nil, true},
	} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.annotations}}
		got, ok := Orchestrated(ns)
		if ok != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
