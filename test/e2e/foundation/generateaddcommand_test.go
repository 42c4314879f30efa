// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package foundation_test

import (
	"bytes"
	"fmt"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/ctl/generateaddcommand"
	"github.com/liqo-go/liqo/internal/install"
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
