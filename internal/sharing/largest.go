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

// LargestOn returns the largest pods the nodes counted can take, for an
// offer of offered: what a pod must fit in whole. The cluster's own
// nodes make one entry, the most any one of them has free of each
// resource; a virtual node (a provider behind it, for a broker) makes
// the entries its provider offered (its LargestPodsAnnotation), each
// held to what is free on the node, or, without them, one entry of what
// is free on it. Every entry is held to offered, and an entry another
// holds is dropped. Every pod on a node counts, the consumer's too: a new
// pod needs room that is free now. Nil when nothing is counted.
func LargestOn(nodes []corev1.Node, pods []corev1.Pod, counted func(*corev1.Node) bool, offered corev1.ResourceList) []corev1.ResourceList {
	free := map[string]corev1.ResourceList{}
	for i := range nodes {
		if counted(&nodes[i]) {
			free[nodes[i].Name] = nodes[i].Status.Allocatable.DeepCopy()
		}
	}
	for i := range pods {
		p := &pods[i]
		f, ok := free[p.Spec.NodeName]
		if !ok || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for name, q := range PodRequests(p) {
			sub(f, name, q)
		}
	}
	var out []corev1.ResourceList
	own := corev1.ResourceList{}
	for i := range nodes {
		n := &nodes[i]
		f, ok := free[n.Name]
		if !ok {
			continue
		}
		if !IsVirtual(n) {
			maxOf(own, f)
			continue
		}
		entries, err := ParseLargestPods(n.Annotations)
		if err != nil || len(entries) == 0 {
			entries = []corev1.ResourceList{f}
		}
		for _, e := range entries {
			out = append(out, minOf(e, f))
		}
	}
	if len(own) > 0 {
		out = append(out, own)
	}
	for i := range out {
		out[i] = minOf(out[i], offered)
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
