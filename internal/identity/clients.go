// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RemoteSecretName is the Secret, in the consumer's Liqo namespace, that
// holds what the consumer needs in provider: its own identity there, and
// the virtual kubelet's (key VirtualKubeletKubeconfigKey).
func RemoteSecretName(provider string) string { return "liqo-remote-identity-" + provider }

// VirtualKubeletKubeconfigKey is the key of the virtual kubelet's
// kubeconfig in RemoteSecretName.
const VirtualKubeletKubeconfigKey = "virtual-kubelet.kubeconfig"

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
