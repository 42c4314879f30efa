// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/peering"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

func clientFor(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// prFor returns a PeeringRequest of clusterID that passes the schema.
func prFor(clusterID string) *discoveryv1alpha1.PeeringRequest {
	return &discoveryv1alpha1.PeeringRequest{
		ObjectMeta: metav1.ObjectMeta{Name: clusterID},
		Spec: discoveryv1alpha1.PeeringRequestSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: clusterID},
			Namespace:       "liqo", APIServerURL: "https://127.0.0.1:1", CACert: "x", ProviderCertificate: "x",
		},
	}
}

// denied asserts that err is a refusal (401 or 403), not a success or an
// unrelated failure.
func denied(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: allowed, want refused", what)
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
		t.Fatalf("%s: %v, want 401 or 403", what, err)
	}
}

func allowed(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v, want allowed", what, err)
	}
}

func clusterCA(t *testing.T, m *playground.Member) []byte {
	t.Helper()
	return m.RESTConfig.CAData
}

// TestSecurity checks every identity a peering issues with real requests
// against the API servers, and the token exchange's refusals.
func TestSecurity(t *testing.T) {
	a, b, _ := members()
	framework.LogOnFailure(t, a, b)
	ctx := t.Context()

	t.Run("anonymous and unauthenticated requests cannot create PeeringRequests", func(t *testing.T) {
		anon := clientFor(t, &rest.Config{Host: b.APIServerURL, TLSClientConfig: rest.TLSClientConfig{CAData: clusterCA(t, b)}})
		denied(t, "anonymous create", anon.Create(ctx, prFor(a.ClusterID)))
		// A certificate from a CA the cluster does not trust.
		caCert, caKey, err := auth.NewCA("intruder")
		if err != nil {
			t.Fatal(err)
		}
		cert, err := auth.ServingCertificate(caCert, caKey, []string{"intruder"})
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(clusterCA(t, b))
		cfg := &rest.Config{Host: b.APIServerURL, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12,
		}}}
		denied(t, "create with a foreign certificate", clientFor(t, cfg).Create(ctx, prFor(a.ClusterID)))
	})

	t.Run("a wrong, a missing or a replayed token is refused", func(t *testing.T) {
		_, csr, err := identity.NewKeyAndCSR(identity.ConsumerUserPrefix + "replay-probe")
		if err != nil {
			t.Fatal(err)
		}
		req := &auth.IdentityRequest{ClusterID: "replay-probe", Namespace: "liqo", CACert: string(clusterCA(t, a)), CSR: string(csr)}
		var ee *auth.ExchangeError
		_, err = auth.RequestIdentity(ctx, b.AuthURL, strings.Repeat("0", 64), req, auth.ClientOptions{InsecureSkipVerify: true})
		if !errors.As(err, &ee) || ee.Reason != auth.ReasonWrongToken || ee.Status != http.StatusUnauthorized {
			t.Fatalf("wrong token: %v, want 401 %s", err, auth.ReasonWrongToken)
		}
		_, err = auth.RequestIdentity(ctx, b.AuthURL, "", req, auth.ClientOptions{InsecureSkipVerify: true})
		if !errors.As(err, &ee) || ee.Reason != auth.ReasonTokenRequired {
			t.Fatalf("no token: %v, want %s", err, auth.ReasonTokenRequired)
		}

		// The same signed request twice: the first gets an identity, the
		// second is refused.
		token := readToken(t, b)
		body, _ := json.Marshal(req)
		send := func(h http.Header) (int, string) {
			r, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.AuthURL+auth.PeeringIdentityPath, bytes.NewReader(body))
			r.Header = h.Clone()
			resp, err := (&http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}).Do(r) //nolint:gosec // self-signed auth service
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(out)
		}
		r, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.AuthURL+auth.PeeringIdentityPath, bytes.NewReader(body))
		if _, err := auth.SignRequest(r, token, body); err != nil {
			t.Fatal(err)
		}
		if code, out := send(r.Header); code != http.StatusOK {
			t.Fatalf("first signed request: %d %s, want 200", code, out)
		}
		if code, out := send(r.Header); code != http.StatusUnauthorized || !strings.Contains(out, auth.ReasonReplayed) {
			t.Fatalf("replayed request: %d %s, want 401 %s", code, out, auth.ReasonReplayed)
		}
		if n := framework.Metric(t, b, "liqo_auth_refused_total", map[string]string{"reason": auth.ReasonReplayed}); n < 1 {
			t.Fatalf("liqo_auth_refused_total{reason=Replayed} = %v, want >= 1", n)
		}
		// No PeeringRequest follows this exchange: what it created goes
		// once the exchange TTL passed.
		framework.Eventually(t, exchangeTTL+10*time.Second, func() error {
			err := framework.Client(t, b).Get(ctx, client.ObjectKey{Name: peering.ConsumerRBACName("replay-probe")}, clusterRole(""))
			if !apierrors.IsNotFound(err) {
				return errorf("the ClusterRole of an exchange never followed up is still there (%v)", err)
			}
			err = framework.Client(t, b).Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: peering.PeerSecretName("replay-probe")}, &corev1.Secret{})
			if !apierrors.IsNotFound(err) {
				return errorf("the Secret of an exchange never followed up is still there (%v)", err)
			}
			return nil
		})
	})

	peer(t, a, b)
	consumerCfg := identityConfig(t, a, b.ClusterID)
	consumer := clientFor(t, consumerCfg)
	providerCfg := providerKubeconfig(t, b, a.ClusterID)
	provider := clientFor(t, providerCfg)
	vk := clientFor(t, virtualKubeletConfig(t, a, b))
	tenantInA := discoveryv1alpha1.TenantNamespace(b.ClusterID)
	tenantInB := discoveryv1alpha1.TenantNamespace(a.ClusterID)

	t.Run("the identity issued to A in B can handle its PeeringRequest and nothing else", func(t *testing.T) {
		var pr discoveryv1alpha1.PeeringRequest
		allowed(t, "get own PeeringRequest", consumer.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &pr))
		allowed(t, "update own PeeringRequest", consumer.Update(ctx, &pr))
		denied(t, "list pods", consumer.List(ctx, &corev1.PodList{}, client.InNamespace("default")))
		denied(t, "get the peering token", consumer.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: auth.TokenSecret}, &corev1.Secret{}))
		denied(t, "list secrets in its tenant namespace", consumer.List(ctx, &corev1.SecretList{}, client.InNamespace(tenantInB)))
		denied(t, "list PeeringRequests", consumer.List(ctx, &discoveryv1alpha1.PeeringRequestList{}))
		denied(t, "get another PeeringRequest", consumer.Get(ctx, client.ObjectKey{Name: "someone-else"}, &discoveryv1alpha1.PeeringRequest{}))
		err := consumer.Create(ctx, prFor("someone-else"))
		denied(t, "create another cluster's PeeringRequest", err)
		if !strings.Contains(err.Error(), "identity rule") {
			t.Fatalf("creating another cluster's PeeringRequest: %v, want the webhook's identity rule", err)
		}
		denied(t, "create a namespace", consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "intrusion"}}))
	})

	t.Run("a consumer may not remove the provider's finalizer", func(t *testing.T) {
		var pr discoveryv1alpha1.PeeringRequest
		allowed(t, "get own PeeringRequest", consumer.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &pr))
		pr.Finalizers = nil
		err := consumer.Update(ctx, &pr)
		denied(t, "remove the finalizer", err)
		if !strings.Contains(err.Error(), "finalizers") {
			t.Fatalf("removing the finalizer: %v, want the webhook's refusal", err)
		}
	})

	t.Run("holding the token is not enough to take over a peered cluster's ID", func(t *testing.T) {
		_, c := a, suite.Members[2]
		// The attacker holds B's token and C's CSR API: it exchanges as A
		// and points A's request at C with a certificate C issued.
		key, csr, err := identity.NewKeyAndCSR(identity.ConsumerUserPrefix + a.ClusterID)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := auth.RequestIdentity(ctx, b.AuthURL, readToken(t, b), &auth.IdentityRequest{
			ClusterID: a.ClusterID, Namespace: "liqo", CACert: string(clusterCA(t, c)), CSR: string(csr),
		}, auth.ClientOptions{InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("the exchange itself (the token is valid): %v", err)
		}
		providerCert, err := identity.Issue(ctx, framework.Client(t, c), nil, []byte(resp.ProviderCSR), identity.ProviderUserPrefix+b.ClusterID, 0)
		if err != nil {
			t.Fatal(err)
		}
		attacker := clientFor(t, (&identity.Credentials{Server: b.APIServerURL, CACert: clusterCA(t, b), Certificate: []byte(resp.Certificate), Key: key}).RESTConfig())
		// A's controller manager is frozen meanwhile, so that it does not put
		// its request back before B decided on the attacker's.
		cm := a.Process(playground.ControllerManager)
		if err := syscall.Kill(-cm.PID, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		resumed := false
		resume := func() {
			if !resumed {
				resumed = true
				_ = syscall.Kill(-cm.PID, syscall.SIGCONT)
			}
		}
		t.Cleanup(resume)
		var pr discoveryv1alpha1.PeeringRequest
		allowed(t, "get A's request as the attacker", attacker.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &pr))
		pr.Spec.APIServerURL, pr.Spec.CACert, pr.Spec.ProviderCertificate = c.APIServerURL, string(clusterCA(t, c)), string(providerCert)
		allowed(t, "update A's request as the attacker", attacker.Update(ctx, &pr))
		framework.Eventually(t, 15*time.Second, func() error {
			var got discoveryv1alpha1.PeeringRequest
			if err := framework.Client(t, b).Get(ctx, client.ObjectKey{Name: a.ClusterID}, &got); err != nil {
				return err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == discoveryv1alpha1.PeeringRequestConsumerVerified && cond.ObservedGeneration == pr.Generation {
					if cond.Status == metav1.ConditionFalse && strings.Contains(cond.Message, "is refused") {
						return nil
					}
					t.Fatalf("the provider decided on the redirected request: %+v; want it refused", cond)
				}
			}
			return errorf("the provider has not decided on the redirected request yet: %+v", got.Status.Conditions)
		})
		if server := providerKubeconfig(t, b, a.ClusterID).Host; server != a.APIServerURL {
			t.Fatalf("the provider now manages A's Advertisements at %s, not at A's API server %s", server, a.APIServerURL)
		}
		resume()
		// A puts its request back and stays peered.
		waitCondition(t, a, b.ClusterID, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionTrue, peering.ReasonAccepted, reconcilePeriod+15*time.Second)
		framework.Eventually(t, reconcilePeriod+15*time.Second, func() error {
			var got discoveryv1alpha1.PeeringRequest
			if err := framework.Client(t, b).Get(ctx, client.ObjectKey{Name: a.ClusterID}, &got); err != nil {
				return err
			}
			if got.Spec.APIServerURL != a.APIServerURL || !meta.IsStatusConditionTrue(got.Status.Conditions, discoveryv1alpha1.PeeringRequestAccepted) {
				return errorf("A's request not restored and accepted yet: %s %+v", got.Spec.APIServerURL, got.Status.Conditions)
			}
			return nil
		})
		// The identities of the peering may have been renewed meanwhile.
		consumer = clientFor(t, identityConfig(t, a, b.ClusterID))
		provider = clientFor(t, providerKubeconfig(t, b, a.ClusterID))
		vk = clientFor(t, virtualKubeletConfig(t, a, b))
	})

	t.Run("the kubeconfig B holds for A works in A's tenant namespace for B and nowhere else", func(t *testing.T) {
		ad := &sharingv1alpha1.Advertisement{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenantInA, Name: "probe"},
			Spec: sharingv1alpha1.AdvertisementSpec{
				ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: b.ClusterID},
				Resources:       corev1.ResourceList{},
				Timestamp:       metav1.Now(), TimeToLive: metav1.NewTime(time.Now().Add(time.Minute)),
			},
		}
		allowed(t, "create an Advertisement in the tenant namespace", provider.Create(ctx, ad))
		allowed(t, "delete it", provider.Delete(ctx, ad))
		denied(t, "list Advertisements elsewhere", provider.List(ctx, &sharingv1alpha1.AdvertisementList{}, client.InNamespace("default")))
		denied(t, "list pods in the tenant namespace", provider.List(ctx, &corev1.PodList{}, client.InNamespace(tenantInA)))
		denied(t, "list secrets in the tenant namespace", provider.List(ctx, &corev1.SecretList{}, client.InNamespace(tenantInA)))
		denied(t, "list namespaces", provider.List(ctx, &corev1.NamespaceList{}))
	})

	t.Run("the virtual kubelet's identity may only ask for namespaces in its tenant namespace", func(t *testing.T) {
		allowed(t, "list NamespaceMaps in the tenant namespace", vk.List(ctx, &offloadingv1alpha1.NamespaceMapList{}, client.InNamespace(tenantInB)))
		denied(t, "list pods in the tenant namespace", vk.List(ctx, &corev1.PodList{}, client.InNamespace(tenantInB)))
		denied(t, "list pods in default", vk.List(ctx, &corev1.PodList{}, client.InNamespace("default")))
		denied(t, "list nodes", vk.List(ctx, &corev1.NodeList{}))
		denied(t, "create a namespace", vk.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "intrusion"}}))
	})

	unpeer(t, a, b)
	t.Run("after unpeering every identity is refused", func(t *testing.T) {
		denied(t, "consumer gets its PeeringRequest", consumer.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &discoveryv1alpha1.PeeringRequest{}))
		denied(t, "consumer creates its PeeringRequest", clientFor(t, consumerCfg).Create(ctx, prFor(a.ClusterID)))
		denied(t, "provider lists Advertisements", provider.List(ctx, &sharingv1alpha1.AdvertisementList{}, client.InNamespace(tenantInA)))
		denied(t, "virtual kubelet lists NamespaceMaps", vk.List(ctx, &offloadingv1alpha1.NamespaceMapList{}, client.InNamespace(tenantInB)))
	})
}

