// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package controllermanager

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

func node(name string, ready bool, labels map[string]string, addrs ...corev1.NodeAddress) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
			Addresses:  addrs,
		},
	}
}

func TestServiceURL(t *testing.T) {
	internal := func(ip string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
	}
	external := func(ip string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip}
	}
	c := fake.NewClientBuilder().WithObjects(
		// Sorted first, but virtual: not a node of this cluster.
		node("a-virtual", true, map[string]string{offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue}, internal("10.0.0.99")),
		node("b-not-ready", false, nil, external("203.0.113.1")),
		node("c-worker", true, nil, internal("192.0.2.3")),
		node("d-worker", true, nil, internal("192.0.2.4"), external("203.0.113.4")),
	).Build()
	svc := func(typ corev1.ServiceType, mutate func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "liqo", Name: "liqo-auth"},
			Spec:       corev1.ServiceSpec{Type: typ, ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 443, NodePort: 30443}}},
		}
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	for _, tc := range []struct {
		name, want string
		svc        *corev1.Service
	}{
		{"cluster IP", "https://10.96.0.10:443", svc(corev1.ServiceTypeClusterIP, nil)},
		// An external address wins over an internal one, on any node.
		{"node port", "https://203.0.113.4:30443", svc(corev1.ServiceTypeNodePort, nil)},
		{"load balancer IP", "https://198.51.100.9:443", svc(corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.9"}}
		})},
		{"load balancer host", "https://lb.example.com:443", svc(corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example.com"}}
		})},
		{"IPv6 cluster IP", "https://[fd00::10]:443", svc(corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.ClusterIP = "fd00::10" })},
	} {
		got, err := serviceURL(t.Context(), c, tc.svc)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	for name, s := range map[string]*corev1.Service{
		"load balancer without address": svc(corev1.ServiceTypeLoadBalancer, nil),
		"node port not allocated":       svc(corev1.ServiceTypeNodePort, func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 0 }),
		"no port":                       svc(corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.Ports = nil }),
		"headless":                      svc(corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }),
	} {
		if got, err := serviceURL(t.Context(), c, s); err == nil {
			t.Errorf("%s: %q, want an error", name, got)
		}
	}
	// Internal addresses when no Ready node has an external one.
	c = fake.NewClientBuilder().WithObjects(node("w", true, nil, internal("192.0.2.7"))).Build()
	if got, err := serviceURL(t.Context(), c, svc(corev1.ServiceTypeNodePort, nil)); err != nil || got != "https://192.0.2.7:30443" {
		t.Errorf("internal address: %q, %v", got, err)
	}
}
