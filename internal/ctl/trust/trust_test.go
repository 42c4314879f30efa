// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package trust

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
)

func cluster(annotations map[string]string, st discoveryv1alpha1.ForeignClusterStatus) *discoveryv1alpha1.ForeignCluster {
	return &discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: "provider", Annotations: annotations}, Status: st}
}

// TestTrustPlan: what trust changes follows what is pending, and a
// fingerprint checked out of band that is not the one presented is
// refused.
func TestPlan(t *testing.T) {
	pendingCA := discoveryv1alpha1.ForeignClusterStatus{TrustedCAFingerprint: "sha256:old", PendingCAFingerprint: "sha256:new", AuthServiceKeyFingerprint: "sha256:key"}
	plan, err := Plan(cluster(nil, pendingCA), "", "")
	if err != nil || len(plan) != 1 || plan[0].Annotation != discoveryv1alpha1.TrustCAAnnotation || plan[0].Value != "sha256:new" {
		t.Fatalf("changed CA: plan %+v, %v; want the trust-ca annotation set to the new fingerprint", plan, err)
	}
	if _, err := Plan(cluster(nil, pendingCA), "sha256:new", ""); err != nil {
		t.Fatalf("the expected CA refused: %v", err)
	}
	if _, err := Plan(cluster(nil, pendingCA), "sha256:forged", ""); err == nil || !strings.Contains(err.Error(), "sha256:new") {
		t.Fatalf("another CA than the one presented: %v, want refused, naming the one presented", err)
	}

	pendingKey := discoveryv1alpha1.ForeignClusterStatus{TrustedCAFingerprint: "sha256:ca", AuthServiceKeyFingerprint: "sha256:k1", PendingAuthKeyFingerprint: "sha256:k2"}
	plan, err = Plan(cluster(nil, pendingKey), "sha256:ca", "sha256:k2")
	if err != nil || len(plan) != 1 || plan[0].Annotation != discoveryv1alpha1.TrustAuthKeyAnnotation || plan[0].Value != "sha256:k2" {
		t.Fatalf("changed key: plan %+v, %v", plan, err)
	}
	if _, err := Plan(cluster(nil, pendingKey), "", "sha256:k3"); err == nil {
		t.Fatal("another key than the one presented was accepted")
	}

	untrusted := map[string]string{discoveryv1alpha1.UntrustedCAAnnotation: "true"}
	plan, err = Plan(cluster(untrusted, pendingKey), "", "")
	if err != nil || len(plan) != 2 || plan[0].Annotation != discoveryv1alpha1.UntrustedCAAnnotation || plan[0].Value != "" {
		t.Fatalf("untrusted CA: plan %+v, %v; want the untrusted-ca annotation removed, then the key", plan, err)
	}

	// A flag names what was checked: nothing it does not name is trusted
	// along with it.
	both := discoveryv1alpha1.ForeignClusterStatus{TrustedCAFingerprint: "sha256:old", PendingCAFingerprint: "sha256:new",
		AuthServiceKeyFingerprint: "sha256:k1", PendingAuthKeyFingerprint: "sha256:k2"}
	if _, err := Plan(cluster(nil, both), "", "sha256:k2"); err == nil || !strings.Contains(err.Error(), "--ca") {
		t.Errorf("--auth-key alone with a CA pending too: %v, want refused", err)
	}
	if _, err := Plan(cluster(nil, both), "sha256:new", ""); err == nil || !strings.Contains(err.Error(), "--auth-key") {
		t.Errorf("--ca alone with a key pending too: %v, want refused", err)
	}
	if _, err := Plan(cluster(untrusted, pendingKey), "", "sha256:k2"); err == nil {
		t.Error("--auth-key alone trusted an untrusted CA again")
	}
	if plan, err := Plan(cluster(nil, both), "sha256:new", "sha256:k2"); err != nil || len(plan) != 2 {
		t.Errorf("both named: plan %+v, %v", plan, err)
	}
	// Untrusted, and presenting another CA than the one stored: both
	// changes, the new CA named.
	untrustedNew := discoveryv1alpha1.ForeignClusterStatus{TrustedCAFingerprint: "sha256:old", PendingCAFingerprint: "sha256:new"}
	plan, err = Plan(cluster(untrusted, untrustedNew), "sha256:new", "")
	if err != nil || len(plan) != 2 || plan[1].Annotation != discoveryv1alpha1.TrustCAAnnotation || plan[1].Value != "sha256:new" {
		t.Errorf("untrusted with another CA presented: plan %+v, %v", plan, err)
	}

	settled := discoveryv1alpha1.ForeignClusterStatus{TrustedCAFingerprint: "sha256:ca", AuthServiceKeyFingerprint: "sha256:k1"}
	if plan, err := Plan(cluster(nil, settled), "sha256:ca", "sha256:k1"); err != nil || len(plan) != 0 {
		t.Fatalf("nothing pending: plan %+v, %v", plan, err)
	}
	if _, err := Plan(cluster(nil, settled), "sha256:other", ""); err == nil {
		t.Fatal("a CA neither presented nor trusted was accepted")
	}
}

// TestUntrustPlan: untrust marks the CA untrusted once.
func TestUntrustPlan(t *testing.T) {
	st := discoveryv1alpha1.ForeignClusterStatus{TrustedCAFingerprint: "sha256:ca"}
	plan := UntrustPlan(cluster(nil, st))
	if len(plan) != 1 || plan[0].Annotation != discoveryv1alpha1.UntrustedCAAnnotation || plan[0].Value != "true" || !strings.Contains(plan[0].From, "sha256:ca") {
		t.Fatalf("plan %+v", plan)
	}
	if plan := UntrustPlan(cluster(map[string]string{discoveryv1alpha1.UntrustedCAAnnotation: "true"}, st)); len(plan) != 0 {
		t.Fatalf("already untrusted: plan %+v", plan)
	}
}

// TestConfirm: only y or yes goes on; no input at all asks for --yes.
func TestConfirm(t *testing.T) {
	for answer, want := range map[string]bool{"y\n": true, "YES\n": true, "yes": true, "\n": false, "n\n": false, "": false, "sure\n": false} {
		var out strings.Builder
		got, err := confirm(strings.NewReader(answer), &out, "Trust?")
		if err != nil || got != want {
			t.Errorf("answer %q: %v, %v; want %v", answer, got, err, want)
		}
		if !strings.Contains(out.String(), "Trust? [y/N]") {
			t.Errorf("the question was not asked: %q", out.String())
		}
	}
	if _, err := confirm(nil, &strings.Builder{}, "Trust?"); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Errorf("no input: %v, want a hint at --yes", err)
	}
}
