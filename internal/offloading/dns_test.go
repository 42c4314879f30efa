// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestDNSServicePerConsumer: with the DNS proxy on, each consumer gets a
// Service of its own selecting the proxy, on a target port no other
// consumer's has, and its NamespaceMap's status says where its pods ask
// (the Service's address, the domain); the end of its peering deletes the
// Service.
func TestDNSServicePerConsumer(t *testing.T) {
	cfg, c := envtest.StartInstalled(t, "provider")
	ctx := t.Context()
	consumers := []string{"consumer-a", "consumer-b"}
	for _, consumer := range consumers {
		tenant := discoveryv1alpha1.TenantNamespace(consumer)
		for _, o := range []client.Object{
			&discoveryv1alpha1.PeeringRequest{ObjectMeta: metav1.ObjectMeta{Name: consumer}, Spec: discoveryv1alpha1.PeeringRequestSpec{
				ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: consumer}, Namespace: "liqo",
				APIServerURL: "https://127.0.0.1:1", CACert: "ca", ProviderCertificate: "cert",
			}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}},
			&offloadingv1alpha1.NamespaceMap{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: offloadingv1alpha1.NamespaceMapName},
				Spec: offloadingv1alpha1.NamespaceMapSpec{Mappings: map[string]offloadingv1alpha1.NamespaceName{
					"shop": offloadingv1alpha1.NamespaceName(GeneratedNamespaceName("shop", consumer))}}},
		} {
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("creating %T: %v", o, err)
			}
		}
	}
	envtest.StartManager(t, cfg, func(mgr ctrl.Manager) error {
		direct, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
		if err != nil {
			return err
		}
		return (&NamespaceMapReconciler{Client: mgr.GetClient(), Direct: direct,
			DNS: &DNSProxy{Namespace: install.DefaultNamespace, Domain: "example.org"}}).SetupWithManager(mgr)
	})

	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		ports := map[int32]string{}
		for _, consumer := range consumers {
			var svc corev1.Service
			if err := c.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: DNSServiceName(consumer)}, &svc); err != nil {
				return err
			}
			if _, ok := svc.Labels[offloadingv1alpha1.DNSServiceLabel]; !ok || svc.Labels[offloadingv1alpha1.OriginClusterLabel] != consumer ||
				svc.Spec.Selector["app.kubernetes.io/component"] != DNSProxyComponent || len(svc.Spec.Ports) != 2 || svc.Spec.Ports[0].Port != 53 {
				return fmt.Errorf("the DNS Service of %s: labels %v, selector %v, ports %v", consumer, svc.Labels, svc.Spec.Selector, svc.Spec.Ports)
			}
			var nm offloadingv1alpha1.NamespaceMap
			if err := c.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer), Name: offloadingv1alpha1.NamespaceMapName}, &nm); err != nil {
				return err
			}
			if want := (offloadingv1alpha1.ConsumerDNS{Nameserver: svc.Spec.ClusterIP, Domain: "example.org"}); nm.Status.DNS == nil || *nm.Status.DNS != want {
				return fmt.Errorf("the NamespaceMap of %s says DNS %+v, want %+v", consumer, nm.Status.DNS, want)
			}
			port := svc.Spec.Ports[0].TargetPort.IntVal
			if other, ok := ports[port]; ok {
				return fmt.Errorf("%s and %s share the proxy's port %d", other, consumer, port)
			}
			ports[port] = consumer
		}
		return nil
	})

	if err := c.Delete(ctx, &discoveryv1alpha1.PeeringRequest{ObjectMeta: metav1.ObjectMeta{Name: "consumer-a"}}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		err := c.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: DNSServiceName("consumer-a")}, &corev1.Service{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("the DNS Service of a consumer whose peering ended: %w", err)
	})
	if err := c.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: DNSServiceName("consumer-b")}, &corev1.Service{}); err != nil {
		t.Errorf("the other consumer's DNS Service: %v", err)
	}
}
