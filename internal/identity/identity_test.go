// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package identity

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"
)

func csrPEM(t *testing.T, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestCheckCSR(t *testing.T) {
	_, good, err := NewKeyAndCSR("liqo-consumer-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckCSR(good, "liqo-consumer-a"); err != nil {
		t.Fatalf("a CSR from NewKeyAndCSR: %v", err)
	}
	tests := []struct {
		name string
		csr  []byte
		want string
	}{
		{"another user", good, "only \"liqo-consumer-b\""},
		{"a group (system:masters)", csrPEM(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "liqo-consumer-b", Organization: []string{"system:masters"}}}), "no groups"},
		{"an alternative name", csrPEM(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "liqo-consumer-b"}, DNSNames: []string{"x"}}), "alternative names"},
		{"not PEM", []byte("hello"), "not a PEM"},
		{"a certificate, not a request", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}}), "not a PEM CERTIFICATE REQUEST"},
		{"garbage DER", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{1, 2, 3}}), "parsing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckCSR(tc.csr, "liqo-consumer-b")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
