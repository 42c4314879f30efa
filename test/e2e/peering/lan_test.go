// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestLANPeering: with autojoin and the LAN trust policy, three clusters
// that find each other over loopback mDNS peer in both directions without
// a token or any manual step.
func TestLANPeering(t *testing.T) {
	framework.LogOnFailure(t, suite.Members...)
	// Earlier tests unpeered these clusters by hand, and the join decision
	// is remembered per ClusterID: forget it, as for new clusters.
	// Tokens stored by the manual tests' liqoctl add go too: this path
	// needs none.
	for _, m := range suite.Members {
		forgetChoices(t, m)
		for _, other := range suite.Members {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: install.DefaultNamespace, Name: auth.RemoteTokenSecretName(other.ClusterID)}}
			if err := framework.Client(t, m).Delete(t.Context(), s); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
	}
	start := time.Now()
	for _, m := range suite.Members {
		framework.SetClusterConfig(t, m, func(s *configv1alpha1.ClusterConfigSpec) {
			s.DiscoveryConfig.EnableDiscovery = ptr.To(true)
			s.DiscoveryConfig.EnableAdvertisement = ptr.To(true)
			s.DiscoveryConfig.AutoJoin = ptr.To(true)
			s.PeeringConfig.TrustLANPeers = ptr.To(true)
		})
	}
	t.Cleanup(func() { lanCleanup(t) })
	for _, m := range suite.Members {
		for _, other := range suite.Members {
			if m == other {
				continue
			}
			fc := waitCondition(t, m, other.ClusterID, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionTrue, discoveryv1alpha1.ReasonAccepted, 60*time.Second)
			if fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] != string(discoveryv1alpha1.LanDiscovery) {
				t.Fatalf("%s's ForeignCluster for %s is of type %s, want LAN", m.Name, other.Name, fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel])
			}
			if secret := getSecretAnnotation(t, m, identity.RemoteSecretName(other.ClusterID), discoveryv1alpha1.AuthenticatedByAnnotation); secret != "lan-trust" {
				t.Fatalf("%s authenticated to %s by %q, want lan-trust (no token was given)", m.Name, other.Name, secret)
			}
		}
	}
	t.Logf("3 clusters peered both ways over the LAN in %s", time.Since(start).Round(time.Millisecond))
	for _, m := range suite.Members {
		for _, other := range suite.Members {
			if m != other && !getFC(t, m, other.ClusterID).Status.IncomingPeering {
				t.Fatalf("%s shows no incoming peering from %s", m.Name, other.Name)
			}
		}
	}
	t.Run("a stranger learns nothing from a refusal", testRefusalsSayNothing)
	t.Run("a cluster redirected to another auth service sends it nothing", testRedirectedToAnotherKey)
	t.Run("an answer changed between the clusters gets no provider identity signed", testSwappedProviderCSR)
}

// testRefusalsSayNothing: without a token, a request naming a cluster B
// found on the LAN but carrying another CA is refused exactly as one
// naming a cluster nobody knows: the answer tells a stranger neither which
// ClusterIDs were seen nor which CA is pinned for them.
func testRefusalsSayNothing(t *testing.T) {
	a, b := suite.Members[0], suite.Members[1]
	caCert, _, err := auth.NewCA("stranger")
	if err != nil {
		t.Fatal(err)
	}
	refusal := func(clusterID string) *auth.ExchangeError {
		t.Helper()
		_, csr, err := identity.NewKeyAndCSR(identity.ConsumerUserPrefix + clusterID)
		if err != nil {
			t.Fatal(err)
		}
		req := &auth.IdentityRequest{ClusterID: clusterID, Namespace: "liqo", CACert: string(caCert), CSR: string(csr)}
		_, err = auth.RequestIdentity(t.Context(), b.AuthURL, "", req, auth.ClientOptions{InsecureSkipVerify: true})
		var ee *auth.ExchangeError
		if !errors.As(err, &ee) {
			t.Fatalf("a token-less request as %s with another CA: %v, want a refusal", clusterID, err)
		}
		return ee
	}
	known, unknown := refusal(a.ClusterID), refusal("never-seen-anywhere")
	if *known != *unknown {
		t.Fatalf("the refusals differ, so they tell what %s has seen:\n  for %s: %+v\n  for an unknown ID: %+v", b.Name, a.Name, known, unknown)
	}
	if pinned := getFC(t, b, a.ClusterID).Status.TrustedCAFingerprint; pinned == "" || strings.Contains(known.Message, pinned) {
		t.Fatalf("the refusal names the CA pinned for %s (%q): %s", a.Name, pinned, known.Message)
	}
}

