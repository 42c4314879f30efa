// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// TokenSecret holds this cluster's peering token, in the Liqo namespace.
	TokenSecret = "liqo-peering-token" //nolint:gosec // a Secret's name, not a credential
	// TokenKey is the token's key in TokenSecret.
	TokenKey = "token"
)

// EnsureToken returns the cluster's peering token, creating a random one
// (256 bits, hex) the first time. Whoever holds it may ask this cluster for
// a peering identity, so it lives in a Secret.
func EnsureToken(ctx context.Context, c client.Client, namespace string) (string, error) {
	key := client.ObjectKey{Namespace: namespace, Name: TokenSecret}
	var secret corev1.Secret
	err := c.Get(ctx, key, &secret)
	if err == nil && len(secret.Data[TokenKey]) > 0 {
		return string(secret.Data[TokenKey]), nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("reading the peering token: %w", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b)
	if err == nil { // the Secret exists without a token: fill it in
		secret.Data = map[string][]byte{TokenKey: []byte(token)}
		if err := c.Update(ctx, &secret); err != nil {
			return "", fmt.Errorf("writing the peering token: %w", err)
		}
		return token, nil
	}
	secret = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: TokenSecret},
		Data:       map[string][]byte{TokenKey: []byte(token)},
	}
	if err := c.Create(ctx, &secret); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return EnsureToken(ctx, c, namespace)
		}
		return "", fmt.Errorf("creating the peering token: %w", err)
	}
	return token, nil
}

// RemoteTokenSecretName is the Secret, in the Liqo namespace, that holds
// the peering token of remote cluster clusterID (key TokenKey), as stored
// by liqoctl add.
func RemoteTokenSecretName(clusterID string) string { return "liqo-remote-token-" + clusterID }
