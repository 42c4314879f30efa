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
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// startNamespaceMapReconciler runs the NamespaceMap reconciler alone
// against cfg's API server until the test ends.
func startNamespaceMapReconciler(t *testing.T, cfg *rest.Config) {
	t.Helper()
	envtest.StartManager(t, cfg, func(mgr ctrl.Manager) error {
		direct, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
		if err != nil {
			return err
		}
		return (&NamespaceMapReconciler{Client: mgr.GetClient(), Direct: direct}).SetupWithManager(mgr)
	})
}

// TestNamespacesGoWithThePeering: a consumer's provider namespaces live as
// long as its PeeringRequest, whoever keeps its tenant namespace and
// NamespaceMap (the provider's own peering the other way does): deleting
// the PeeringRequest releases them, with no other component involved.
func TestNamespacesGoWithThePeering(t *testing.T) {
	cfg, c := envtest.StartInstalled(t, "provider")
	ctx := t.Context()
	const consumer = "consumer-1"
	remote := GeneratedNamespaceName("web", consumer)
	pr := &discoveryv1alpha1.PeeringRequest{
		ObjectMeta: metav1.ObjectMeta{Name: consumer},
		Spec: discoveryv1alpha1.PeeringRequestSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: consumer}, Namespace: "liqo",
			APIServerURL: "https://127.0.0.1:1", CACert: "ca", ProviderCertificate: "cert",
		},
	}
	tenant := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: discoveryv1alpha1.TenantNamespace(consumer)}}
	nm := &offloadingv1alpha1.NamespaceMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant.Name, Name: offloadingv1alpha1.NamespaceMapName},
		Spec:       offloadingv1alpha1.NamespaceMapSpec{Mappings: map[string]offloadingv1alpha1.NamespaceName{"web": offloadingv1alpha1.NamespaceName(remote)}},
	}
	for _, o := range []client.Object{pr, tenant, nm} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T: %v", o, err)
		}
	}
	startNamespaceMapReconciler(t, cfg)

	remoteNS := func(ctx context.Context) (*corev1.Namespace, error) {
		var ns corev1.Namespace
		err := c.Get(ctx, client.ObjectKey{Name: remote}, &ns)
		return &ns, err
	}
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		ns, err := remoteNS(ctx)
		if err != nil {
			return err
		}
		if ns.Labels[offloadingv1alpha1.OriginClusterLabel] != consumer {
			return fmt.Errorf("namespace %s labels %v, want %s=%s", remote, ns.Labels, offloadingv1alpha1.OriginClusterLabel, consumer)
		}
		return nil
	})
	// With the peering in place, a resync later the namespace still stands.
	envtest.Consistently(t, 2*time.Second, func(ctx context.Context) error {
		if ns, err := remoteNS(ctx); err != nil || !ns.DeletionTimestamp.IsZero() {
			return fmt.Errorf("namespace %s went while the peering stands: %w, deleted at %v", remote, err, ns.DeletionTimestamp)
		}
		return nil
	})

	if err := c.Delete(ctx, pr); err != nil {
		t.Fatal(err)
	}
	// No namespace controller runs here: deleted means Terminating.
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		ns, err := remoteNS(ctx)
		if apierrors.IsNotFound(err) || (err == nil && !ns.DeletionTimestamp.IsZero()) {
			return nil
		}
		return fmt.Errorf("namespace %s not released after the PeeringRequest went (%w)", remote, err)
	})
	if err := c.Get(ctx, client.ObjectKeyFromObject(nm), &offloadingv1alpha1.NamespaceMap{}); err != nil {
		t.Fatalf("the NamespaceMap itself is not the reconciler's to delete: %v", err)
	}
}

// TestOrchestratedFromTheStart: in a broker, the namespaces made for a
// consumer it orchestrates (one with a Selection) are marked orchestrated
// towards no provider from their creation, so that none of their pods can
// start on the broker's own nodes before the broker offloads them; those
// of another consumer are not.
func TestOrchestratedFromTheStart(t *testing.T) {
	cfg, c := envtest.StartInstalled(t, "broker")
	ctx := t.Context()
	for _, consumer := range []string{"orchestrated-1", "plain-1"} {
		tenant := discoveryv1alpha1.TenantNamespace(consumer)
		objs := []client.Object{
			&discoveryv1alpha1.PeeringRequest{ObjectMeta: metav1.ObjectMeta{Name: consumer}, Spec: discoveryv1alpha1.PeeringRequestSpec{
				ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: consumer}, Namespace: "liqo",
				APIServerURL: "https://127.0.0.1:1", CACert: "ca", ProviderCertificate: "cert",
			}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}},
		}
		if consumer == "orchestrated-1" {
			objs = append(objs, &brokerv1alpha1.Selection{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: brokerv1alpha1.SelectionName}})
		}
		objs = append(objs, &offloadingv1alpha1.NamespaceMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: offloadingv1alpha1.NamespaceMapName},
			Spec:       offloadingv1alpha1.NamespaceMapSpec{Mappings: map[string]offloadingv1alpha1.NamespaceName{"web": offloadingv1alpha1.NamespaceName(GeneratedNamespaceName("web", consumer))}},
		})
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("creating %T: %v", o, err)
			}
		}
	}
	startNamespaceMapReconciler(t, cfg)
	for consumer, want := range map[string]bool{"orchestrated-1": true, "plain-1": false} {
		envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
			var ns corev1.Namespace
			if err := c.Get(ctx, client.ObjectKey{Name: GeneratedNamespaceName("web", consumer)}, &ns); err != nil {
				return err
			}
			providers, orchestrated := Orchestrated(&ns)
			if orchestrated != want || len(providers) != 0 {
				return fmt.Errorf("namespace of %s: orchestrated %v towards %v, want %v towards none", consumer, orchestrated, providers, want)
			}
			return nil
		})
	}
}
