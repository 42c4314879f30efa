// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package foundation_test

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/ctl/add"
	"github.com/liqo-go/liqo/internal/ctl/generateaddcommand"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestGenerateAddCommand: the printed command carries this cluster's auth
// URL, ClusterID and the peering token the controller manager created.
func TestGenerateAddCommand(t *testing.T) {
	_, m := members()
	framework.LogOnFailure(t, m)
	var out bytes.Buffer
	o := &generateaddcommand.Options{Kubeconfig: m.Kubeconfig, Namespace: install.DefaultNamespace}
	if err := o.Run(t.Context(), &out); err != nil {
		t.Fatalf("generate-add-command: %v", err)
	}
	var secret corev1.Secret
	if err := framework.Client(t, m).Get(t.Context(), client.ObjectKey{Namespace: install.DefaultNamespace, Name: auth.TokenSecret}, &secret); err != nil {
		t.Fatal(err)
	}
	token := string(secret.Data[auth.TokenKey])
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(token) {
		t.Fatalf("peering token %q is not 256 random bits in hex", token)
	}
	want := fmt.Sprintf("liqoctl add --auth-url %s --id %s --token %s\n", m.AuthURL, m.ClusterID, token)
	if out.String() != want {
		t.Fatalf("printed %q, want %q", out.String(), want)
	}
}

// TestAddWithTheGeneratedCommand: cluster A runs the line B's
// generate-add-command printed; A then has a manual, joined ForeignCluster
// for B and keeps B's token. A wrong ID or an unreachable URL is refused
// with an error that says which.
func TestAddWithTheGeneratedCommand(t *testing.T) {
	a, b := members()
	framework.LogOnFailure(t, a, b)
	var out bytes.Buffer
	if err := (&generateaddcommand.Options{Kubeconfig: b.Kubeconfig, Namespace: install.DefaultNamespace}).Run(t.Context(), &out); err != nil {
		t.Fatal(err)
	}
	fields := regexp.MustCompile(`--auth-url (\S+) --id (\S+) --token (\S+)`).FindStringSubmatch(out.String())
	if fields == nil {
		t.Fatalf("unexpected output %q", out.String())
	}
	o := &add.Options{Kubeconfig: a.Kubeconfig, Namespace: install.DefaultNamespace, AuthURL: fields[1], ClusterID: fields[2], Token: fields[3], Timeout: 5 * time.Second}

	bad := *o
	bad.ClusterID = "someone-else"
	if err := bad.Run(t.Context(), io.Discard); err == nil || !strings.Contains(err.Error(), "belongs to cluster "+b.ClusterID) {
		t.Fatalf("a wrong ID: got %v, want an error naming the real cluster", err)
	}
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	bad = *o
	bad.AuthURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	if err := bad.Run(t.Context(), io.Discard); err == nil || !strings.Contains(err.Error(), "cannot be reached") {
		t.Fatalf("an unreachable URL: got %v, want a 'cannot be reached' error", err)
	}

	if err := o.Run(t.Context(), io.Discard); err != nil {
		t.Fatalf("liqoctl add: %v", err)
	}
	c := framework.Client(t, a)
	fc, err := foreigncluster.Find(t.Context(), c, b.ClusterID)
	if err != nil || fc == nil {
		t.Fatalf("no ForeignCluster for %s after add (%v)", b.Name, err)
	}
	framework.DeleteOnCleanup(t, c, fc)
	if !fc.Spec.Join || fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] != string(discoveryv1alpha1.ManualDiscovery) || fc.Spec.ForeignAuthURL != b.AuthURL {
		t.Fatalf("ForeignCluster join=%v type=%s url=%s; want joined, Manual, %s", fc.Spec.Join, fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel], fc.Spec.ForeignAuthURL, b.AuthURL)
	}
	var secret corev1.Secret
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: install.DefaultNamespace, Name: add.TokenSecretName(b.ClusterID)}, &secret); err != nil {
		t.Fatal(err)
	}
	if string(secret.Data[auth.TokenKey]) != fields[3] {
		t.Fatal("the stored token is not the one given")
	}
}