// redirect points A's ForeignCluster of B at url, with pin as the pinned
// auth service key ("" for none), and puts both back when the test ends.
// The status is written first, so that the reconcile the new URL starts
// sees the new pin.
func redirect(t *testing.T, a, b *playground.Member, url, pin string) {
	t.Helper()
	inA := framework.Client(t, a)
	set := func(ctx context.Context, url, pin string) error {
		fc := getFC(t, a, b.ClusterID)
		patch := client.MergeFrom(fc.DeepCopy())
		fc.Status.AuthServiceKeyFingerprint = pin
		if err := inA.Status().Patch(ctx, fc, patch); err != nil {
			return err
		}
		patch = client.MergeFrom(fc.DeepCopy())
		fc.Spec.ForeignAuthURL = url
		return inA.Patch(ctx, fc, patch)
	}
	before := getFC(t, a, b.ClusterID)
	if err := set(t.Context(), url, pin); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := set(context.Background(), b.AuthURL, before.Status.AuthServiceKeyFingerprint); err != nil {
			t.Errorf("pointing %s back at %s: %v", a.Name, b.Name, err)
		}
	})
}

// relayTo returns an auth service, with a key of its own, that relays every
// request to target after letting change rewrite the answer, and counts
// the requests.
func relayTo(t *testing.T, target string, change func(path string, answer []byte) []byte) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var requests atomic.Int64
	relay := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // B's self-signed auth service
	proxy := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := relay.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusOK {
			out = change(r.URL.Path, out)
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(out)
	}))
	proxy.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	proxy.StartTLS()
	t.Cleanup(proxy.Close)
	return proxy, &requests
}

// testRedirectedToAnotherKey: a host that gets A to use its address for B
// (as a spoofed announcement or DNS record would try to) presents a key
// other than the one A pinned for B's auth service at first contact: A
// refuses the TLS handshake and sends nothing, and says why.
func testRedirectedToAnotherKey(t *testing.T) {
	a, b := suite.Members[0], suite.Members[1]
	ctx := t.Context()
	inA := framework.Client(t, a)
	framework.SetClusterConfig(t, a, func(s *configv1alpha1.ClusterConfigSpec) { s.DiscoveryConfig.EnableDiscovery = ptr.To(false) })
	proxy, requests := relayTo(t, b.AuthURL, func(_ string, out []byte) []byte { return out })
	pinned := getFC(t, a, b.ClusterID).Status.AuthServiceKeyFingerprint
	if pinned == "" {
		t.Fatalf("%s pinned no auth service key for %s", a.Name, b.Name)
	}
	// Runs after redirect's cleanup: A is back with B before the next test.
	t.Cleanup(func() {
		framework.Eventually(t, 60*time.Second, func() error {
			c := meta.FindStatusCondition(getFC(t, a, b.ClusterID).Status.Conditions, discoveryv1alpha1.ConditionAuthenticated)
			if c == nil || c.Status != metav1.ConditionTrue {
				return errorf("A is not authenticated with B again: %+v", c)
			}
			return nil
		})
	})
	redirect(t, a, b, proxy.URL, pinned)
	if err := inA.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: install.DefaultNamespace, Name: identity.RemoteSecretName(b.ClusterID)}}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, func() error {
		c := meta.FindStatusCondition(getFC(t, a, b.ClusterID).Status.Conditions, discoveryv1alpha1.ConditionAuthenticated)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "not the pinned "+pinned) {
			return errorf("A's Authenticated condition: %+v", c)
		}
		return nil
	})
	if n := requests.Load(); n > 0 {
		t.Fatalf("%d requests reached the host presenting another key", n)
	}
}

