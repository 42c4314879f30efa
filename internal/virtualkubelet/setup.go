// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package virtualkubelet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/liqo-go/liqo/internal/network/translation"
	"github.com/liqo-go/liqo/internal/virtualkubelet/api"
	"github.com/liqo-go/liqo/internal/virtualkubelet/claims"
	"github.com/liqo-go/liqo/internal/virtualkubelet/node"
	"github.com/liqo-go/liqo/internal/virtualkubelet/objects"
	"github.com/liqo-go/liqo/internal/virtualkubelet/pods"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
)

// Options are what the virtual kubelet runs with. A provider other than
// the remote cluster (the broker's aggregator) is a Providers and a Health
// of its own; nothing else changes.
type Options struct {
	// LocalClusterID labels what this cluster makes in the providers.
	LocalClusterID string
	// Providers hold the pods and the copies of their objects.
	Providers provider.Providers
	// Health says whether each provider can be reached.
	Health provider.Health
	// Kubelet, if set, serves the virtual nodes' kubelet API at
	// KubeletAddress (it must already be added to the manager).
	Kubelet        *api.Server
	KubeletAddress string
	// Removed, if set, is called with a provider whose virtual node went.
	Removed func(provider string)
	// PodWorkers is how many pods are reflected at once; zero means 32.
	PodWorkers int
	// Addresses shows addresses across the boundary with each provider;
	// nil: as the peers' TunnelEndpoints say (translation.Peers).
	Addresses provider.Addresses
	// NoTranslation leaves the network fabric out: provider pod
	// addresses are not shown (nothing is agreed to reach them), and no
	// EndpointSlice is reflected into the providers.
	NoTranslation bool
	// UntaintedNodes leaves the virtual nodes untainted (node.Reconciler's
	// Untainted).
	UntaintedNodes bool
	// OpaqueNodeNames names new virtual nodes liqo-<random>
	// (node.Reconciler's Opaque): an aggregating broker's.
	OpaqueNodeNames bool
	// Transit, on an aggregator, assigns the addresses its consumers
	// reach their pods at (pods.Reflector's Transit), and its providers
	// the consumers' endpoints (objects.Reflector's).
	Transit interface {
		pods.Transit
		objects.Transit
	}
}

// Setup adds the virtual kubelet to mgr: the virtual nodes, the pod
// reflector with token projection, and the object reflectors.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) error {
	if o.LocalClusterID == "" || o.Providers == nil || o.Health == nil {
		return errors.New("the virtual kubelet needs LocalClusterID, Providers and Health")
	}
	if err := node.IndexPods(ctx, mgr); err != nil {
		return err
	}
	if err := objects.IndexPodsBySecret(ctx, mgr); err != nil {
		return err
	}
	nodes := &node.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Health: o.Health, Removed: o.Removed,
		Untainted: o.UntaintedNodes, Opaque: o.OpaqueNodeNames,
	}
	if o.Kubelet != nil {
		nodes.Kubelet, nodes.KubeletAddress = o.Kubelet, o.KubeletAddress
	}
	if err := nodes.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the virtual node controller: %w", err)
	}
	podReflector := &pods.Reflector{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Providers: o.Providers, LocalClusterID: o.LocalClusterID, Workers: o.PodWorkers,
	}
	addresses := o.Addresses
	if addresses == nil {
		addresses = translation.Peers{Reader: mgr.GetClient()}
	}
	if !o.NoTranslation {
		// A provider's pods show at the addresses this cluster reaches
		// them at, as agreed (for a peer, in its TunnelEndpoint).
		podReflector.Translate = addresses.FromProvider
		podReflector.Agreed = addresses.Agreed
		podReflector.Transit = o.Transit
	}
	if err := podReflector.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the pod reflector: %w", err)
	}
	// The volumes of its pods, kept by the providers.
	if err := (&claims.Reflector{Client: mgr.GetClient(), Providers: o.Providers, LocalClusterID: o.LocalClusterID}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the claim reflector: %w", err)
	}
	var toProvider func(context.Context, string, netip.Addr) (netip.Addr, bool)
	if !o.NoTranslation {
		toProvider = addresses.ToProvider
	}
	// What consumers stored here, known by its metadata alone: a broker
	// reflects it in turn from the namespaces it offloads.
	consumers, err := objects.ConsumersCache(mgr.GetConfig(), mgr.GetScheme(), mgr.GetRESTMapper())
	if err != nil {
		return fmt.Errorf("the cache of the consumers' objects: %w", err)
	}
	if err := mgr.Add(consumers); err != nil {
		return err
	}
	for _, r := range objects.NewReflectors(mgr.GetClient(), o.Providers, o.LocalClusterID, toProvider) {
		r.Consumers, r.Live = consumers, mgr.GetAPIReader()
		r.Orchestrator = objects.AdvertisedOrchestrator(mgr.GetClient())
		if !o.NoTranslation && o.Transit != nil {
			r.Transit = o.Transit
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the object reflectors: %w", err)
		}
	}
	return nil
}
