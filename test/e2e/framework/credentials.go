// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/peering"
	"github.com/liqo-go/liqo/internal/playground"
)

// The credentials a peering hands out, read back from where the clusters
// keep them, so that a test can act exactly as a peer may: these are the
// identities a peer turned hostile would hold.

// ClientFor returns a controller-runtime client, with Liqo's kinds, that
// authenticates as cfg says.
func ClientFor(t testing.TB, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatalf("creating a client for %s: %v", cfg.Host, err)
	}
	return c
}

// ClusterCA is the CA that signs m's API server certificate and its
// client certificates.
func ClusterCA(t testing.TB, m *playground.Member) []byte {
	t.Helper()
	return m.RESTConfig.CAData
}

// IdentityConfig is the consumer's identity in the provider providerID,
// as the consumer stored it after the token exchange.
func IdentityConfig(t testing.TB, consumer *playground.Member, providerID string) *rest.Config {
	t.Helper()
	s := remoteIdentity(t, consumer, providerID)
	return (&identity.Credentials{Server: string(s.Data[identity.ServerKey]), CACert: s.Data[identity.CAKey],
		Certificate: s.Data[identity.CertKey], Key: s.Data[identity.KeyKey]}).RESTConfig()
}

// ProviderConfig is the kubeconfig the provider holds for the consumer
// consumerID: what it writes its Advertisements with.
func ProviderConfig(t testing.TB, provider *playground.Member, consumerID string) *rest.Config {
	t.Helper()
	var s corev1.Secret
	if err := Client(t, provider).Get(context.Background(), client.ObjectKey{Namespace: install.DefaultNamespace, Name: peering.PeerSecretName(consumerID)}, &s); err != nil {
		t.Fatalf("the kubeconfig %s holds for %s: %v", provider.Name, consumerID, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[peering.PeerSecretKubeconfig])
	if err != nil {
		t.Fatalf("the kubeconfig %s holds for %s: %v", provider.Name, consumerID, err)
	}
	return cfg
}

// VirtualKubeletConfig is the consumer's virtual kubelet identity in the
// provider: the key the consumer kept and the certificate the provider
// answered its PeeringRequest with.
func VirtualKubeletConfig(t testing.TB, consumer, provider *playground.Member) *rest.Config {
	t.Helper()
	s := remoteIdentity(t, consumer, provider.ClusterID)
	var pr discoveryv1alpha1.PeeringRequest
	if err := Client(t, provider).Get(context.Background(), client.ObjectKey{Name: consumer.ClusterID}, &pr); err != nil {
		t.Fatalf("the PeeringRequest of %s in %s: %v", consumer.Name, provider.Name, err)
	}
	return (&identity.Credentials{Server: provider.APIServerURL, CACert: ClusterCA(t, provider),
		Certificate: []byte(pr.Status.VirtualKubeletCertificate), Key: s.Data[identity.VirtualKubeletKeyKey]}).RESTConfig()
}

// remoteIdentity is the Secret in which consumer keeps its identities in
// the provider providerID.
func remoteIdentity(t testing.TB, consumer *playground.Member, providerID string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := Client(t, consumer).Get(context.Background(), client.ObjectKey{Namespace: install.DefaultNamespace, Name: identity.RemoteSecretName(providerID)}, &s); err != nil {
		t.Fatalf("the identity %s keeps for %s: %v", consumer.Name, providerID, err)
	}
	return &s
}

// Denied asserts that err is an authentication or authorization refusal
// (401 or 403), not a success or an unrelated failure.
func Denied(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: allowed, want refused", what)
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
		t.Fatalf("%s: %v, want 401 or 403", what, err)
	}
}

// Refused asserts that err is a refusal by authentication, authorization
// or admission: 401, 403, or 422 (Invalid), which is how a validating
// admission policy or a CRD validation rule answers. A success or any
// other error fails the test.
func Refused(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: allowed, want refused", what)
	}
	if !IsRefusal(err) {
		t.Fatalf("%s: %v, want 401, 403 or 422", what, err)
	}
}

// IsRefusal reports whether err is what Refused accepts, for a write that
// may be either refused or accepted without effect.
func IsRefusal(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsInvalid(err)
}

// Allowed asserts that err is nil.
func Allowed(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v, want allowed", what, err)
	}
}
