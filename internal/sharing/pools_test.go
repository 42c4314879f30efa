// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package sharing

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
)

const (
	region = "topology.kubernetes.io/region"
	zone   = "topology.kubernetes.io/zone"
	arch   = "kubernetes.io/arch"
)

func labelled(n corev1.Node, labels map[string]string) corev1.Node {
	maps.Copy(n.Labels, labels)
	return n
}

func describePools(pools []sharingv1alpha1.AdvertisementPool) []string {
	out := make([]string, len(pools))
	for i, p := range pools {
		out[i] = fmt.Sprintf("%v absent %v: %s %v", p.Labels, p.Absent, Describe(p.Resources), describeAll(p.LargestPods))
	}
	return out
}

// TestPoolsOn: a broker's providers (its virtual nodes) cut by the
// labels a consumer may choose them by: one pool for each set of values,
// with those values alone (not the other labels its providers happen to
// share, which would change the pool as its providers change) and those
// it lacks, their offer (less what runs there for others) and their
// largest pods; none when they do not differ, and the labels not exposed
// never cut.
func TestPoolsOn(t *testing.T) {
	eu1 := labelled(node("eu1", true, "4", "8Gi", "100"), map[string]string{region: "eu", zone: "eu-a", arch: "amd64"})
	eu2 := labelled(node("eu2", true, "2", "4Gi", "100"), map[string]string{region: "eu", zone: "eu-b", arch: "amd64"})
	us := labelled(node("us", true, "8", "16Gi", "100"), map[string]string{region: "us", arch: "amd64", "example.com/team": "x"})
	bare := node("bare", true, "1", "1Gi", "100")
	real := labelled(node("real", false, "64", "64Gi", "100"), map[string]string{region: "eu"})
	nodes := []corev1.Node{eu1, us, eu2, bare, real}
	pods := []corev1.Pod{
		pod("eu1", "another", "1", "1Gi", corev1.PodRunning),  // another consumer's: counted
		pod("eu2", "consumer", "1", "1Gi", corev1.PodRunning), // this consumer's: not
	}
	providers := IsVirtual

	got := PoolsOn(nodes, pods, "consumer", 100, providers, []string{region})
	want := []sharingv1alpha1.AdvertisementPool{
		{Absent: []string{region}, Resources: list("1", "1Gi"), LargestPods: []corev1.ResourceList{list("1", "1Gi")}},
		{Labels: map[string]string{region: "eu"}, Resources: list("5", "11Gi"), LargestPods: []corev1.ResourceList{list("4", "8Gi")}},
		{Labels: map[string]string{region: "us"}, Resources: list("8", "16Gi"), LargestPods: []corev1.ResourceList{list("8", "16Gi")}},
	}
	for i := range want {
		want[i].Resources[corev1.ResourcePods] = *resourcePods(100)
	}
	want[1].Resources[corev1.ResourcePods] = *resourcePods(199)
	if !samePools(got, want) {
		t.Errorf("pools by region:\n got %v\nwant %v", describePools(got), describePools(want))
	}

	// Held to the resale's share.
	half := PoolsOn(nodes, pods, "consumer", 50, providers, []string{region})
	usHalf := list("4", "8Gi")
	usHalf[corev1.ResourcePods] = *resourcePods(50)
	if len(half) != 3 || !sameLists([]corev1.ResourceList{half[2].Resources}, []corev1.ResourceList{usHalf}) {
		t.Errorf("pools at 50%%: %v", describePools(half))
	}

	// Two keys: eu1 and eu2 part; us lacks a zone.
	two := PoolsOn(nodes, pods, "consumer", 100, providers, []string{zone, region})
	inUS := slices.IndexFunc(two, func(p sharingv1alpha1.AdvertisementPool) bool { return p.Labels[region] == "us" })
	if len(two) != 4 || inUS < 0 || !slices.Equal(two[inUS].Absent, []string{zone}) || len(two[inUS].Labels) != 1 {
		t.Errorf("pools by zone and region: %v, want 4, one in us without a zone", describePools(two))
	}
	// What they offer together is what they all offer.
	if sum, all := SumOfPools(got), SharedOn(nodes, pods, "consumer", 100, providers); !sameLists([]corev1.ResourceList{sum}, []corev1.ResourceList{all}) {
		t.Errorf("the pools offer %s together, their providers %s", Describe(sum), Describe(all))
	}
	// Providers that do not differ in them: no pools (the offer's labels
	// say the values).
	sameArch := PoolsOn(nodes, pods, "consumer", 100, func(n *corev1.Node) bool { return IsVirtual(n) && n.Name != "bare" }, []string{arch})
	if sameArch != nil {
		t.Errorf("providers of one arch: pools %v, want none", describePools(sameArch))
	}
	// A label not exposed never cuts; nor does a key given twice.
	if got := PoolsOn(nodes, pods, "consumer", 100, providers, []string{"example.com/team", "kubernetes.io/hostname"}); got != nil {
		t.Errorf("by labels not exposed: %v, want none", describePools(got))
	}
	if got := PoolsOn(nodes, pods, "consumer", 100, providers, []string{region, region}); len(got) != 3 {
		t.Errorf("region given twice: %v, want 3 pools", describePools(got))
	}
	// Past MaxPools, those offering the most CPU stay.
	var many []corev1.Node
	for i := range MaxPools + 4 {
		many = append(many, labelled(node(fmt.Sprintf("p%d", i), true, fmt.Sprint(i+1), "1Gi", "10"), map[string]string{zone: fmt.Sprintf("z%02d", i)}))
	}
	capped := PoolsOn(many, nil, "consumer", 100, providers, []string{zone})
	if len(capped) != MaxPools {
		t.Fatalf("%d providers in zones of their own: %d pools, want %d", len(many), len(capped), MaxPools)
	}
	for _, p := range capped {
		if cpu := p.Resources[corev1.ResourceCPU]; cpu.Value() <= 4 {
			t.Errorf("pool %v kept, offering %s, over one offering more", p.Labels, cpu.String())
		}
	}
	for i := 1; i < len(capped); i++ {
		if PoolSelector(capped[i-1].Labels, capped[i-1].Absent) >= PoolSelector(capped[i].Labels, capped[i].Absent) {
			t.Errorf("pools not in the order of their labels: %v", describePools(capped))
		}
	}
}

