// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering_test

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/ctl/add"
	"github.com/liqo-go/liqo/internal/ctl/remove"
	"github.com/liqo-go/liqo/internal/ctl/status"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestLiqoctl: add reports a wrong token, then peers with the right one;
// status shows the phases in a table; remove unpeers and says how it went.
func TestLiqoctl(t *testing.T) {
	a, b, _ := members()
	framework.LogOnFailure(t, a, b)
	ctx := t.Context()
	o := &add.Options{Kubeconfig: a.Kubeconfig, Namespace: install.DefaultNamespace, AuthURL: b.AuthURL, ClusterID: b.ClusterID,
		Token: strings.Repeat("0", 64), Timeout: 5 * time.Second, Wait: 30 * time.Second}
	t.Cleanup(func() { unpeer(t, a, b) })
	err := o.Run(ctx, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "the peering token is wrong") {
		t.Fatalf("add with a wrong token: %v, want an error saying the token is wrong", err)
	}

	o.Token = readToken(t, b)
	var out bytes.Buffer
	if err := o.Run(ctx, &out); err != nil {
		t.Fatalf("add with the right token: %v", err)
	}
	if !strings.Contains(out.String(), "Peering requested") {
		t.Fatalf("add printed %q, want it to report the peering requested", out.String())
	}
	waitCondition(t, a, b.ClusterID, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionTrue, discoveryv1alpha1.ReasonAccepted, 30*time.Second)

	out.Reset()
	if err := (&status.Options{Kubeconfig: a.Kubeconfig}).Run(ctx, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[1], b.ClusterID) ||
		len(strings.Fields(lines[1])) < 9 || strings.Fields(lines[1])[5] != "True" || strings.Fields(lines[1])[6] != "True" {
		t.Fatalf("status printed:\n%s\nwant a header and %s with Authenticated and Outgoing True", out.String(), b.ClusterID)
	}
	out.Reset()
	if err := (&status.Options{Kubeconfig: b.Kubeconfig}).Run(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), a.ClusterID) || !strings.Contains(out.String(), "IncomingPeering") || !strings.Contains(out.String(), "true") {
		t.Fatalf("status on the provider printed:\n%s\nwant %s as an incoming peering", out.String(), a.ClusterID)
	}

	out.Reset()
	if err := (&remove.Options{Kubeconfig: a.Kubeconfig, Cluster: b.ClusterID, Timeout: time.Minute}).Run(ctx, &out); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if !strings.Contains(out.String(), "removed on both sides") {
		t.Fatalf("remove printed %q, want the unpeering confirmed on both sides", out.String())
	}
	waitNoPeeringObjects(t, a, b, 30*time.Second)
	// B known with another CA than the one it serves now: add refuses and
	// says how to trust the new one.
	inA := framework.Client(t, a)
	var caSecret corev1.Secret
	if err := inA.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: foreigncluster.CASecretName(b.ClusterID)}, &caSecret); err != nil {
		t.Fatal(err)
	}
	saved := caSecret.DeepCopy()
	otherCA, _, err := auth.NewCA("not-b")
	if err != nil {
		t.Fatal(err)
	}
	caSecret.Data[foreigncluster.CASecretKey] = otherCA
	if err := inA.Update(ctx, &caSecret); err != nil {
		t.Fatal(err)
	}
	err = o.Run(ctx, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "CA mismatch") || !strings.Contains(err.Error(), "liqoctl trust "+b.ClusterID+" --ca ") {
		t.Fatalf("add with a changed CA: %v, want a CA mismatch error saying how to trust the new CA", err)
	}
	caSecret.Data = saved.Data
	if err := inA.Update(ctx, &caSecret); err != nil {
		t.Fatal(err)
	}

	err = (&remove.Options{Kubeconfig: a.Kubeconfig, Cluster: "no-such-cluster", Timeout: time.Second}).Run(ctx, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no ForeignCluster") {
		t.Fatalf("remove of an unknown cluster: %v, want a clear error", err)
	}
}