// testSwappedProviderCSR: under LAN trust the exchange's answer is not
// signed. A host that A reaches for B before pinning B's key relays A's
// request to the real B and swaps the provider CSR in B's answer for its
// own: A must refuse to sign it, and no certificate for the attacker's key
// may reach B's PeeringRequest.
func testSwappedProviderCSR(t *testing.T) {
	a, b := suite.Members[0], suite.Members[1]
	ctx := t.Context()
	inA := framework.Client(t, a)
	// A stops browsing, so that no announcement puts B's address back
	// while A is redirected.
	framework.SetClusterConfig(t, a, func(s *configv1alpha1.ClusterConfigSpec) { s.DiscoveryConfig.EnableDiscovery = ptr.To(false) })
	_, attackerCSR, err := identity.NewKeyAndCSR(identity.ProviderUserPrefix + b.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	var swapped atomic.Int64
	proxy, _ := relayTo(t, b.AuthURL, func(path string, out []byte) []byte {
		var ir auth.IdentityResponse
		if path == auth.PeeringIdentityPath && json.Unmarshal(out, &ir) == nil {
			ir.ProviderCSR = string(attackerCSR)
			out, _ = json.Marshal(&ir)
			swapped.Add(1)
		}
		return out
	})
	// As if the host had been there at first contact, before A pinned
	// any key for B: A pins the host's key, and only the provider CSR
	// check stands between the host and a provider identity.
	redirect(t, a, b, proxy.URL, "")
	// A authenticates again once its identity in B is gone.
	if err := inA.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: install.DefaultNamespace, Name: identity.RemoteSecretName(b.ClusterID)}}); err != nil {
		t.Fatal(err)
	}
	var refusal string
	framework.Eventually(t, 60*time.Second, func() error {
		var pr discoveryv1alpha1.PeeringRequest
		if err := framework.Client(t, b).Get(ctx, client.ObjectKey{Name: a.ClusterID}, &pr); err == nil && sameKey(t, pr.Spec.ProviderCertificate, attackerCSR) {
			t.Fatalf("A signed the attacker's CSR as %s%s and handed the certificate over in its PeeringRequest", identity.ProviderUserPrefix, b.ClusterID)
		}
		c := meta.FindStatusCondition(getFC(t, a, b.ClusterID).Status.Conditions, discoveryv1alpha1.ConditionAuthenticated)
		if swapped.Load() == 0 || c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "not the one the provider published") {
			return errorf("%d answers swapped; A's Authenticated condition: %+v", swapped.Load(), c)
		}
		refusal = c.Message
		return nil
	})
	t.Logf("A refused the swapped answer: %s", refusal)
}

// sameKey says whether the PEM certificate certPEM certifies the key of
// the PEM CSR csrPEM.
func sameKey(t *testing.T, certPEM string, csrPEM []byte) bool {
	t.Helper()
	cb, _ := pem.Decode([]byte(certPEM))
	rb, _ := pem.Decode(csrPEM)
	if cb == nil || rb == nil {
		return false
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return false
	}
	csr, err := x509.ParseCertificateRequest(rb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(csr.PublicKey)
}

// lanCleanup stops discovery, unpeers every pair and removes the
// ForeignClusters, so that later tests start from nothing.
func lanCleanup(t *testing.T) {
	t.Helper()
	for _, m := range suite.Members {
		framework.SetClusterConfig(t, m, func(s *configv1alpha1.ClusterConfigSpec) {
			s.DiscoveryConfig.EnableDiscovery = ptr.To(false)
			s.DiscoveryConfig.EnableAdvertisement = ptr.To(false)
			s.DiscoveryConfig.AutoJoin = ptr.To(false)
			s.PeeringConfig.TrustLANPeers = ptr.To(false)
		})
	}
	// Every direction first: the objects of a pair are only all gone once
	// both of its peerings are.
	for _, m := range suite.Members {
		for _, other := range suite.Members {
			if fc := getFC(t, m, other.ClusterID); m != other && fc != nil && fc.Spec.Join {
				framework.SetJoin(t, m, other.ClusterID, false)
			}
		}
	}
	for i, m := range suite.Members {
		for _, other := range suite.Members[i+1:] {
			waitNoPeeringObjects(t, m, other, 60*time.Second)
		}
	}
	ctx := context.Background()
	for _, m := range suite.Members {
		c := framework.Client(t, m)
		_ = c.DeleteAllOf(ctx, &discoveryv1alpha1.ForeignCluster{})
		framework.Eventually(t, 30*time.Second, func() error {
			var list discoveryv1alpha1.ForeignClusterList
			if err := c.List(ctx, &list); err != nil || len(list.Items) > 0 {
				return errorf("%s still has %d ForeignClusters (%v)", m.Name, len(list.Items), err)
			}
			return nil
		})
		forgetChoices(t, m)
	}
}

func forgetChoices(t *testing.T, m *playground.Member) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: install.DefaultNamespace, Name: foreigncluster.ChoicesConfigMap}}
	if err := framework.Client(t, m).Delete(context.Background(), cm); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

func getSecretAnnotation(t *testing.T, m *playground.Member, name, key string) string {
	t.Helper()
	var s corev1.Secret
	if err := framework.Client(t, m).Get(context.Background(), client.ObjectKey{Namespace: install.DefaultNamespace, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	return s.Annotations[key]
}
