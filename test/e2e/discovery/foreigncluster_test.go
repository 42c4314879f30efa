// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package discovery_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
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
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

func caFingerprint(t *testing.T, m *playground.Member) string {
	t.Helper()
	data, err := os.ReadFile(m.CACertPath)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := auth.Fingerprint(data)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

func condition(fc *discoveryv1alpha1.ForeignCluster, t string) *metav1.Condition {
	return meta.FindStatusCondition(fc.Status.Conditions, t)
}

// TestManualInsertion: a ForeignCluster created with only an auth URL is
// completed from the auth service, and is then the only one for that
// cluster, even though mDNS had found it too, with the sighting of the
// copy mDNS had made.
func TestManualInsertion(t *testing.T) {
	m, target := member(0), member(1)
	framework.LogOnFailure(t, m)
	c := framework.Client(t, m)
	framework.Eventually(t, 10*time.Second, func() error { _, err := foreignClusterOf(t, m, target); return err })

	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "added-by-hand"},
		Spec:       discoveryv1alpha1.ForeignClusterSpec{ForeignAuthURL: target.AuthURL, InsecureSkipTLSVerify: ptr.To(true)},
	}
	if err := c.Create(t.Context(), fc); err != nil {
		t.Fatalf("creating a ForeignCluster with only an auth URL: %v", err)
	}
	framework.DeleteOnCleanup(t, c, fc)

	framework.Eventually(t, 10*time.Second, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(fc), fc); err != nil {
			return err
		}
		if fc.Spec.ClusterIdentity.ClusterID != target.ClusterID || fc.Spec.ClusterIdentity.ClusterName != target.Name {
			return fmt.Errorf("identity %+v not completed", fc.Spec.ClusterIdentity)
		}
		if fc.Status.TrustedCAFingerprint != caFingerprint(t, target) {
			return fmt.Errorf("trusted CA %q, want %q", fc.Status.TrustedCAFingerprint, caFingerprint(t, target))
		}
		if fc.Status.APIServerURL != target.APIServerURL {
			return fmt.Errorf("API server %q, want %q", fc.Status.APIServerURL, target.APIServerURL)
		}
		var list discoveryv1alpha1.ForeignClusterList
		if err := c.List(t.Context(), &list, client.MatchingLabels{discoveryv1alpha1.ClusterIDLabel: target.ClusterID}); err != nil {
			return err
		}
		if len(list.Items) != 1 || list.Items[0].Name != fc.Name {
			return fmt.Errorf("%d ForeignClusters for %s, want only %s", len(list.Items), target.Name, fc.Name)
		}
		return nil
	})
	if got := fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel]; got != string(discoveryv1alpha1.ManualDiscovery) {
		t.Fatalf("discovery type %q, want Manual", got)
	}
	// The copy mDNS made handed its sighting over to this one (a cluster
	// added by hand takes no LAN sighting itself: see
	// TestLANCannotClaimAClusterKnownOtherwise), also when the hand-over
	// meets another writer's status write.
	framework.Eventually(t, 10*time.Second, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(fc), fc); err != nil {
			return err
		}
		for _, s := range fc.Status.Sources {
			if s.Name == "mdns" {
				return nil
			}
		}
		return fmt.Errorf("the mDNS sighting was not handed over to the manual ForeignCluster: %+v", fc.Status.Sources)
	})
}

// TestCAChange: a CA different from the trusted one is not accepted until
// an operator trusts it by its fingerprint; an operator can also mark a CA
// untrusted.
func TestCAChange(t *testing.T) {
	m, peer := member(0), member(2)
	framework.LogOnFailure(t, m)
	c := framework.Client(t, m)
	var fc *discoveryv1alpha1.ForeignCluster
	framework.Eventually(t, 10*time.Second, func() (err error) {
		if fc, err = foreignClusterOf(t, m, peer); err == nil && fc.Status.TrustedCAFingerprint == "" {
			err = fmt.Errorf("no CA trusted yet")
		}
		return err
	})
	realFP := caFingerprint(t, peer)

	// Make the trusted CA another one: to this cluster, the peer's real CA
	// is now a changed CA.
	other, err := auth.SelfSignedCertificate([]string{"someone-else"})
	if err != nil {
		t.Fatal(err)
	}
	otherPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: other.Certificate[0]})
	var secret corev1.Secret
	key := client.ObjectKey{Namespace: install.DefaultNamespace, Name: foreigncluster.CASecretName(peer.ClusterID)}
	if err := c.Get(t.Context(), key, &secret); err != nil {
		t.Fatal(err)
	}
	secret.Data[foreigncluster.CASecretKey] = otherPEM
	if err := c.Update(t.Context(), &secret); err != nil {
		t.Fatal(err)
	}
	annotate := func(k, v string) {
		t.Helper()
		var cur discoveryv1alpha1.ForeignCluster
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(fc), &cur); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(cur.DeepCopy())
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		if v == "" {
			delete(cur.Annotations, k)
		} else {
			cur.Annotations[k] = v
		}
		if err := c.Patch(t.Context(), &cur, patch); err != nil {
			t.Fatal(err)
		}
	}
	waitCA := func(status metav1.ConditionStatus, reason, msgPart string) {
		t.Helper()
		framework.Eventually(t, 10*time.Second, func() error {
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(fc), fc); err != nil {
				return err
			}
			cond := condition(fc, discoveryv1alpha1.ConditionCATrusted)
			if cond == nil || cond.Status != status || cond.Reason != reason || !strings.Contains(cond.Message, msgPart) {
				return fmt.Errorf("CATrusted = %+v, want %s/%s mentioning %q", cond, status, reason, msgPart)
			}
			return nil
		})
	}

	annotate("test.liqo.io/poke", "1") // reconcile now rather than at the next resync
	waitCA(metav1.ConditionFalse, "CAChanged", realFP)
	if fc.Status.TrustedCAFingerprint == realFP {
		t.Fatal("the changed CA was accepted silently")
	}

	annotate(discoveryv1alpha1.TrustCAAnnotation, realFP)
	waitCA(metav1.ConditionTrue, "TrustedByOperator", "")
	if fc.Status.TrustedCAFingerprint != realFP {
		t.Fatalf("trusted fingerprint %q, want %q", fc.Status.TrustedCAFingerprint, realFP)
	}
	if err := c.Get(t.Context(), key, &secret); err != nil || string(secret.Data[foreigncluster.CASecretKey]) == string(otherPEM) {
		t.Fatalf("the stored CA was not replaced by the trusted one (%v)", err)
	}

	annotate(discoveryv1alpha1.UntrustedCAAnnotation, "true")
	waitCA(metav1.ConditionFalse, "Untrusted", discoveryv1alpha1.UntrustedCAAnnotation)
	annotate(discoveryv1alpha1.UntrustedCAAnnotation, "")
	waitCA(metav1.ConditionTrue, "TrustedByOperator", "") // the trust annotation still names it
}

