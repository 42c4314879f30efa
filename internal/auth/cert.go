// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// SelfSignedCertificate returns a serving certificate for hosts (names or
// IP addresses), valid for a year, with a new key.
func SelfSignedCertificate(hosts []string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	return SelfSignedCertificateFor(key, hosts)
}

// SelfSignedCertificateFor returns a serving certificate for hosts, valid
// for a year, with key. The auth service needs no certificate chain: peers
// pin its public key on first contact (KeyFingerprint), which stays the
// same across restarts and new certificates as long as the key does.
func SelfSignedCertificateFor(key *ecdsa.PrivateKey, hosts []string) (tls.Certificate, error) {
	_, tmpl, err := servingTemplate("liqo-auth", hosts)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("preparing the auth service certificate: %w", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("signing the auth service certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// KeyFingerprint returns the SHA-256 of a certificate's public key (its
// SubjectPublicKeyInfo) as lower-case hex: what peers pin of an auth
// service, so that a renewed certificate with the same key stays trusted.
func KeyFingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:])
}

// newTemplate returns a new P-256 key and a certificate template with a
// random serial, valid from an hour ago (clock skew) for lifetime.
func newTemplate(commonName string, lifetime time.Duration) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	return key, &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(lifetime),
	}, nil
}

// servingTemplate returns a new key and the template of a serving
// certificate for hosts (names or IP addresses), valid for a year.
func servingTemplate(commonName string, hosts []string) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, tmpl, err := newTemplate(commonName, 365*24*time.Hour)
	if err != nil {
		return nil, nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return key, tmpl, nil
}

// NewCA returns a self-signed CA (PEM certificate and key) valid for ten
// years: the controller manager's webhook CA, whose certificate the
// ValidatingWebhookConfiguration carries as its caBundle.
func NewCA(commonName string) (certPEM, keyPEM []byte, err error) {
	key, tmpl, err := newTemplate(commonName, 10*365*24*time.Hour)
	if err != nil {
		return nil, nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// ServingCertificate returns a serving certificate for hosts signed by the
// CA (PEM), valid for a year.
func ServingCertificate(caCertPEM, caKeyPEM []byte, hosts []string) (tls.Certificate, error) {
	ca, err := tls.X509KeyPair(caCertPEM, caKeyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("loading the CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return tls.Certificate{}, err
	}
	key, tmpl, err := servingTemplate("liqo-webhook", hosts)
	if err != nil {
		return tls.Certificate{}, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), ca.PrivateKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Certificate[0]}, PrivateKey: key}, nil
}
