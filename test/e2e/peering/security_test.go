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
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// TestSecurity checks every identity a peering issues with real requests
// against the API servers, and the token exchange's refusals.
func TestSecurity(t *testing.T) {
	a, b, _ := members()
	framework.LogOnFailure(t, a, b)
	ctx := t.Context()

	t.Run("anonymous and unauthenticated requests cannot create PeeringRequests", func(t *testing.T) {
		anon := framework.ClientFor(t, &rest.Config{Host: b.APIServerURL, TLSClientConfig: rest.TLSClientConfig{CAData: framework.ClusterCA(t, b)}})
		framework.Denied(t, "anonymous create", anon.Create(ctx, prFor(a.ClusterID)))
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
		pool.AppendCertsFromPEM(framework.ClusterCA(t, b))
		cfg := &rest.Config{Host: b.APIServerURL, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12,
		}}}
		framework.Denied(t, "create with a foreign certificate", framework.ClientFor(t, cfg).Create(ctx, prFor(a.ClusterID)))
	})

	t.Run("a wrong, a missing or a replayed token is refused", func(t *testing.T) {
		_, csr, err := identity.NewKeyAndCSR(identity.ConsumerUserPrefix + "replay-probe")
		if err != nil {
			t.Fatal(err)
		}
		req := &auth.IdentityRequest{ClusterID: "replay-probe", Namespace: "liqo", CACert: string(framework.ClusterCA(t, a)), CSR: string(csr)}
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
	consumerCfg := framework.IdentityConfig(t, a, b.ClusterID)
	consumer := framework.ClientFor(t, consumerCfg)
	providerCfg := framework.ProviderConfig(t, b, a.ClusterID)
	provider := framework.ClientFor(t, providerCfg)
	vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))
	tenantInA := discoveryv1alpha1.TenantNamespace(b.ClusterID)
	tenantInB := discoveryv1alpha1.TenantNamespace(a.ClusterID)

	t.Run("the identity issued to A in B can handle its PeeringRequest and nothing else", func(t *testing.T) {
		var pr discoveryv1alpha1.PeeringRequest
		framework.Allowed(t, "get own PeeringRequest", consumer.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &pr))
		framework.Allowed(t, "update own PeeringRequest", consumer.Update(ctx, &pr))
		framework.Denied(t, "list pods", consumer.List(ctx, &corev1.PodList{}, client.InNamespace("default")))
		framework.Denied(t, "get the peering token", consumer.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: auth.TokenSecret}, &corev1.Secret{}))
		framework.Denied(t, "list secrets in its tenant namespace", consumer.List(ctx, &corev1.SecretList{}, client.InNamespace(tenantInB)))
		framework.Denied(t, "list PeeringRequests", consumer.List(ctx, &discoveryv1alpha1.PeeringRequestList{}))
		framework.Denied(t, "get another PeeringRequest", consumer.Get(ctx, client.ObjectKey{Name: "someone-else"}, &discoveryv1alpha1.PeeringRequest{}))
		err := consumer.Create(ctx, prFor("someone-else"))
		framework.Denied(t, "create another cluster's PeeringRequest", err)
		if !strings.Contains(err.Error(), "identity rule") {
			t.Fatalf("creating another cluster's PeeringRequest: %v, want the webhook's identity rule", err)
		}
		framework.Denied(t, "create a namespace", consumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "intrusion"}}))
	})

	t.Run("a consumer may not remove the provider's finalizer", func(t *testing.T) {
		var pr discoveryv1alpha1.PeeringRequest
		framework.Allowed(t, "get own PeeringRequest", consumer.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &pr))
		pr.Finalizers = nil
		err := consumer.Update(ctx, &pr)
		framework.Denied(t, "remove the finalizer", err)
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
			ClusterID: a.ClusterID, Namespace: "liqo", CACert: string(framework.ClusterCA(t, c)), CSR: string(csr),
		}, auth.ClientOptions{InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("the exchange itself (the token is valid): %v", err)
		}
		providerCert, err := identity.Issue(ctx, framework.Client(t, c), nil, []byte(resp.ProviderCSR), identity.ProviderUserPrefix+b.ClusterID, 0)
		if err != nil {
			t.Fatal(err)
		}
		attacker := framework.ClientFor(t, (&identity.Credentials{Server: b.APIServerURL, CACert: framework.ClusterCA(t, b), Certificate: []byte(resp.Certificate), Key: key}).RESTConfig())
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
		framework.Allowed(t, "get A's request as the attacker", attacker.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &pr))
		pr.Spec.APIServerURL, pr.Spec.CACert, pr.Spec.ProviderCertificate = c.APIServerURL, string(framework.ClusterCA(t, c)), string(providerCert)
		framework.Allowed(t, "update A's request as the attacker", attacker.Update(ctx, &pr))
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
		if server := framework.ProviderConfig(t, b, a.ClusterID).Host; server != a.APIServerURL {
			t.Fatalf("the provider now manages A's Advertisements at %s, not at A's API server %s", server, a.APIServerURL)
		}
		resume()
		// A puts its request back and stays peered.
		waitCondition(t, a, b.ClusterID, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionTrue, discoveryv1alpha1.ReasonAccepted, reconcilePeriod+15*time.Second)
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
		consumer = framework.ClientFor(t, framework.IdentityConfig(t, a, b.ClusterID))
		provider = framework.ClientFor(t, framework.ProviderConfig(t, b, a.ClusterID))
		vk = framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))
	})

	t.Run("the kubeconfig B holds for A works in A's tenant namespace for B and nowhere else", func(t *testing.T) {
		ad := &sharingv1alpha1.Advertisement{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenantInA, Name: sharingv1alpha1.AdvertisementName(b.ClusterID)},
			Spec: sharingv1alpha1.AdvertisementSpec{
				ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: b.ClusterID},
				Resources:       corev1.ResourceList{},
				Timestamp:       metav1.Now(), TimeToLive: metav1.NewTime(time.Now().Add(time.Minute)),
			},
		}
		// B's own Advertisement passes admission (the API server says it
		// exists, if B's Broadcaster wrote it, only after admission).
		if err := provider.Create(ctx, ad.DeepCopy(), client.DryRunAll); !apierrors.IsAlreadyExists(err) {
			framework.Allowed(t, "create its own Advertisement in the tenant namespace (dry run)", err)
		}
		probe := ad.DeepCopy()
		probe.Name = "probe"
		framework.Refused(t, "create an Advertisement of another name", provider.Create(ctx, probe))
		framework.Denied(t, "list Advertisements elsewhere", provider.List(ctx, &sharingv1alpha1.AdvertisementList{}, client.InNamespace("default")))
		framework.Denied(t, "list pods in the tenant namespace", provider.List(ctx, &corev1.PodList{}, client.InNamespace(tenantInA)))
		framework.Denied(t, "list secrets in the tenant namespace", provider.List(ctx, &corev1.SecretList{}, client.InNamespace(tenantInA)))
		framework.Denied(t, "list namespaces", provider.List(ctx, &corev1.NamespaceList{}))
	})

	t.Run("the virtual kubelet's identity may only ask for namespaces in its tenant namespace", func(t *testing.T) {
		framework.Allowed(t, "list NamespaceMaps in the tenant namespace", vk.List(ctx, &offloadingv1alpha1.NamespaceMapList{}, client.InNamespace(tenantInB)))
		framework.Denied(t, "list pods in the tenant namespace", vk.List(ctx, &corev1.PodList{}, client.InNamespace(tenantInB)))
		framework.Denied(t, "list pods in default", vk.List(ctx, &corev1.PodList{}, client.InNamespace("default")))
		framework.Denied(t, "list nodes", vk.List(ctx, &corev1.NodeList{}))
		framework.Denied(t, "create a namespace", vk.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "intrusion"}}))
	})

	unpeer(t, a, b)
	t.Run("after unpeering every identity is refused", func(t *testing.T) {
		framework.Denied(t, "consumer gets its PeeringRequest", consumer.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &discoveryv1alpha1.PeeringRequest{}))
		framework.Denied(t, "consumer creates its PeeringRequest", framework.ClientFor(t, consumerCfg).Create(ctx, prFor(a.ClusterID)))
		framework.Denied(t, "provider lists Advertisements", provider.List(ctx, &sharingv1alpha1.AdvertisementList{}, client.InNamespace(tenantInA)))
		framework.Denied(t, "virtual kubelet lists NamespaceMaps", vk.List(ctx, &offloadingv1alpha1.NamespaceMapList{}, client.InNamespace(tenantInB)))
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
