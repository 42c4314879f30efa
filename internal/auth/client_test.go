// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// pinnedServer serves the exchange and /ids with a certificate of key,
// counting the requests that reach it.
func pinnedServer(t *testing.T, key *ecdsa.PrivateKey, issuer Issuer) (*httptest.Server, *int) {
	t.Helper()
	cert, err := SelfSignedCertificateFor(key, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Issuer: issuer, Token: func(context.Context) (string, error) { return testToken, nil }, PerSource: 1000, PerSourceBurst: 1000,
		Identity: func(context.Context) (*Identity, error) {
			return &Identity{ClusterID: "provider", CACert: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}))}, nil
		}}
	n := new(int)
	h := s.Handler()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { *n++; h.ServeHTTP(w, r) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, n
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestPinnedKey: a client pinning the auth service's key talks to a
// service presenting it, with a new certificate too, and sends nothing to
// one presenting another key, failing with a KeyMismatchError that names
// both.
func TestPinnedKey(t *testing.T) {
	real, other := newKey(t), newKey(t)
	first, err := SelfSignedCertificateFor(real, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(first.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pin := KeyFingerprint(leaf)

	// The same key under a new certificate (a restart, a new address).
	srv, _ := pinnedServer(t, real, &stubIssuer{})
	if _, err := RequestIdentity(t.Context(), srv.URL, testToken, sampleRequest, ClientOptions{InsecureSkipVerify: true, PinnedKey: pin}); err != nil {
		t.Fatalf("exchange with the pinned key: %v", err)
	}

	issuer := &stubIssuer{}
	impostor, reached := pinnedServer(t, other, issuer)
	_, err = RequestIdentity(t.Context(), impostor.URL, testToken, sampleRequest, ClientOptions{InsecureSkipVerify: true, PinnedKey: pin})
	var mismatch *KeyMismatchError
	if !errors.As(err, &mismatch) || mismatch.Pinned != pin || mismatch.Presented == "" || mismatch.Presented == pin {
		t.Fatalf("exchange with another key: %v, want a KeyMismatchError naming both keys", err)
	}
	if *reached != 0 || issuer.calls != 0 {
		t.Fatalf("%d requests reached the impostor; a pinned client must send nothing", *reached)
	}
	// GetIdentity reports the key it saw, and honours the pin as well.
	resp, err := GetIdentity(t.Context(), impostor.URL, ClientOptions{InsecureSkipVerify: true})
	if err != nil || resp.ServingKey != mismatch.Presented {
		t.Fatalf("GetIdentity without a pin: %+v, %v; want the identity and key %s", resp, err, mismatch.Presented)
	}
	if _, err := GetIdentity(t.Context(), impostor.URL, ClientOptions{InsecureSkipVerify: true, PinnedKey: pin}); !errors.As(err, &mismatch) {
		t.Fatalf("GetIdentity with a pin: %v, want a KeyMismatchError", err)
	}
}
