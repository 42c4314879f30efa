// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/offloading/dnsproxy"
)

// +kubebuilder:rbac:groups="",namespace=liqo,resources=services,verbs=get;list;watch;create;update;patch;delete

// DNSProxy says that the provider runs the DNS proxy (the chart's
// dnsProxy, internal/offloading/dnsproxy): each consumer gets a Service
// of its own in Namespace, on a target port of its own, where its pods
// ask for names with its namespace names.
type DNSProxy struct {
	// Namespace is Liqo's namespace, where the proxy runs.
	Namespace string
	// Domain is the cluster's DNS domain; cluster.local when empty.
	Domain string
}

// DNSProxyComponent is the app.kubernetes.io/component label of the DNS
// proxy's pods (the chart's), which the consumers' DNS Services select.
const DNSProxyComponent = "dns-proxy"

// firstDNSPort is the proxy's port for the first consumer; each other
// takes the next free one.
const firstDNSPort = 10053

// DNSServiceName is the name of consumer's DNS Service.
func DNSServiceName(consumer string) string { return "liqo-dns-" + consumer }

// ensureDNS makes consumer's DNS Service (or deletes it when the
// consumer is gone) and says where its pods ask: nil until the Service
// has an address.
func (d *DNSProxy) ensureDNS(ctx context.Context, c client.Client, consumer string, gone bool) (*offloadingv1alpha1.ConsumerDNS, error) {
	name := DNSServiceName(consumer)
	if gone {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: name}}
		return nil, client.IgnoreNotFound(c.Delete(ctx, svc))
	}
	var all corev1.ServiceList
	if err := c.List(ctx, &all, client.InNamespace(d.Namespace), client.HasLabels{offloadingv1alpha1.DNSServiceLabel}); err != nil {
		return nil, err
	}
	var own *corev1.Service
	taken := map[int32]bool{} // the target ports of every other Service
	for i := range all.Items {
		s := &all.Items[i]
		switch {
		case s.Name == name:
			own = s
		case len(s.Spec.Ports) > 0:
			taken[s.Spec.Ports[0].TargetPort.IntVal] = true
		}
	}
	if own == nil {
		// Its label gone (removed by hand): found by name, labelled again.
		var svc corev1.Service
		err := c.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: name}, &svc)
		switch {
		case err == nil:
			own = &svc
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	// Its port is kept while the proxy serves it for this consumer (by
	// the proxy's own rule: the first Service by name that asks for a
	// port has it); otherwise the first no other Service asks for.
	port := int32(0)
	if own != nil && len(own.Spec.Ports) > 0 {
		p := own.Spec.Ports[0].TargetPort.IntVal
		if owners := dnsproxy.PortOwners(all.Items, nil); p >= firstDNSPort && owners[p] == consumer && own.Labels[offloadingv1alpha1.OriginClusterLabel] == consumer {
			port = p
		}
	}
	for p := int32(firstDNSPort); port == 0; p++ {
		if !taken[p] {
			port = p
		}
	}
	want := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: name}}
	if own != nil {
		want = own.DeepCopy()
	}
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	want.Labels[offloadingv1alpha1.DNSServiceLabel] = ""
	want.Labels[offloadingv1alpha1.OriginClusterLabel] = consumer
	want.Spec.Selector = map[string]string{"app.kubernetes.io/name": "liqo", "app.kubernetes.io/component": DNSProxyComponent}
	want.Spec.Ports = []corev1.ServicePort{
		{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(port)},
		{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(port)},
	}
	switch {
	case own == nil:
		if err := c.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating the DNS Service of %s: %w", consumer, err)
		}
	case !equalServices(own, want):
		if err := c.Update(ctx, want); err != nil {
			return nil, fmt.Errorf("updating the DNS Service of %s: %w", consumer, err)
		}
	}
	if want.Spec.ClusterIP == "" || want.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil, nil
	}
	domain := d.Domain
	if domain == "" {
		domain = "cluster.local"
	}
	return &offloadingv1alpha1.ConsumerDNS{Nameserver: want.Spec.ClusterIP, Domain: domain}, nil
}

func equalServices(a, b *corev1.Service) bool {
	return a.Labels[offloadingv1alpha1.OriginClusterLabel] == b.Labels[offloadingv1alpha1.OriginClusterLabel] &&
		slices.EqualFunc(a.Spec.Ports, b.Spec.Ports, func(x, y corev1.ServicePort) bool {
			return x.Name == y.Name && x.Protocol == y.Protocol && x.Port == y.Port && x.TargetPort == y.TargetPort
		}) && len(a.Spec.Selector) == len(b.Spec.Selector) &&
		a.Spec.Selector["app.kubernetes.io/component"] == b.Spec.Selector["app.kubernetes.io/component"]
}
