// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package controllermanager

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/clusterconfig"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/network/exposure"
	"github.com/liqo-go/liqo/internal/network/publishing"
	"github.com/liqo-go/liqo/internal/network/remapping"
	"github.com/liqo-go/liqo/internal/peering"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// setupNetwork adds the network fabric's controllers: how this cluster
// sees each peer (remapping) and what it tells each peer (publishing).
// The channel to a peer is the identity the peering gave this cluster in
// the peer's tenant namespace: the virtual kubelet's when this cluster
// consumes from the peer (its gateway is then the client), the
// provider's when it provides (the server).
func setupNetwork(mgr ctrl.Manager, o *Options, direct client.Client, clusterID string, remotes *identity.Remotes, store *clusterconfig.Store) error {
	config := func() *configv1alpha1.ClusterConfig { return store.Get() }
	if err := (&remapping.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: config, Changes: store.Subscribe(),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the remapping controller: %w", err)
	}
	channels := &peering.Channels{Reader: direct, Namespace: o.Namespace, LocalClusterID: clusterID, Remotes: remotes}
	endpoint := func(ctx context.Context) (*netv1alpha1.GatewayEndpoint, error) {
		if o.GatewayEndpoint != "" {
			host, port, err := net.SplitHostPort(o.GatewayEndpoint)
			if err != nil {
				return nil, fmt.Errorf("--gateway-endpoint=%s: %w", o.GatewayEndpoint, err)
			}
			p, err := strconv.ParseInt(port, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("--gateway-endpoint=%s: %w", o.GatewayEndpoint, err)
			}
			return &netv1alpha1.GatewayEndpoint{Host: host, Port: int32(p)}, nil
		}
		var pods corev1.PodList
		if err := mgr.GetClient().List(ctx, &pods, client.InNamespace(o.Namespace), client.MatchingLabels{netv1alpha1.GatewayComponentLabel: netv1alpha1.GatewayComponentValue}); err != nil {
			return nil, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Status.HostIP != "" {
				return &netv1alpha1.GatewayEndpoint{Host: p.Status.HostIP, Port: o.GatewayPort}, nil
			}
		}
		return nil, nil
	}
	if err := (&exposure.Reconciler{Client: mgr.GetClient(),
		Introducers: peering.IntroducersOf(mgr.GetClient(), func() *configv1alpha1.ClusterConfig { return store.Get() })}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the exposure controller: %w", err)
	}
	if err := (&publishing.Reconciler{
		Client: mgr.GetClient(), LocalClusterID: clusterID, Namespace: o.Namespace, Config: config, Changes: store.Subscribe(),
		Peer: channels.Network, Endpoint: endpoint,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the publishing controller: %w", err)
	}
	return nil
}
