// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RemoteSecretName is the Secret, in the consumer's Liqo namespace, that
// holds what the consumer needs in provider: its own identity there, and
// the virtual kubelet's (key VirtualKubeletKubeconfigKey).
func RemoteSecretName(provider string) string { return "liqo-remote-identity-" + provider }

// Keys of the Secret RemoteSecretName(provider), which a consumer keeps in
// its Liqo namespace for each provider it peers with. Only this cluster
// writes it, from what the authenticated token exchange and the provider's
// answer to its PeeringRequest returned.
const (
	// KeyKey and CertKey are the consumer's own key and certificate in
	// the provider.
	KeyKey  = "tls.key"
	CertKey = "tls.crt"
	// CAKey and ServerKey are the provider's CA and API server address, as
	// the token exchange authenticated them.
	CAKey     = "ca.crt"
	ServerKey = "server"
	// ProviderCertKey is the certificate this cluster issued to the
	// provider.
	ProviderCertKey = "provider.crt"
	// VirtualKubeletKeyKey, VirtualKubeletCSRKey and VirtualKubeletCertKey
	// are the virtual kubelet's key, its CSR and the certificate the
	// provider issued for it.
	VirtualKubeletKeyKey  = "virtual-kubelet.key"
	VirtualKubeletCSRKey  = "virtual-kubelet.csr"
	VirtualKubeletCertKey = "virtual-kubelet.crt"
	// VirtualKubeletKubeconfigKey holds the same identity as a kubeconfig,
	// for an operator to use by hand; no controller reads it.
	VirtualKubeletKubeconfigKey = "virtual-kubelet.kubeconfig"
)

// ConsumerCredentials returns this cluster's own identity in a provider
// (liqo-consumer-<id>) from the Secret RemoteSecretName(provider), as
// VirtualKubeletCredentials does for the virtual kubelet's.
func ConsumerCredentials(secret *corev1.Secret) (*Credentials, error) {
	d := secret.Data
	for _, k := range []string{ServerKey, CAKey, CertKey, KeyKey} {
		if len(d[k]) == 0 {
			return nil, fmt.Errorf("secret %s/%s has no %s yet", secret.Namespace, secret.Name, k)
		}
	}
	return &Credentials{Server: string(d[ServerKey]), CACert: d[CAKey], Certificate: d[CertKey], Key: d[KeyKey]}, nil
}

// VirtualKubeletCredentials returns the virtual kubelet's identity in a
// provider from the consumer's Secret RemoteSecretName(provider): the
// provider's address and CA, the certificate it issued and the key that
// never left this cluster. Nothing a peer names is read: no kubeconfig, so
// no tokenFile, exec plugin or proxy a peer could have chosen.
func VirtualKubeletCredentials(secret *corev1.Secret) (*Credentials, error) {
	d := secret.Data
	for _, k := range []string{ServerKey, CAKey, VirtualKubeletCertKey, VirtualKubeletKeyKey} {
		if len(d[k]) == 0 {
			return nil, fmt.Errorf("secret %s/%s has no %s yet", secret.Namespace, secret.Name, k)
		}
	}
	return &Credentials{Server: string(d[ServerKey]), CACert: d[CAKey], Certificate: d[VirtualKubeletCertKey], Key: d[VirtualKubeletKeyKey]}, nil
}

// maxClients bounds the cache: identities are renewed, and the clients of
// old ones must not pile up.
const maxClients = 256

// Clients caches one controller-runtime client per remote identity, so that
// calls to a peer made every few hundred milliseconds reuse the client's
// REST mapping instead of discovering the peer's API again each time. The
// zero value is ready to use; it is safe for concurrent use.
type Clients struct {
	mu    sync.Mutex
	byKey map[string]client.Client
}

// For returns the client for cfg, creating it the first time.
func (c *Clients) For(cfg *rest.Config, scheme *runtime.Scheme) (client.Client, error) {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(cfg.Host), cfg.CAData, cfg.CertData, cfg.KeyData, []byte(cfg.Timeout.String())} {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	key := hex.EncodeToString(h.Sum(nil))
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.byKey[key]; ok {
		return cl, nil
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	if c.byKey == nil || len(c.byKey) >= maxClients {
		c.byKey = map[string]client.Client{}
	}
	c.byKey[key] = cl
	return cl, nil
}
