// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestIncomingAcceptsAVerifiedConsumer runs the provider's PeeringRequest
// reconciler alone, with two real API servers: the consumer's, which only
// serves as the place where the consumer's certificate for this provider
// must work, and the provider's. Set up as a token exchange leaves it (the
// provider's key in its peer Secret, the consumer's certificate for that
// key signed by the consumer's CSR API), a PeeringRequest is accepted:
// consumer verified, tenant namespace, the virtual kubelet's certificate
// signed, the consumer's ForeignCluster marked incoming. A request that
// presents a certificate the consumer issued to someone else is not
// verified. Deleting the request revokes what was granted.
func TestIncomingAcceptsAVerifiedConsumer(t *testing.T) {
	const consumerID, providerID = "consumer-1", "provider-1"
	consumer := envtest.StartCluster(t, "consumer")
	provider := envtest.StartCluster(t, "provider")
	envtest.SignCSRs(t, consumer)
	envtest.SignCSRs(t, provider)
	ctx := t.Context()
	inConsumer, inProvider := installed(t, consumer), installed(t, provider)
	consumerCA, err := os.ReadFile(consumer.CACertPath)
	if err != nil {
		t.Fatal(err)
	}

	// What the token exchange leaves: the provider's key for the consumer,
	// and the consumer's certificate for it.
	issue := func(user string) (key, cert []byte) {
		t.Helper()
		key, csr, err := identity.NewKeyAndCSR(user)
		if err != nil {
			t.Fatal(err)
		}
		cert, err = identity.Issue(ctx, inConsumer, nil, csr, user, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return key, cert
	}
	providerKey, providerCert := issue(identity.ProviderUserPrefix + providerID)
	peer := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: install.DefaultNamespace, Name: PeerSecretName(consumerID),
			Annotations: map[string]string{discoveryv1alpha1.AuthenticatedByAnnotation: "token"}},
		Data: map[string][]byte{PeerSecretProviderKey: providerKey},
	}
	if err := inProvider.Create(ctx, peer); err != nil {
		t.Fatal(err)
	}

	envtest.StartManager(t, provider.RESTConfig, func(mgr ctrl.Manager) error {
		direct, err := client.New(provider.RESTConfig, client.Options{Scheme: mgr.GetScheme()})
		if err != nil {
			return err
		}
		return (&Incoming{
			Client: direct, Scheme: mgr.GetScheme(), Namespace: install.DefaultNamespace, LocalClusterID: providerID,
			Policy: &Policy{Reader: direct, LocalClusterID: providerID}, Lifetime: time.Hour,
		}).SetupWithManager(mgr)
	})

	// First a request whose certificate the consumer issued to someone
	// else, with the provider's key: the consumer's API server does not
	// see this provider in it.
	_, vkCSR, err := identity.NewKeyAndCSR(identity.VirtualKubeletUserPrefix + consumerID)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := identity.Issue(ctx, inConsumer, nil, csrFor(t, providerKey, identity.ProviderUserPrefix+"someone-else"), identity.ProviderUserPrefix+"someone-else", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pr := &discoveryv1alpha1.PeeringRequest{
		ObjectMeta: metav1.ObjectMeta{Name: consumerID},
		Spec: discoveryv1alpha1.PeeringRequestSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: consumerID, ClusterName: "consumer"},
			Namespace:       install.DefaultNamespace, APIServerURL: consumer.APIServerURL, CACert: string(consumerCA),
			ProviderCertificate: string(forged), VirtualKubeletCSR: string(vkCSR), AuthURL: "https://127.0.0.1:1",
		},
	}
	if err := inProvider.Create(ctx, pr); err != nil {
		t.Fatal(err)
	}
	condition := func(ctx context.Context, typ string) (*metav1.Condition, error) {
		if err := inProvider.Get(ctx, client.ObjectKeyFromObject(pr), pr); err != nil {
			return nil, err
		}
		return meta.FindStatusCondition(pr.Status.Conditions, typ), nil
	}
	envtest.Eventually(t, 15*time.Second, func(ctx context.Context) error {
		c, err := condition(ctx, discoveryv1alpha1.PeeringRequestConsumerVerified)
		if err != nil {
			return err
		}
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, identity.ProviderUserPrefix+"someone-else") {
			return fmt.Errorf("ConsumerVerified %+v with another identity's certificate, want False naming that identity", c)
		}
		return nil
	})
	if c := meta.FindStatusCondition(pr.Status.Conditions, discoveryv1alpha1.PeeringRequestAccepted); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Accepted %+v with an unverified consumer, want False", c)
	}
	if pr.Status.VirtualKubeletCertificate != "" {
		t.Fatal("the virtual kubelet got a certificate for an unverified consumer")
	}

	// The consumer's real certificate.
	patch := client.MergeFrom(pr.DeepCopy())
	pr.Spec.ProviderCertificate = string(providerCert)
	if err := inProvider.Patch(ctx, pr, patch); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 15*time.Second, func(ctx context.Context) error {
		c, err := condition(ctx, discoveryv1alpha1.PeeringRequestAccepted)
		if err != nil {
			return err
		}
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Accepted %+v, want True", c)
		}
		return nil
	})
	if !meta.IsStatusConditionTrue(pr.Status.Conditions, discoveryv1alpha1.PeeringRequestConsumerVerified) {
		t.Errorf("accepted without ConsumerVerified: %+v", pr.Status.Conditions)
	}
	if pr.Status.TenantNamespace != discoveryv1alpha1.TenantNamespace(consumerID) {
		t.Errorf("tenant namespace %q, want %s", pr.Status.TenantNamespace, discoveryv1alpha1.TenantNamespace(consumerID))
	}
	user, _, err := identity.CertificateUser([]byte(pr.Status.VirtualKubeletCertificate))
	if err != nil || user != identity.VirtualKubeletUserPrefix+consumerID {
		t.Errorf("the virtual kubelet's certificate is for %q (%v), want %s", user, err, identity.VirtualKubeletUserPrefix+consumerID)
	}
	var fc discoveryv1alpha1.ForeignCluster
	if err := inProvider.Get(ctx, client.ObjectKey{Name: consumerID}, &fc); err != nil || !fc.Status.IncomingPeering {
		t.Errorf("the consumer's ForeignCluster: %v, incoming %v; want marked incoming", err, fc.Status.IncomingPeering)
	}
	var binding rbacv1.RoleBinding
	if err := inProvider.Get(ctx, client.ObjectKey{Namespace: pr.Status.TenantNamespace, Name: VirtualKubeletRole}, &binding); err != nil {
		t.Errorf("the virtual kubelet's binding in the tenant namespace: %v", err)
	}

	// The consumer unpeers: what was granted goes.
	if err := inProvider.Delete(ctx, pr); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 15*time.Second, func(ctx context.Context) error {
		err := inProvider.Get(ctx, client.ObjectKeyFromObject(pr), &discoveryv1alpha1.PeeringRequest{})
		if err == nil {
			return errors.New("the PeeringRequest is still there")
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		err = inProvider.Get(ctx, client.ObjectKeyFromObject(peer), &corev1.Secret{})
		if err == nil {
			return errors.New("the provider's key for the consumer outlived the peering")
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		var ns corev1.Namespace
		if err := inProvider.Get(ctx, client.ObjectKey{Name: discoveryv1alpha1.TenantNamespace(consumerID)}, &ns); client.IgnoreNotFound(err) != nil {
			return err
		} else if err == nil && ns.DeletionTimestamp.IsZero() {
			return errors.New("the tenant namespace is not being deleted")
		}
		return nil
	})
}

// csrFor makes a CSR for user with an existing key (PEM), as someone
// holding the provider's key could.
func csrFor(t *testing.T, keyPEM []byte, user string) []byte {
	t.Helper()
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		t.Fatal("the key is not PEM")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: user}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}