// TestAddressChange: when a cluster's auth service moves, the others update
// its ForeignCluster in place; nothing is deleted or recreated.
func TestAddressChange(t *testing.T) {
	m, moving := member(0), member(1)
	framework.LogOnFailure(t, m, moving)
	c := framework.Client(t, m)
	var before *discoveryv1alpha1.ForeignCluster
	framework.Eventually(t, 10*time.Second, func() (err error) { before, err = foreignClusterOf(t, m, moving); return err })
	var caBefore corev1.Secret
	caKey := client.ObjectKey{Namespace: install.DefaultNamespace, Name: foreigncluster.CASecretName(moving.ClusterID)}
	framework.Eventually(t, 10*time.Second, func() error { return c.Get(t.Context(), caKey, &caBefore) })
	oldURL := moving.AuthURL
	// A discovered cluster silent for MaxMissedHealthChecks intervals is
	// forgotten (3 s in this suite), and a controller manager restarting
	// on a loaded machine can take longer than that: a CI run saw the
	// ForeignCluster aged out and rediscovered. This test is about the
	// move, not the ageing: m waits a minute before it forgets.
	setDiscovery(t, m, func(d *configv1alpha1.DiscoveryConfig) { d.MaxMissedHealthChecks = 60 })

	if err := moving.StopControllerManager(); err != nil {
		t.Fatal(err)
	}
	moving.AuthPort = 0 // a new port: a new address
	if err := moving.StartControllerManager(t.Context()); err != nil {
		t.Fatal(err)
	}
	if moving.AuthURL == oldURL {
		t.Fatalf("the auth URL did not change (%s)", oldURL)
	}
	framework.Eventually(t, 20*time.Second, func() error {
		after, err := foreignClusterOf(t, m, moving)
		if err != nil {
			return err
		}
		if after.UID != before.UID {
			return fmt.Errorf("the ForeignCluster was recreated (%s -> %s)", before.UID, after.UID)
		}
		if after.Spec.ForeignAuthURL != moving.AuthURL {
			return fmt.Errorf("auth URL %s, want %s", after.Spec.ForeignAuthURL, moving.AuthURL)
		}
		return nil
	})
	var caAfter corev1.Secret
	if err := c.Get(t.Context(), caKey, &caAfter); err != nil || caAfter.UID != caBefore.UID {
		t.Fatalf("the trusted CA Secret was recreated or lost (%v)", err)
	}
}

// TestRememberedChoice: the join decision taken for a cluster survives its
// ForeignCluster being deleted and rediscovered, whatever autojoin says.
func TestRememberedChoice(t *testing.T) {
	m, peer := member(0), member(2)
	framework.LogOnFailure(t, m)
	c := framework.Client(t, m)
	setJoin := func(join bool) *discoveryv1alpha1.ForeignCluster {
		t.Helper()
		var fc *discoveryv1alpha1.ForeignCluster
		framework.Eventually(t, 10*time.Second, func() (err error) { fc, err = foreignClusterOf(t, m, peer); return err })
		patch := client.MergeFrom(fc.DeepCopy())
		fc.Spec.Join = join
		if err := c.Patch(t.Context(), fc, patch); err != nil {
			t.Fatal(err)
		}
		return fc
	}
	fc := setJoin(true)
	t.Cleanup(func() {
		// Leave the remembered decision at "do not join".
		ctx := context.Background()
		if cur, err := foreigncluster.Find(ctx, c, peer.ClusterID); err == nil && cur != nil {
			patch := client.MergeFrom(cur.DeepCopy())
			cur.Spec.Join = false
			_ = c.Patch(ctx, cur, patch)
		}
	})
	choices := &foreigncluster.Choices{Client: c, Namespace: install.DefaultNamespace}
	framework.Eventually(t, 10*time.Second, func() error {
		if join, ok, err := choices.Get(t.Context(), peer.ClusterID); err != nil || !ok || !join {
			return fmt.Errorf("decision not remembered yet (join=%v ok=%v): %w", join, ok, err)
		}
		return nil
	})

	if err := c.Delete(t.Context(), fc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 10*time.Second, func() error {
		again, err := foreignClusterOf(t, m, peer)
		if err != nil {
			return err
		}
		if again.UID == fc.UID {
			return fmt.Errorf("not deleted yet")
		}
		if !again.Spec.Join {
			return fmt.Errorf("rediscovered with join=false; the remembered decision was join=true")
		}
		return nil
	})
}
