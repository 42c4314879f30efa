// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServingKeySecret is the Secret, in the Liqo namespace, that holds the
// auth service's private key (key ServingKeyKey). Peers pin its public
// key on first contact: it must survive restarts, new addresses and
// replicas, so it is kept, not made at each start.
const ServingKeySecret = "liqo-auth-serving-key" //nolint:gosec // a Secret's name, not a credential

// ServingKeyKey is the PEM EC private key in ServingKeySecret.
const ServingKeyKey = "tls.key"

// EnsureServingKey returns the auth service's key, creating it on first
// use. A Secret whose key cannot be parsed is an error, not replaced:
// replacing it would make every peer see a changed key.
func EnsureServingKey(ctx context.Context, c client.Client, namespace string) (*ecdsa.PrivateKey, error) {
	key := client.ObjectKey{Namespace: namespace, Name: ServingKeySecret}
	var secret corev1.Secret
	err := c.Get(ctx, key, &secret)
	if err == nil {
		return parseServingKey(secret.Data[ServingKeyKey])
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading the auth service key: %w", err)
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	secret = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ServingKeySecret},
		Data:       map[string][]byte{ServingKeyKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})},
	}
	if err := c.Create(ctx, &secret); err != nil {
		if apierrors.IsAlreadyExists(err) { // another replica was first
			return EnsureServingKey(ctx, c, namespace)
		}
		return nil, fmt.Errorf("storing the auth service key: %w", err)
	}
	return k, nil
}

func parseServingKey(b []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("the auth service key Secret " + ServingKeySecret + " holds no PEM key under " + ServingKeyKey)
	}
	k, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the auth service key in Secret %s: %w", ServingKeySecret, err)
	}
	return k, nil
}
