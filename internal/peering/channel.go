// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
)

// Channels are this cluster's ways into its peers: the identities its
// peerings gave it in each peer's tenant namespace. Towards a provider,
// the virtual kubelet's (from the identity Secret the outgoing peering
// keeps); towards a consumer, the provider's (the kubeconfig in the peer
// Secret the incoming peering keeps). Every part of this cluster that
// talks to a peer (the Broadcaster, the network's publishing, a broker's
// services) goes through them.
type Channels struct {
	// Reader reads the peer Secrets: a direct client, as they are not
	// cached (docs/security.md).
	Reader client.Reader
	// Namespace is Liqo's namespace, which holds them.
	Namespace string
	// LocalClusterID breaks the tie when two peers consume from each
	// other.
	LocalClusterID string
	// Remotes holds the virtual kubelet's identity in each provider.
	Remotes *identity.Remotes
}

// AsConsumer returns the config of this cluster's identity in provider
// (its virtual kubelet's), or nil when this cluster does not consume from
// it (or not yet).
func (c *Channels) AsConsumer(ctx context.Context, provider string) *rest.Config {
	if c.Remotes == nil {
		return nil
	}
	cfg, err := c.Remotes.Config(ctx, provider)
	if err != nil {
		return nil
	}
	return cfg
}

// ProviderKubeconfig returns the kubeconfig of this cluster's identity
// in consumer (the provider's), or nil when this cluster does not provide
// to it (or the consumer has not sent its certificate yet).
func (c *Channels) ProviderKubeconfig(ctx context.Context, consumer string) ([]byte, error) {
	var secret corev1.Secret
	err := c.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: PeerSecretName(consumer)}, &secret)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return secret.Data[PeerSecretKubeconfig], nil
}

// AsProvider returns the config of this cluster's identity in consumer,
// or nil (see ProviderKubeconfig).
func (c *Channels) AsProvider(ctx context.Context, consumer string) (*rest.Config, error) {
	kc, err := c.ProviderKubeconfig(ctx, consumer)
	if err != nil || len(kc) == 0 {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig for %s: %w", consumer, err)
	}
	return cfg, nil
}

// Network returns the channel the network fabric uses with peer, and
// this cluster's gateway's role in the tunnel: the client towards a
// provider, the server towards a consumer; when each consumes from the
// other, one tunnel, whose server is the cluster with the greater ID
// (both sides decide alike). Nil, "" when there is no channel yet.
func (c *Channels) Network(ctx context.Context, peer string) (*rest.Config, netv1alpha1.GatewayRole, error) {
	asConsumer := c.AsConsumer(ctx, peer)
	asProvider, err := c.AsProvider(ctx, peer)
	if err != nil {
		return nil, "", err
	}
	switch {
	case asConsumer != nil && asProvider != nil:
		if c.LocalClusterID > peer {
			return asConsumer, netv1alpha1.GatewayServer, nil
		}
		return asConsumer, netv1alpha1.GatewayClient, nil
	case asProvider != nil:
		return asProvider, netv1alpha1.GatewayServer, nil
	case asConsumer != nil:
		return asConsumer, netv1alpha1.GatewayClient, nil
	}
	return nil, "", nil
}
