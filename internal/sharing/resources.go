// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package sharing runs both ends of resource sharing: the provider's
// Broadcaster, which offers a share of its free resources to each consumer
// in an Advertisement, and the consumer's Advertisement operator, which
// accepts or refuses each offer by policy.
package sharing

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// IsVirtual reports whether node is a Liqo virtual node.
func IsVirtual(node *corev1.Node) bool { return offloadingv1alpha1.IsVirtualNode(node.Labels) }

// Shared computes what this cluster offers consumer: percent% of the
// allocatable resources of its real nodes, minus what the pods on them
// request. Virtual nodes (resources borrowed from elsewhere) never count,
// and neither do the requests of pods run for consumer itself: two
// clusters that peer both ways do not offer each other their own
// resources back, and a consumer's offloaded pods do not shrink its offer.
func Shared(nodes []corev1.Node, pods []corev1.Pod, consumerID string, percent int32) corev1.ResourceList {
	return SharedOn(nodes, pods, consumerID, percent, RealNode)
}

// RealNode says whether node is one of this cluster's own.
func RealNode(node *corev1.Node) bool { return !IsVirtual(node) }

// OnProviders counts the virtual nodes of providers only: what a broker
// orchestrating a consumer's pods offers it is what the providers that
// consumer enabled offer the broker.
func OnProviders(providers []string) func(*corev1.Node) bool {
	return func(node *corev1.Node) bool {
		return IsVirtual(node) && slices.Contains(providers, node.Labels[offloadingv1alpha1.RemoteClusterLabel])
	}
}

// SharedOn is Shared over the nodes counted says, real or virtual.
func SharedOn(nodes []corev1.Node, pods []corev1.Pod, consumerID string, percent int32, counted func(*corev1.Node) bool) corev1.ResourceList {
	free := corev1.ResourceList{}
	real := map[string]bool{}
	for i := range nodes {
		if !counted(&nodes[i]) {
			continue
		}
		real[nodes[i].Name] = true
		for name, q := range nodes[i].Status.Allocatable {
			add(free, name, q)
		}
	}
	for i := range pods {
		p := &pods[i]
		if !real[p.Spec.NodeName] || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed ||
			(consumerID != "" && p.Labels[offloadingv1alpha1.OriginClusterLabel] == consumerID) {
			continue
		}
		for name, q := range PodRequests(p) {
			sub(free, name, q)
		}
		sub(free, corev1.ResourcePods, *resource.NewQuantity(1, resource.DecimalSI))
	}
	out := corev1.ResourceList{}
	for name, q := range free {
		if q.Sign() <= 0 {
			out[name] = *resource.NewQuantity(0, q.Format)
			continue
		}
		out[name] = scale(name, q, percent)
	}
	return out
}

// PodRequests returns a pod's effective requests: the larger of the sum
// of its containers' and each init container's, plus its overhead.
func PodRequests(p *corev1.Pod) corev1.ResourceList {
	reqs := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		for name, q := range c.Resources.Requests {
			add(reqs, name, q)
		}
	}
	for _, c := range p.Spec.InitContainers {
		for name, q := range c.Resources.Requests {
			if cur, ok := reqs[name]; !ok || q.Cmp(cur) > 0 {
				reqs[name] = q.DeepCopy()
			}
		}
	}
	for name, q := range p.Spec.Overhead {
		add(reqs, name, q)
	}
	return reqs
}

func add(l corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	cur := l[name]
	cur.Add(q)
	l[name] = cur
}

func sub(l corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	cur, ok := l[name]
	if !ok {
		return // nothing of that resource on the real nodes
	}
	cur.Sub(q)
	l[name] = cur
}

// scale returns percent% of q, rounded down: to milli-units for CPU, to
// whole units for everything else (bytes, pods, devices).
func scale(name corev1.ResourceName, q resource.Quantity, percent int32) resource.Quantity {
	if name == corev1.ResourceCPU {
		return *resource.NewMilliQuantity(q.MilliValue()*int64(percent)/100, q.Format)
	}
	return *resource.NewQuantity(q.Value()*int64(percent)/100, q.Format)
}

// ChangedBeyond reports whether any resource of b differs from a by more
// than percent% of a's value (a resource that appears or disappears always
// counts).
func ChangedBeyond(a, b corev1.ResourceList, percent int64) bool {
	if len(a) != len(b) {
		return true
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok {
			return true
		}
		va, vb := qa.MilliValue(), qb.MilliValue()
		diff := va - vb
		if diff < 0 {
			diff = -diff
		}
		if va == 0 {
			if vb != 0 {
				return true
			}
			continue
		}
		if diff*100 > va*percent {
			return true
		}
	}
	return false
}
