// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package sharing

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

func node(name string, virtual bool, cpu, mem, pods string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if virtual {
		n.Labels[offloadingv1alpha1.VirtualNodeLabel] = offloadingv1alpha1.VirtualNodeValue
	}
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse(pods),
	}
	return n
}

func pod(nodeName, origin, cpu, mem string, phase corev1.PodPhase) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}, Spec: corev1.PodSpec{NodeName: nodeName,
		Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
		Status: corev1.PodStatus{Phase: phase}}
	if origin != "" {
		p.Labels[offloadingv1alpha1.OriginClusterLabel] = origin
	}
	return p
}

func TestShared(t *testing.T) {
	nodes := []corev1.Node{
		node("a", false, "4", "8Gi", "110"),
		node("b", false, "4", "8Gi", "110"),
		node("virtual", true, "100", "1Ti", "1000"), // borrowed: never offered again
	}
	pods := []corev1.Pod{
		pod("a", "", "1", "2Gi", corev1.PodRunning),
		pod("b", "", "500m", "1Gi", corev1.PodPending),
		pod("a", "", "3", "4Gi", corev1.PodSucceeded),           // finished: frees its requests
		pod("virtual", "", "50", "100Gi", corev1.PodRunning),    // not on a real node
		pod("b", "consumer", "2", "2Gi", corev1.PodRunning),     // run for the consumer: not subtracted from its offer
		pod("b", "someone-else", "1", "1Gi", corev1.PodRunning), // run for another consumer: subtracted
	}
	got := Shared(nodes, pods, "consumer", 50)
	want := map[corev1.ResourceName]string{
		corev1.ResourceCPU:    "2750m", // (8 - 1 - 0.5 - 1) / 2
		corev1.ResourceMemory: "6Gi",   // (16 - 2 - 1 - 1) / 2
		corev1.ResourcePods:   "108",   // (220 - 3) / 2, rounded down
	}
	for name, w := range want {
		q := got[name]
		if q.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("%s = %s, want %s", name, q.String(), w)
		}
	}
	if _, ok := got["example.com/gpu"]; ok {
		t.Error("a resource no real node has appeared")
	}
	// Oversubscribed: never negative.
	over := Shared(nodes[:1], []corev1.Pod{pod("a", "", "10", "1Gi", corev1.PodRunning)}, "", 100)
	if q := over[corev1.ResourceCPU]; q.Sign() != 0 {
		t.Errorf("oversubscribed CPU offered as %s, want 0", q.String())
	}
}

// TestSharedOnProviders: a broker offers a consumer it orchestrates what
// the providers that consumer enabled offer the broker (their virtual
// nodes), less what runs there for others, never its own nodes or other
// providers.
func TestSharedOnProviders(t *testing.T) {
	provider := func(name, id, cpu string) corev1.Node {
		n := node(name, true, cpu, "16Gi", "100")
		n.Labels[offloadingv1alpha1.RemoteClusterLabel] = id
		return n
	}
	nodes := []corev1.Node{
		node("own", false, "64", "256Gi", "110"),
		provider("liqo-rome", "rome", "8"), provider("liqo-paris", "paris", "4"), provider("liqo-berlin", "berlin", "32"),
	}
	pods := []corev1.Pod{
		pod("liqo-rome", "consumer", "2", "2Gi", corev1.PodRunning), // the consumer's own: not subtracted
		pod("liqo-paris", "other", "1", "4Gi", corev1.PodRunning),   // another consumer's: subtracted
		pod("own", "", "10", "10Gi", corev1.PodRunning),             // on the broker's node: not counted at all
	}
	got := SharedOn(nodes, pods, "consumer", 100, OnProviders([]string{"rome", "paris"}))
	for name, w := range map[corev1.ResourceName]string{corev1.ResourceCPU: "11", corev1.ResourceMemory: "28Gi", corev1.ResourcePods: "199"} {
		if q := got[name]; q.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("%s = %s, want %s", name, q.String(), w)
		}
	}
	if none := SharedOn(nodes, pods, "consumer", 100, OnProviders(nil)); len(none) != 0 {
		t.Errorf("no provider enabled: offered %v, want nothing", none)
	}
}

func TestChangedBeyond(t *testing.T) {
	base := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10"), corev1.ResourcePods: resource.MustParse("100")}
	tests := []struct {
		name string
		b    corev1.ResourceList
		want bool
	}{
		{"same", base.DeepCopy(), false},
		{"within 5%", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10400m"), corev1.ResourcePods: resource.MustParse("96")}, false},
		{"beyond 5%", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("9"), corev1.ResourcePods: resource.MustParse("100")}, true},
		{"a resource added", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10"), corev1.ResourcePods: resource.MustParse("100"), "x": resource.MustParse("1")}, true},
	}
	for _, tc := range tests {
		if got := ChangedBeyond(base, tc.b, 5); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
