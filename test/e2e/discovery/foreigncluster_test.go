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
	"github.com/liqo-go/liqo/internal/ctl/trust"
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
// an operator trusts it with liqoctl trust, which shows both fingerprints,
// asks, and refuses a fingerprint other than the one presented; liqoctl
// untrust withdraws trust. A changed auth service key is trusted the same
// way.
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
	if fc.Status.PendingCAFingerprint != realFP {
		t.Fatalf("pending CA %q, want the one presented, %s", fc.Status.PendingCAFingerprint, realFP)
	}

	// liqoctl trust: shown, refused when not confirmed or when the
	// fingerprint checked out of band is another one, then trusted.
	otherFP, err := auth.Fingerprint(otherPEM)
	if err != nil {
		t.Fatal(err)
	}
	verb := func(untrust bool, answer string, o trust.Options) (string, error) {
		t.Helper()
		o.Kubeconfig, o.Cluster, o.In, o.Timeout = m.Kubeconfig, peer.ClusterID, strings.NewReader(answer), 20*time.Second
		var out strings.Builder
		if untrust {
			err = o.Untrust(t.Context(), &out)
		} else {
			err = o.Trust(t.Context(), &out)
		}
		t.Logf("liqoctl %s -> %v:\n%s", map[bool]string{true: "untrust", false: "trust"}[untrust], err, out.String())
		return out.String(), err
	}
	out, err := verb(false, "n\n", trust.Options{})
	if err == nil || !strings.Contains(out, otherFP) || !strings.Contains(out, realFP) {
		t.Fatalf("trust answered no: err %v, output without both fingerprints or not refused", err)
	}
	if _, err := verb(false, "", trust.Options{Yes: true, CA: otherFP}); err == nil || !strings.Contains(err.Error(), otherFP) {
		t.Fatalf("trust of a CA the cluster does not present: %v, want refused, naming it", err)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(fc), fc); err != nil {
		t.Fatal(err)
	}
	if fc.Annotations[discoveryv1alpha1.TrustCAAnnotation] != "" || fc.Status.TrustedCAFingerprint == realFP {
		t.Fatalf("a refused trust changed something: annotations %v, trusted %s", fc.Annotations, fc.Status.TrustedCAFingerprint)
	}
	if out, err := verb(false, "y\n", trust.Options{CA: realFP}); err != nil || !strings.Contains(out, "Trusted") {
		t.Fatalf("trust: %v", err)
	}
	waitCA(metav1.ConditionTrue, "TrustedByOperator", "")
	if fc.Status.TrustedCAFingerprint != realFP || fc.Status.PendingCAFingerprint != "" {
		t.Fatalf("trusted fingerprint %q (pending %q), want %q", fc.Status.TrustedCAFingerprint, fc.Status.PendingCAFingerprint, realFP)
	}
	if err := c.Get(t.Context(), key, &secret); err != nil || string(secret.Data[foreigncluster.CASecretKey]) == string(otherPEM) {
		t.Fatalf("the stored CA was not replaced by the trusted one (%v)", err)
	}
	if out, err := verb(false, "", trust.Options{}); err != nil || !strings.Contains(out, "Nothing to trust") {
		t.Fatalf("trust with nothing pending: %v, %q", err, out)
	}

	// liqoctl untrust, then trust again.
	if _, err := verb(true, "y\n", trust.Options{}); err != nil {
		t.Fatalf("untrust: %v", err)
	}
	waitCA(metav1.ConditionFalse, "Untrusted", discoveryv1alpha1.UntrustedCAAnnotation)
	if _, err := verb(false, "", trust.Options{Yes: true}); err != nil {
		t.Fatalf("trust after untrust: %v", err)
	}
	waitCA(metav1.ConditionTrue, "TrustedByOperator", "") // the trust annotation still names it

	// A changed auth service key: pin another one, as if the key had
	// changed since first contact; the real one is then pending.
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(fc), fc); err != nil {
		t.Fatal(err)
	}
	realKey := fc.Status.AuthServiceKeyFingerprint
	statusPatch := client.MergeFrom(fc.DeepCopy())
	fc.Status.AuthServiceKeyFingerprint = otherFP
	if err := c.Status().Patch(t.Context(), fc, statusPatch); err != nil {
		t.Fatal(err)
	}
	annotate("test.liqo.io/poke", "2")
	framework.Eventually(t, 10*time.Second, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(fc), fc); err != nil {
			return err
		}
		if fc.Status.PendingAuthKeyFingerprint != realKey {
			return fmt.Errorf("pending auth key %q, want the one presented, %s (Reachable: %+v)", fc.Status.PendingAuthKeyFingerprint, realKey,
				condition(fc, discoveryv1alpha1.ConditionReachable))
		}
		return nil
	})
	if _, err := verb(false, "", trust.Options{Yes: true, AuthKey: otherFP}); err == nil || !strings.Contains(err.Error(), realKey) {
		t.Fatalf("trust of a key not presented: %v, want refused, naming the one presented", err)
	}
	if out, err := verb(false, "yes\n", trust.Options{}); err != nil || !strings.Contains(out, realKey) {
		t.Fatalf("trust of the auth key: %v", err)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(fc), fc); err != nil {
		t.Fatal(err)
	}
	if cond := condition(fc, discoveryv1alpha1.ConditionReachable); fc.Status.AuthServiceKeyFingerprint != realKey || fc.Status.PendingAuthKeyFingerprint != "" ||
		cond == nil || cond.Status != metav1.ConditionTrue {
		t.Fatalf("after trust: pinned %q, pending %q, Reachable %+v", fc.Status.AuthServiceKeyFingerprint, fc.Status.PendingAuthKeyFingerprint, cond)
	}
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
