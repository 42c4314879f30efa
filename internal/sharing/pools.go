// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package sharing

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
)

// MaxPools bounds an offer's pools (the Advertisement's schema says the
// same).
const MaxPools = 16

// PoolsOn cuts the offer of the nodes counted by the values of keys
// (among the exposed labels; the others are ignored): one pool for each
// set of values the nodes have, with those values (Labels) and the keys
// its nodes lack (Absent), not whatever else they share, so that a pool
// stays the same as its nodes come and go; what they offer (SharedOn)
// and the largest pods they take (LargestOn). Nil when the nodes do not
// differ in them. Past MaxPools, those offering the most CPU are kept.
func PoolsOn(nodes []corev1.Node, pods []corev1.Pod, consumerID string, percent int32, counted func(*corev1.Node) bool, keys []string) []sharingv1alpha1.AdvertisementPool {
	keys = slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return !Exposed(k) })
	if len(keys) == 0 {
		return nil
	}
	// Each counted node's pool, once: this runs after every burst of pod
	// changes.
	poolOf := map[string]string{}
	var order []string
	firstOf := map[string]*corev1.Node{}
	for i := range nodes {
		n := &nodes[i]
		if !counted(n) {
			continue
		}
		var b strings.Builder
		for _, k := range keys {
			// Absent and empty differ: \x00 never is in a label value.
			if v, ok := n.Labels[k]; ok {
				b.WriteString(v)
			} else {
				b.WriteByte(0)
			}
			b.WriteByte('\n')
		}
		key := b.String()
		poolOf[n.Name] = key
		if _, seen := firstOf[key]; !seen {
			firstOf[key] = n
			order = append(order, key)
		}
	}
	if len(order) < 2 {
		return nil
	}
	out := make([]sharingv1alpha1.AdvertisementPool, 0, len(order))
	for _, key := range order {
		in := func(n *corev1.Node) bool { k, ok := poolOf[n.Name]; return ok && k == key }
		first := firstOf[key]
		p := sharingv1alpha1.AdvertisementPool{
			Resources:   SharedOn(nodes, pods, consumerID, percent, in),
			LargestPods: LargestOn(nodes, in, percent),
		}
		for _, k := range keys {
			if v, ok := first.Labels[k]; ok {
				if p.Labels == nil {
					p.Labels = map[string]string{}
				}
				p.Labels[k] = v
			} else if !slices.Contains(p.Absent, k) {
				p.Absent = append(p.Absent, k)
			}
		}
		slices.Sort(p.Absent)
		out = append(out, p)
	}
	slices.SortStableFunc(out, func(a, b sharingv1alpha1.AdvertisementPool) int {
		ca, cb := a.Resources[corev1.ResourceCPU], b.Resources[corev1.ResourceCPU]
		return cb.Cmp(ca)
	})
	out = out[:min(len(out), MaxPools)]
	// In a stable order, whatever each offers: by their labels.
	slices.SortFunc(out, func(a, b sharingv1alpha1.AdvertisementPool) int {
		return cmp.Compare(PoolSelector(a.Labels, a.Absent), PoolSelector(b.Labels, b.Absent))
	})
	return out
}

// PoolSelector is a pool as a label selector (labels.Parse reads it):
// key=value for each of its labels and !key for each absent one, sorted;
// the same for the same pool.
func PoolSelector(labels map[string]string, absent []string) string {
	var terms []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		terms = append(terms, k+"="+labels[k])
	}
	for _, k := range absent {
		if _, ok := labels[k]; !ok {
			terms = append(terms, "!"+k)
		}
	}
	slices.Sort(terms)
	return strings.Join(slices.Compact(terms), ",")
}

// SumOfPools is what pools offer together.
func SumOfPools(pools []sharingv1alpha1.AdvertisementPool) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, p := range pools {
		for name, q := range p.Resources {
			add(out, name, q)
		}
	}
	return out
}

// poolsChanged says whether two offers' pools differ beyond what a
// refresh waits for: in number, labels, or any pool's resources or
// largest pods beyond the threshold.
func poolsChanged(a, b []sharingv1alpha1.AdvertisementPool) bool {
	if len(a) != len(b) {
		return true
	}
	for i := range a {
		if !equalStrings(a[i].Labels, b[i].Labels) || !slices.Equal(a[i].Absent, b[i].Absent) || ChangedBeyond(a[i].Resources, b[i].Resources, ChangeThreshold) ||
			largestChanged(a[i].LargestPods, b[i].LargestPods) {
			return true
		}
	}
	return false
}
