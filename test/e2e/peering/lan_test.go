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
	"io"
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
	"github.com/liqo-go/liqo/internal/peering"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// setClusterConfig changes m's ClusterConfig and waits until the
// controller manager applied it.
func setClusterConfig(t *testing.T, m *playground.Member, change func(*configv1alpha1.ClusterConfigSpec)) {
	t.Helper()
	c := framework.Client(t, m)
	ctx := context.Background()
	var cc configv1alpha1.ClusterConfig
	if err := c.Get(ctx, client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cc); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cc.DeepCopy())
	change(&cc.Spec)
	if err := c.Patch(ctx, &cc, patch); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 10*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cc); err != nil {
			return err
		}
		for _, cond := range cc.Status.Conditions {
			if cond.Type == "Ready" && cond.ObservedGeneration == cc.Generation {
				return nil
			}
		}
		return errorf("%s: ClusterConfig generation %d not applied yet", m.Name, cc.Generation)
	})
}

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
		setClusterConfig(t, m, func(s *configv1alpha1.ClusterConfigSpec) {
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
			fc := waitCondition(t, m, other.ClusterID, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionTrue, peering.ReasonAccepted, 60*time.Second)
			if fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] != string(discoveryv1alpha1.LanDiscovery) {
				t.Fatalf("%s's ForeignCluster for %s is of type %s, want LAN", m.Name, other.Name, fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel])
			}
			if secret := getSecretAnnotation(t, m, identity.RemoteSecretName(other.ClusterID), peering.AuthenticatedByAnnotation); secret != "lan-trust" {
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
	t.Run("an answer changed between the clusters gets no provider identity signed", testSwappedProviderCSR)
}

// testSwappedProviderCSR: under LAN trust the exchange's answer is not
// signed. A host that redirects A to itself (as a spoofed announcement
// would) relays A's request to the real B and swaps the provider CSR in
// B's answer for its own: A must refuse to sign it, and no certificate for
// the attacker's key may reach B's PeeringRequest.
func testSwappedProviderCSR(t *testing.T) {
	a, b := suite.Members[0], suite.Members[1]
	ctx := t.Context()
	inA := framework.Client(t, a)
	// A stops browsing, so that no announcement puts B's address back
	// while A is redirected.
	setClusterConfig(t, a, func(s *configv1alpha1.ClusterConfigSpec) { s.DiscoveryConfig.EnableDiscovery = ptr.To(false) })
	_, attackerCSR, err := identity.NewKeyAndCSR(identity.ProviderUserPrefix + b.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	var swapped atomic.Int64
	relay := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // B's self-signed auth service
	proxy := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, b.AuthURL+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := relay.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		var ir auth.IdentityResponse
		if resp.StatusCode == http.StatusOK && r.URL.Path == auth.PeeringIdentityPath && json.Unmarshal(out, &ir) == nil {
			ir.ProviderCSR = string(attackerCSR)
			out, _ = json.Marshal(&ir)
			swapped.Add(1)
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(out)
	}))
	t.Cleanup(proxy.Close)

	fc := getFC(t, a, b.ClusterID)
	patch := client.MergeFrom(fc.DeepCopy())
	fc.Spec.ForeignAuthURL = proxy.URL
	if err := inA.Patch(ctx, fc, patch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		fc := getFC(t, a, b.ClusterID)
		patch := client.MergeFrom(fc.DeepCopy())
		fc.Spec.ForeignAuthURL = b.AuthURL
		_ = inA.Patch(context.Background(), fc, patch)
	})
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
	for _, m := range suite.Members {
		setClusterConfig(t, m, func(s *configv1alpha1.ClusterConfigSpec) {
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