func readToken(t *testing.T, m *playground.Member) string {
	t.Helper()
	var s corev1.Secret
	if err := framework.Client(t, m).Get(context.Background(), client.ObjectKey{Namespace: install.DefaultNamespace, Name: auth.TokenSecret}, &s); err != nil {
		t.Fatal(err)
	}
	return string(s.Data[auth.TokenKey])
}

// identityConfig is the consumer's identity in provider, as the consumer
// stored it.
func identityConfig(t *testing.T, consumer *playground.Member, providerID string) *rest.Config {
	t.Helper()
	var s corev1.Secret
	if err := framework.Client(t, consumer).Get(context.Background(), client.ObjectKey{Namespace: install.DefaultNamespace, Name: identity.RemoteSecretName(providerID)}, &s); err != nil {
		t.Fatal(err)
	}
	return (&identity.Credentials{Server: string(s.Data[peering.IdentityServerKey]), CACert: s.Data[peering.IdentityCAKey],
		Certificate: s.Data[peering.IdentityCertKey], Key: s.Data[peering.IdentityKeyKey]}).RESTConfig()
}

// providerKubeconfig is the kubeconfig the provider holds for the consumer.
func providerKubeconfig(t *testing.T, provider *playground.Member, consumerID string) *rest.Config {
	t.Helper()
	var s corev1.Secret
	if err := framework.Client(t, provider).Get(context.Background(), client.ObjectKey{Namespace: install.DefaultNamespace, Name: peering.PeerSecretName(consumerID)}, &s); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[peering.PeerSecretKubeconfig])
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// virtualKubeletConfig is the virtual kubelet's identity in provider: the
// key the consumer kept and the certificate the provider answered with.
func virtualKubeletConfig(t *testing.T, consumer, provider *playground.Member) *rest.Config {
	t.Helper()
	var s corev1.Secret
	if err := framework.Client(t, consumer).Get(context.Background(), client.ObjectKey{Namespace: install.DefaultNamespace, Name: identity.RemoteSecretName(provider.ClusterID)}, &s); err != nil {
		t.Fatal(err)
	}
	var pr discoveryv1alpha1.PeeringRequest
	if err := framework.Client(t, provider).Get(context.Background(), client.ObjectKey{Name: consumer.ClusterID}, &pr); err != nil {
		t.Fatal(err)
	}
	return (&identity.Credentials{Server: provider.APIServerURL, CACert: clusterCA(t, provider),
		Certificate: []byte(pr.Status.VirtualKubeletCertificate), Key: s.Data[peering.IdentityVirtualKubelet]}).RESTConfig()
}