func resourcePods(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.DecimalSI) }

func samePools(a, b []sharingv1alpha1.AdvertisementPool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equalStrings(a[i].Labels, b[i].Labels) || !slices.Equal(a[i].Absent, b[i].Absent) || !sameLists([]corev1.ResourceList{a[i].Resources}, []corev1.ResourceList{b[i].Resources}) ||
			!sameLists(a[i].LargestPods, b[i].LargestPods) {
			return false
		}
	}
	return true
}

// TestPoolsChanged: an offer is written again when its pools differ in
// number, labels, or beyond the threshold in what they offer.
func TestPoolsChanged(t *testing.T) {
	a := []sharingv1alpha1.AdvertisementPool{{Labels: map[string]string{region: "eu"}, Resources: list("10", "10Gi")}}
	for _, tc := range []struct {
		name string
		b    []sharingv1alpha1.AdvertisementPool
		want bool
	}{
		{"same", []sharingv1alpha1.AdvertisementPool{{Labels: map[string]string{region: "eu"}, Resources: list("10", "10Gi")}}, false},
		{"within the threshold", []sharingv1alpha1.AdvertisementPool{{Labels: map[string]string{region: "eu"}, Resources: list("10001m", "10Gi")}}, false},
		{"beyond it", []sharingv1alpha1.AdvertisementPool{{Labels: map[string]string{region: "eu"}, Resources: list("5", "10Gi")}}, true},
		{"other labels", []sharingv1alpha1.AdvertisementPool{{Labels: map[string]string{region: "us"}, Resources: list("10", "10Gi")}}, true},
		{"largest pods", []sharingv1alpha1.AdvertisementPool{{Labels: map[string]string{region: "eu"}, Resources: list("10", "10Gi"), LargestPods: []corev1.ResourceList{list("1", "1Gi")}}}, true},
		{"a label absent", []sharingv1alpha1.AdvertisementPool{{Labels: map[string]string{region: "eu"}, Absent: []string{zone}, Resources: list("10", "10Gi")}}, true},
		{"none", nil, true},
	} {
		if got := poolsChanged(a, tc.b); got != tc.want {
			t.Errorf("%s: changed %v, want %v", tc.name, got, tc.want)
		}
	}
}
