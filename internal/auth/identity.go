// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package auth

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
)

// IdentityPath is where the auth service serves the cluster's identity, as
// in the seed protocol.
const IdentityPath = "/ids"

// Identity is what a cluster's auth service says about it.
type Identity struct {
	// ClusterID is the cluster's stable identity.
	ClusterID string `json:"clusterID"`
	// ClusterName is its human-readable name.
	ClusterName string `json:"clusterName"`
	// APIServerURL is the URL peers reach its API server at.
	APIServerURL string `json:"apiServerURL"`
	// Namespace is its Liqo namespace.
	Namespace string `json:"namespace"`
	// CACert is the PEM certificate of the CA that signs its API server's
	// serving certificate and the identities it issues.
	CACert string `json:"caCert"`
}

// Fingerprint returns the SHA-256 fingerprint of the first certificate in a
// PEM bundle, as lower-case hex: what ForeignCluster status records and what
// an operator compares when trusting a new CA.
func Fingerprint(caPEM []byte) (string, error) {
	block, _ := pem.Decode(caPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", errors.New("no PEM certificate")
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return "", fmt.Errorf("parsing CA certificate: %w", err)
	}
	sum := sha256.Sum256(block.Bytes)
	return hex.EncodeToString(sum[:]), nil
}
