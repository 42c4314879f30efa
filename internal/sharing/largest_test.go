// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package sharing

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

func list(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

func sameLists(a, b []corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for i, want := range b {
		got := a[i]
		if len(got) != len(want) {
			return false
		}
		for name, q := range want {
			if have, ok := got[name]; !ok || have.Cmp(q) != 0 {
				return false
			}
		}
	}
	return true
}

func describeAll(l []corev1.ResourceList) []string {
	out := make([]string, len(l))
	for i := range l {
		out[i] = Describe(l[i])
	}
	return out
}

// TestLargestOnOwnNodes: a cluster's nodes make one entry, the most any
// one node has allocatable of each resource, held to the offer's share of
// them all; what runs there does not count (the scheduler holds a pod
// that waits for room; this bounds what could ever fit).
func TestLargestOnOwnNodes(t *testing.T) {
	nodes := []corev1.Node{
		node("a", false, "4", "8Gi", "110"),
		node("b", false, "8", "4Gi", "110"),
		node("virtual", true, "100", "1Ti", "1000"),
	}
	got := LargestOn(nodes, RealNode, 100)
	if want := []corev1.ResourceList{list("8", "8Gi")}; !sameLists(got, want) {
		t.Errorf("largest %v, want %v", describeAll(got), describeAll(want))
	}
	// Held to the share: 50% of 12 cpu is less than a node's 8.
	got = LargestOn(nodes, RealNode, 50)
	if want := []corev1.ResourceList{list("6", "6Gi")}; !sameLists(got, want) {
		t.Errorf("held to the share: %v, want %v", describeAll(got), describeAll(want))
	}
	if got := LargestOn(nil, RealNode, 100); got != nil {
		t.Errorf("no node: %v, want none", describeAll(got))
	}
}

// TestLargestOnProviders: a broker's virtual node makes one entry, the
// most its provider offered of each resource, or its allocatable; an
// entry another holds goes.
func TestLargestOnProviders(t *testing.T) {
	p1 := node("p1", true, "10", "20Gi", "100")
	p1.Annotations = map[string]string{offloadingv1alpha1.LargestPodsAnnotation: FormatLargestPods([]corev1.ResourceList{list("2", "16Gi")})}
	p2 := node("p2", true, "6", "6Gi", "100")
	p2.Annotations = map[string]string{offloadingv1alpha1.LargestPodsAnnotation: FormatLargestPods([]corev1.ResourceList{list("6", "2Gi")})}
	p3 := node("p3", true, "2", "1Gi", "100") // no bound said: its allocatable is one piece
	small := node("small", true, "1", "1Gi", "100")
	small.Annotations = map[string]string{offloadingv1alpha1.LargestPodsAnnotation: FormatLargestPods([]corev1.ResourceList{list("1", "512Mi")})}
	nodes := []corev1.Node{p1, p2, p3, small}
	if got := LargestOn(nodes, OnProviders([]string{"x"}), 100); len(got) != 0 {
		t.Errorf("no provider counted: %v", describeAll(got))
	}
	// A provider stating many entries makes one all the same.
	many := node("many", true, "4", "4Gi", "100")
	var said []corev1.ResourceList
	for i := range MaxLargestPods {
		said = append(said, list(fmt.Sprintf("%dm", i+1), fmt.Sprintf("%dMi", MaxLargestPods-i)))
	}
	many.Annotations = map[string]string{offloadingv1alpha1.LargestPodsAnnotation: FormatLargestPods(said)}
	if got, want := LargestOn([]corev1.Node{many}, func(*corev1.Node) bool { return true }, 100), []corev1.ResourceList{list("256m", "256Mi")}; !sameLists(got, want) {
		t.Errorf("a provider stating %d entries: %v, want its one largest %v", len(said), describeAll(got), describeAll(want))
	}
	counted := func(*corev1.Node) bool { return true }
	got := LargestOn(nodes, counted, 50)
	// small is held by p1's and p3's: gone. Sorted, largest cpu first;
	// a provider's piece is not cut by the share.
	want := []corev1.ResourceList{list("6", "2Gi"), list("2", "16Gi")}
	if !sameLists(got, want) {
		t.Errorf("largest %v, want %v", describeAll(got), describeAll(want))
	}
}

func TestFitsOne(t *testing.T) {
	entries := []corev1.ResourceList{list("6", "2Gi"), list("2", "16Gi")}
	gpu := list("1", "1Gi")
	gpu["nvidia.com/gpu"] = resource.MustParse("1")
	for _, tc := range []struct {
		name     string
		requests corev1.ResourceList
		fits     bool
	}{
		{"in the first", list("5", "1Gi"), true},
		{"in the second", list("1", "10Gi"), true},
		{"each resource somewhere, both nowhere", list("5", "10Gi"), false},
		{"more cpu than any", list("7", "1Gi"), false},
		{"a resource none has", gpu, false},
		{"no requests", corev1.ResourceList{}, true},
		{"pods are not a bound", corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1000")}, true},
	} {
		if got := FitsOne(entries, tc.requests); got != tc.fits {
			t.Errorf("%s: fits %v, want %v", tc.name, got, tc.fits)
		}
	}
	if !FitsOne(nil, list("1000", "1Ti")) {
		t.Error("no entries bound nothing")
	}
}

func TestLargestPodsAnnotation(t *testing.T) {
	in := []corev1.ResourceList{list("6", "2Gi"), list("2", "16Gi")}
	got, err := ParseLargestPods(map[string]string{offloadingv1alpha1.LargestPodsAnnotation: FormatLargestPods(in)})
	if err != nil || !sameLists(got, in) {
		t.Errorf("round trip: %v, %v", describeAll(got), err)
	}
	if got, err := ParseLargestPods(nil); got != nil || err != nil {
		t.Errorf("absent: %v, %v", got, err)
	}
	if _, err := ParseLargestPods(map[string]string{offloadingv1alpha1.LargestPodsAnnotation: "{"}); err == nil {
		t.Error("a broken value is an error")
	}
	if FormatLargestPods(nil) != "" {
		t.Error("none is no value")
	}
}
