// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package sharing

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// MaxLargestPods bounds an offer's largest pods (the Advertisement's
// schema says the same).
const MaxLargestPods = 256

// LargestOn returns the largest pods the nodes counted can take in one
// piece, for an offer of percent% of them. The cluster's own nodes make
// one entry: the most any one of them has allocatable of each resource,
// held to percent% of them all. A virtual node (a provider behind it, for
// a broker) makes one entry: the most of each resource among those its
// provider offered (its LargestPodsAnnotation), or, without them, its
// allocatable. An
// entry another holds is dropped. They say what can ever fit, not what is
// free now: a pod they refuse could never run, while one that waits for
// room is the scheduler's to hold (the virtual node's allocatable), and
// it wakes it when room comes. Nil when nothing is counted.
func LargestOn(nodes []corev1.Node, counted func(*corev1.Node) bool, percent int32) []corev1.ResourceList {
	var out []corev1.ResourceList
	own, total := corev1.ResourceList{}, corev1.ResourceList{}
	for i := range nodes {
		n := &nodes[i]
		if !counted(n) {
			continue
		}
		if !IsVirtual(n) {
			maxOf(own, n.Status.Allocatable)
			for name, q := range n.Status.Allocatable {
				add(total, name, q)
			}
			continue
		}
		// One entry a provider, whatever it said: a provider stating
		// hundreds would otherwise multiply the work of every offer
		// this broker makes (and, from a broker, its entries merged
		// say at most what its largest provider takes).
		entries, err := ParseLargestPods(n.Annotations)
		if err != nil || len(entries) == 0 {
			entries = []corev1.ResourceList{n.Status.Allocatable}
		}
		one := corev1.ResourceList{}
		for _, e := range entries {
			maxOf(one, e)
		}
		out = append(out, minOf(one, nil)) // never below zero
	}
	if len(own) > 0 {
		share := corev1.ResourceList{}
		for name, q := range total {
			share[name] = scale(name, q, percent)
		}
		out = append(out, minOf(own, share))
	}
	for i := range out {
		delete(out[i], corev1.ResourcePods) // a pod is one pod
	}
	return Undominated(out)
}

// Undominated drops the entries another entry holds (and the empty
// ones), sorts the rest, largest CPU first, and keeps MaxLargestPods.
func Undominated(entries []corev1.ResourceList) []corev1.ResourceList {
	var out []corev1.ResourceList
	for i, e := range entries {
		if len(e) == 0 {
			continue
		}
		held := false
		for j, o := range entries {
			if i == j {
				continue
			}
			// Of two equal entries the first stays.
			if Holds(o, e) && (!Holds(e, o) || j < i) {
				held = true
				break
			}
		}
		if !held {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b corev1.ResourceList) int {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			qa, qb := a[name], b[name]
			if c := qb.Cmp(qa); c != 0 {
				return c
			}
		}
		return strings.Compare(Describe(a), Describe(b))
	})
	if len(out) > MaxLargestPods {
		out = out[:MaxLargestPods]
	}
	return out
}

// Holds says whether a pod requesting requests fits in entry: every
// resource it requests (but pods) is there, as much. A resource entry
// does not name is one its place does not have.
func Holds(entry, requests corev1.ResourceList) bool {
	for name, q := range requests {
		if name == corev1.ResourcePods || q.Sign() <= 0 {
			continue
		}
		have, ok := entry[name]
		if !ok || have.Cmp(q) < 0 {
			return false
		}
	}
	return true
}

// FitsOne says whether requests fit in one of entries; no entries bound
// nothing.
func FitsOne(entries []corev1.ResourceList, requests corev1.ResourceList) bool {
	return len(entries) == 0 || slices.ContainsFunc(entries, func(e corev1.ResourceList) bool { return Holds(e, requests) })
}

// FormatLargestPods is the LargestPodsAnnotation's value for entries
// ("" for none).
func FormatLargestPods(entries []corev1.ResourceList) string {
	if len(entries) == 0 {
		return ""
	}
	b, err := json.Marshal(entries)
	if err != nil {
		return "" // a ResourceList always marshals
	}
	return string(b)
}

// ParseLargestPods reads the LargestPodsAnnotation of annotations: none
// when absent.
func ParseLargestPods(annotations map[string]string) ([]corev1.ResourceList, error) {
	v, ok := annotations[offloadingv1alpha1.LargestPodsAnnotation]
	if !ok || v == "" {
		return nil, nil
	}
	var out []corev1.ResourceList
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", offloadingv1alpha1.LargestPodsAnnotation, err)
	}
	return out, nil
}

// Describe says a resource list as an operator reads it: cpu, memory,
// pods, then the others by name.
func Describe(l corev1.ResourceList) string {
	first := []string{string(corev1.ResourceCPU), string(corev1.ResourceMemory), string(corev1.ResourcePods)}
	var names []string
	for name := range l {
		if !slices.Contains(first, string(name)) {
			names = append(names, string(name))
		}
	}
	slices.Sort(names)
	var parts []string
	for _, name := range append(first, names...) {
		if q, ok := l[corev1.ResourceName(name)]; ok {
			parts = append(parts, name+" "+q.String())
		}
	}
	return strings.Join(parts, ", ")
}

func maxOf(into, l corev1.ResourceList) {
	for name, q := range l {
		if cur, ok := into[name]; !ok || q.Cmp(cur) > 0 {
			into[name] = q.DeepCopy()
		}
	}
}

// minOf is e held to bound: each resource of e, at most bound's (a
// resource bound does not have is kept as it is); never below zero.
func minOf(e, bound corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range e {
		if b, ok := bound[name]; ok && b.Cmp(q) < 0 {
			q = b
		}
		if q.Sign() < 0 {
			q = *resource.NewQuantity(0, q.Format)
		}
		out[name] = q.DeepCopy()
	}
	return out
}
