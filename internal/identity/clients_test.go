// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package identity

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestConsumerCredentials: this cluster's own identity in a provider is
// read from its keys only, and a Secret missing one says which.
func TestConsumerCredentials(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "liqo", Name: RemoteSecretName("p")}, Data: map[string][]byte{
		ServerKey: []byte("https://p:6443"), CAKey: []byte("ca"), CertKey: []byte("cert"), KeyKey: []byte("key"),
		VirtualKubeletCertKey: []byte("vk-cert"), VirtualKubeletKeyKey: []byte("vk-key"),
	}}
	c, err := ConsumerCredentials(secret)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server != "https://p:6443" || string(c.CACert) != "ca" || string(c.Certificate) != "cert" || string(c.Key) != "key" {
		t.Errorf("credentials %+v, want the consumer's own keys", c)
	}
	delete(secret.Data, CertKey)
	if _, err := ConsumerCredentials(secret); err == nil || !strings.Contains(err.Error(), CertKey) {
		t.Errorf("without %s: %v, want an error naming it", CertKey, err)
	}
}
