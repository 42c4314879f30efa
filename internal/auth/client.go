// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxIdentityBytes bounds what a peer can make us read.
const maxIdentityBytes = 64 << 10

// ClientOptions say how to reach a remote auth service.
type ClientOptions struct {
	// InsecureSkipVerify accepts any serving certificate; the certificate
	// presented is still returned, so that the caller can pin it.
	InsecureSkipVerify bool
	// RootCAs verifies the serving certificate when not insecure; nil means
	// the system pool.
	RootCAs *x509.CertPool
	// PinnedKey, when set, is the KeyFingerprint the auth service must
	// present: any other key fails the TLS handshake with a
	// *KeyMismatchError, before anything is sent.
	PinnedKey string
	// Timeout bounds the whole request; defaults to 5 seconds.
	Timeout time.Duration
}

// KeyMismatchError is a TLS handshake refused because the auth service
// presented a key other than the pinned one.
type KeyMismatchError struct {
	// Pinned is the fingerprint expected, Presented the one found.
	Pinned, Presented string
}

func (e *KeyMismatchError) Error() string {
	return fmt.Sprintf("the auth service presented key %s, not the pinned %s", e.Presented, e.Pinned)
}

// verifyPinnedKey checks the leaf certificate of a TLS connection against
// the pinned key fingerprint.
func (o ClientOptions) verifyPinnedKey(cs tls.ConnectionState) error {
	if o.PinnedKey == "" {
		return nil
	}
	if len(cs.PeerCertificates) == 0 {
		return &KeyMismatchError{Pinned: o.PinnedKey}
	}
	if got := KeyFingerprint(cs.PeerCertificates[0]); got != o.PinnedKey {
		return &KeyMismatchError{Pinned: o.PinnedKey, Presented: got}
	}
	return nil
}

// Response is what GetIdentity learned.
type Response struct {
	// Identity is the remote cluster's identity.
	Identity *Identity
	// ServingKey is the KeyFingerprint of the auth service's own
	// certificate, for trust on first use.
	ServingKey string
}

// GetIdentity asks the auth service at authURL for its cluster's identity.
// Errors say whether the service was unreachable, untrusted, or answered
// something that is not an identity.
func GetIdentity(ctx context.Context, authURL string, o ClientOptions) (*Response, error) {
	u, err := url.Parse(authURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("auth URL %q is not an https URL", authURL)
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	client := o.httpClient()
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(authURL, "/")+IdentityPath, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reaching the auth service at %s: %w", authURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("auth service at %s answered %s: %s", authURL, resp.Status, strings.TrimSpace(string(body)))
	}
	var id Identity
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxIdentityBytes))
	if err := dec.Decode(&id); err != nil {
		return nil, fmt.Errorf("auth service at %s answered something that is not an identity: %w", authURL, err)
	}
	if id.ClusterID == "" {
		return nil, fmt.Errorf("auth service at %s answered an identity without a ClusterID", authURL)
	}
	if _, err := Fingerprint([]byte(id.CACert)); err != nil {
		return nil, fmt.Errorf("auth service at %s answered an invalid CA certificate: %w", authURL, err)
	}
	out := &Response{Identity: &id}
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		out.ServingKey = KeyFingerprint(resp.TLS.PeerCertificates[0])
	}
	return out, nil
}
