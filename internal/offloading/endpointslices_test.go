// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestPrunerRemovesWhatNoLongerHolds: a consumer's slice that names what
// it may not goes at once; one that named one of its pods when written
// stays while the pod terminates and goes when it ended, and one that
// named its range goes when the network agreed with it changes; what it
// may still name stays, and so does every slice that is not a
// consumer's: this cluster's EndpointSlice controller's for a Service's
// copy (which carries the copy's labels, the origin among them), one in
// a namespace of this cluster's.
func TestPrunerRemovesWhatNoLongerHolds(t *testing.T) {
	cfg, c := envtest.StartInstalled(t, "provider")
	ctx := t.Context()
	const consumer = "consumer-1"
	theirs := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web-consumer-1", Labels: map[string]string{
		offloadingv1alpha1.OriginClusterLabel: consumer, discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue,
	}}}
	ours := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ours"}}
	tep := &netv1alpha1.TunnelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: consumer}, Spec: netv1alpha1.TunnelEndpointSpec{
		ClusterID: consumer, PublicKey: "oAbTYJ0vnh3WsCrDOmmTVhXnyfBmWTQjJ1qSjTWoTHk=",
		Remote:       netv1alpha1.Ranges{PodCIDR: "10.100.0.0/16", ExternalCIDR: "10.70.0.0/16"},
		RemoteSeenAs: netv1alpha1.Ranges{PodCIDR: "10.60.0.0/16", ExternalCIDR: "10.61.0.0/16"},
	}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: theirs.Name, Name: "web", Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer},
			// Held while it terminates: no kubelet here.
			Finalizers: []string{"test.liqo.io/hold"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	// No controller manager runs here to make the namespace's service
	// account.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: theirs.Name, Name: "default"}}
	for _, o := range []client.Object{theirs, ours, tep, sa, pod} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T: %v", o, err)
		}
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.201.0.5", PodIPs: []corev1.PodIP{{IP: "10.201.0.5"}}}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	slice := func(ns, name, addr string, labels map[string]string) *discoveryv1.EndpointSlice {
		labels[discoveryv1.LabelServiceName] = "db"
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
		}
	}
	origin := func() map[string]string {
		return map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer, discoveryv1.LabelManagedBy: offloadingv1alpha1.EndpointSliceManagedBy}
	}
	bad := slice(theirs.Name, "bad", "10.9.9.9", origin())
	toPod := slice(theirs.Name, "to-pod", "10.201.0.5", origin())
	toRange := slice(theirs.Name, "to-range", "10.60.3.4", origin())
	// This cluster's own slices, naming what no consumer may: never the
	// pruner's.
	own := slice(theirs.Name, "own", "10.9.9.9", map[string]string{
		offloadingv1alpha1.OriginClusterLabel: consumer, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
	})
	elsewhere := slice(ours.Name, "elsewhere", "10.9.9.9", origin())
	for _, o := range []client.Object{bad, toPod, toRange, own, elsewhere} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
	envtest.StartManager(t, cfg, func(mgr ctrl.Manager) error {
		return (&EndpointSlicePruner{Client: mgr.GetClient(), Live: c}).SetupWithManager(mgr)
	})
	gone := func(es *discoveryv1.EndpointSlice, why string) {
		t.Helper()
		envtest.Eventually(t, 20*time.Second, func(ctx context.Context) error {
			switch err := c.Get(ctx, client.ObjectKeyFromObject(es), &discoveryv1.EndpointSlice{}); {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return err
			}
			return fmt.Errorf("slice %s still there %s", es.Name, why)
		})
	}
	stay := func(why string, es ...*discoveryv1.EndpointSlice) {
		t.Helper()
		envtest.Consistently(t, 2*time.Second, func(ctx context.Context) error {
			for _, s := range es {
				if err := c.Get(ctx, client.ObjectKeyFromObject(s), &discoveryv1.EndpointSlice{}); err != nil {
					return fmt.Errorf("slice %s/%s %s: %w", s.Namespace, s.Name, why, err)
				}
			}
			return nil
		})
	}
	// The pruner checks the namespace at its start.
	gone(bad, "naming what the consumer may not")
	stay("went while what it names is allowed", toPod, toRange, own, elsewhere)

	// Terminating, the pod keeps its address: the namespace is checked
	// (the consumer's range changes) and the slice naming it stays.
	if err := c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil || pod.DeletionTimestamp.IsZero() {
		t.Fatalf("the pod: %v, deleting since %v; want it terminating", err, pod.DeletionTimestamp)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(tep), tep); err != nil {
		t.Fatal(err)
	}
	tep.Spec.RemoteSeenAs.PodCIDR = "10.62.0.0/16"
	if err := c.Update(ctx, tep); err != nil {
		t.Fatal(err)
	}
	gone(toRange, "after the consumer's range changed")
	stay("went while the pod it names terminates", toPod)

	// Ended, it frees its address.
	pod.Status.Phase = corev1.PodSucceeded
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	gone(toPod, "after the pod it names ended")
	stay("went, not the consumer's", own, elsewhere)
}

// TestAllowedShrank: the pruner wakes for a pod update only when what a
// consumer's slice may name got smaller (the pod ended or lost an
// address), not when a pod starts or gets its first address.
func TestAllowedShrank(t *testing.T) {
	pod := func(phase corev1.PodPhase, ips ...string) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
		if len(ips) > 0 {
			p.Status.PodIP = ips[0]
		}
		for _, ip := range ips {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
		}
		return p
	}
	for _, tc := range []struct {
		name   string
		o, n   *corev1.Pod
		shrank bool
	}{
		{"scheduled, no address yet", pod(corev1.PodPending), pod(corev1.PodPending), false},
		{"its first address", pod(corev1.PodPending), pod(corev1.PodRunning, "10.0.0.5"), false},
		{"running, unchanged", pod(corev1.PodRunning, "10.0.0.5"), pod(corev1.PodRunning, "10.0.0.5"), false},
		{"a second address added", pod(corev1.PodRunning, "10.0.0.5"), pod(corev1.PodRunning, "10.0.0.5", "fd00::5"), false},
		{"its address changed", pod(corev1.PodRunning, "10.0.0.5"), pod(corev1.PodRunning, "10.0.0.6"), true},
		{"its address gone", pod(corev1.PodRunning, "10.0.0.5"), pod(corev1.PodRunning), true},
		{"one of two addresses gone", pod(corev1.PodRunning, "10.0.0.5", "fd00::5"), pod(corev1.PodRunning, "10.0.0.5"), true},
		{"succeeded", pod(corev1.PodRunning, "10.0.0.5"), pod(corev1.PodSucceeded, "10.0.0.5"), true},
		{"failed", pod(corev1.PodRunning, "10.0.0.5"), pod(corev1.PodFailed, "10.0.0.5"), true},
		{"already ended", pod(corev1.PodFailed, "10.0.0.5"), pod(corev1.PodFailed, "10.0.0.5"), false},
	} {
		if got := allowedShrank(tc.o, tc.n); got != tc.shrank {
			t.Errorf("%s: allowedShrank = %v, want %v", tc.name, got, tc.shrank)
		}
	}
}
