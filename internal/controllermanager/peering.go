// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package controllermanager

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/broker/measure"
	"github.com/liqo-go/liqo/internal/clusterconfig"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/kubeauth"
	"github.com/liqo-go/liqo/internal/network/transit"
	"github.com/liqo-go/liqo/internal/network/translation"
	"github.com/liqo-go/liqo/internal/offloading"
	"github.com/liqo-go/liqo/internal/peering"
	"github.com/liqo-go/liqo/internal/sharing"
	"github.com/liqo-go/liqo/internal/virtualkubelet"
	"github.com/liqo-go/liqo/internal/virtualkubelet/api"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider/remote"
)

// setupPeering adds the token exchange to the auth service, the
// PeeringRequest webhook and its registration, and both peering
// reconcilers. direct reads through to the API server: the peering's
// objects (tenant namespaces, RBAC, CSRs) are few and read rarely, and
// caching them would mean watching every Role in the cluster.
func setupPeering(mgr ctrl.Manager, o *Options, direct client.Client, clusterID, authURL string, authServer *auth.Server,
	store *clusterconfig.Store, wh *webhookSetup,
) error {
	config := func() *configv1alpha1.ClusterConfig { return store.Get() }
	policy := &peering.Policy{Reader: direct, LocalClusterID: clusterID, Config: config}

	authServer.Token = func(ctx context.Context) (string, error) { return auth.EnsureToken(ctx, direct, o.Namespace) }
	authServer.Introduction = peering.IntroductionToken(mgr.GetClient(), config)
	authServer.Issuer = &peering.Issuer{
		Client: direct, Namespace: o.Namespace, Policy: policy, Config: config, Local: authServer.Identity,
	}

	mgr.GetWebhookServer().Register(peering.ValidatePath, &admission.Webhook{
		Handler: &peering.Validator{Policy: policy, Decoder: admission.NewDecoder(mgr.GetScheme())},
	})
	if err := mgr.Add(&webhookRegistrar{
		client: direct, caBundle: wh.caBundle, base: wh.base, every: 30 * time.Second,
		whoAmI: func(ctx context.Context) (string, error) { return identity.WhoAmI(ctx, mgr.GetConfig()) },
	}); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("Webhooks", "at", wh.describe())

	if err := mgr.Add(&peering.Sweeper{Client: direct, Namespace: o.Namespace, TTL: o.ExchangeTTL}); err != nil {
		return err
	}
	if err := (&peering.Incoming{
		Client: direct, Scheme: mgr.GetScheme(), Namespace: o.Namespace, LocalClusterID: clusterID, Policy: policy, Config: config,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the PeeringRequest controller: %w", err)
	}
	if err := (&peering.Outgoing{
		Client: direct, Scheme: mgr.GetScheme(), Namespace: o.Namespace, LocalClusterID: clusterID,
		Local: authServer.Identity, LocalAuthURL: authURL, Config: config, ForceUnpeerAfter: o.ForceUnpeerAfter,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the outgoing peering controller: %w", err)
	}
	return nil
}

// setupIntroductions adds both sides of a broker's introductions: the
// provider's answer to those it receives, and the introducer's own,
// carried to its providers with the virtual kubelet's clients.
func setupIntroductions(mgr ctrl.Manager, o *Options, direct client.Client, clusterID string, remotes *identity.Remotes, store *clusterconfig.Store) error {
	config := func() *configv1alpha1.ClusterConfig { return store.Get() }
	if err := (&peering.IntroductionsReceived{
		Client: mgr.GetClient(), LocalClusterID: clusterID, Config: config, Changes: store.Subscribe(),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the received introductions' controller: %w", err)
	}
	if err := (&peering.IntroductionsSent{
		Client: mgr.GetClient(), Namespace: o.Namespace, LocalClusterID: clusterID, Remotes: remotes,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the sent introductions' controller: %w", err)
	}
	// The consumer's side: peerings for the network with the providers
	// its brokers introduced it to (spec.peeringConfig.brokers).
	// Direct: the token Secrets are not in the cache (docs/security.md).
	return mgr.Add(&peering.Brokered{
		Client: direct, Namespace: o.Namespace, LocalClusterID: clusterID, Config: config,
		Brokers: peering.BrokerClientsFrom(direct, o.Namespace, client.Options{Scheme: mgr.GetScheme()}),
	})
}

// setupSharing adds the Broadcaster (provider) and the Advertisement
// operator (consumer).
func setupSharing(mgr ctrl.Manager, o *Options, direct client.Client, clusterID string, store *clusterconfig.Store) error {
	config := func() *configv1alpha1.ClusterConfig { return store.Get() }
	if err := (&sharing.Broadcaster{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(), LocalClusterID: clusterID, Config: config, Changes: store.Subscribe(),
		LocalClusterName: func() string { return clusterconfig.EffectiveClusterName(o.ClusterName, store.Get(), clusterID) },
		Kubeconfig:       (&peering.Channels{Reader: direct, Namespace: o.Namespace, LocalClusterID: clusterID}).ProviderKubeconfig,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the Broadcaster: %w", err)
	}
	if err := (&sharing.Operator{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: config, Changes: store.Subscribe()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the Advertisement operator: %w", err)
	}
	return nil
}

// setupOffloading adds the pod webhook, the NamespaceOffloading controller
// (consumer) and the NamespaceMap controller (provider).
func setupOffloading(ctx context.Context, mgr ctrl.Manager, o *Options, direct client.Client, clusterID string, remotes *identity.Remotes, providers provider.Providers, store *clusterconfig.Store) error {
	mgr.GetWebhookServer().Register(offloading.MutatePodPath, &admission.Webhook{
		Handler: &offloading.PodMutator{Reader: mgr.GetClient()},
	})
	mgr.GetWebhookServer().Register(offloading.ValidateBindingPath, &admission.Webhook{
		Handler: &offloading.BindingValidator{Reader: mgr.GetClient(), APIReader: mgr.GetAPIReader()},
	})
	mgr.GetWebhookServer().Register(offloading.ValidateEndpointSlicePath, &admission.Webhook{
		Handler: &offloading.EndpointSliceValidator{Reader: mgr.GetClient(), Decoder: admission.NewDecoder(mgr.GetScheme())},
	})
	// The controller manager binds itself, in each namespace it offloads,
	// the right to request that namespace's service account tokens.
	self, err := identity.WhoAmI(ctx, mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("learning this controller manager's user name: %w", err)
	}
	if err := (&offloading.NamespaceOffloadingReconciler{
		Client: mgr.GetClient(), Direct: direct, Self: self, Remotes: remotes, LocalClusterID: clusterID, Released: providers.Release,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the NamespaceOffloading controller: %w", err)
	}
	config := func() *configv1alpha1.ClusterConfig { return store.Get() }
	var dns *offloading.DNSProxy
	if o.DNSProxy {
		dns = &offloading.DNSProxy{Namespace: o.Namespace, Domain: o.ClusterDomain}
	}
	if err := (&offloading.NamespaceMapReconciler{Client: mgr.GetClient(), Direct: direct, Config: config, Changes: store.Subscribe(), Self: self,
		DNS: dns}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the NamespaceMap controller: %w", err)
	}
	// What a consumer asks to keep running here, whether it is reachable
	// or not.
	if err := (&offloading.ShadowPodReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), FirstPodGrace: offloading.DefaultFirstPodGrace,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the ShadowPod controller: %w", err)
	}
	// What the EndpointSlice webhook let through stays allowed: a
	// consumer's slice naming its pod that since ended goes.
	if err := (&offloading.EndpointSlicePruner{Client: mgr.GetClient(), Live: direct}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the EndpointSlice pruner: %w", err)
	}
	return nil
}

// setupVirtualKubelet adds the virtual kubelet: provider sessions, virtual
// nodes, pod and object reflection, and the kubelet API. It returns the
// clients towards the providers and the providers, which offloading uses.
func setupVirtualKubelet(ctx context.Context, mgr ctrl.Manager, o *Options, clusterID string, wh *webhookSetup) (*identity.Remotes, provider.Providers, error) {
	remotes := &identity.Remotes{Client: mgr.GetClient(), Namespace: o.Namespace, Scheme: mgr.GetScheme()}
	sessions := &remote.Sessions{Remotes: remotes, Reader: mgr.GetClient(), LocalClusterID: clusterID}
	if err := mgr.Add(sessions); err != nil {
		return nil, nil, err
	}
	// The remote clusters behind the peerings are the one kind of
	// provider a cluster runs; the broker adds its own backends here.
	router := &provider.Router{Default: sessions, Addresses: translation.Peers{Reader: mgr.GetClient()}}
	server, addr, err := setupKubeletServer(mgr, o, router, wh)
	if err != nil {
		return nil, nil, err
	}
	if err := virtualkubelet.Setup(ctx, mgr, virtualkubelet.Options{
		LocalClusterID: clusterID, Providers: router, Health: router, Addresses: router, Kubelet: server, KubeletAddress: addr,
		Removed:        func(p string) { sessions.StopAfter(p, time.Minute) },
		UntaintedNodes: !o.VirtualNodeTaint, OpaqueNodeNames: o.OpaqueVirtualNodes,
		// The pods an aggregator's consumers place here, at the
		// addresses its gateway leads them to.
		Transit: &transit.Allocator{Client: mgr.GetClient(), Live: mgr.GetAPIReader()},
	}); err != nil {
		return nil, nil, err
	}
	if o.MeasureProviders {
		if err := mgr.Add(&measure.Prober{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: o.Namespace, Health: router, Interval: o.ProbeInterval}); err != nil {
			return nil, nil, err
		}
	}
	return remotes, router, nil
}

// setupKubeletServer listens for the virtual nodes' kubelet API, and
// returns the server and the address the nodes publish; nil when the API
// is off or has no address.
func setupKubeletServer(mgr ctrl.Manager, o *Options, providers interface {
	provider.Streams
	provider.Usage
}, wh *webhookSetup,
) (*api.Server, string, error) {
	log := ctrl.Log.WithName("setup")
	if o.KubeletBindAddress == "0" {
		log.Info("The virtual nodes' kubelet API is disabled: kubectl logs and exec will not reach offloaded pods")
		return nil, "", nil
	}
	host, portStr, err := net.SplitHostPort(o.KubeletBindAddress)
	if err != nil {
		return nil, "", fmt.Errorf("--kubelet-bind-address %q: %w", o.KubeletBindAddress, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, "", fmt.Errorf("--kubelet-bind-address %q has an invalid port", o.KubeletBindAddress)
	}
	addr := o.KubeletAddress
	if addr == "" {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			addr = host
		} else {
			addr = os.Getenv("POD_IP")
		}
	}
	if addr != "" && net.ParseIP(addr) == nil {
		return nil, "", fmt.Errorf("--kubelet-address %q is not an IP address", addr)
	}
	if addr == "" {
		log.Info("No address for the virtual nodes' kubelet API (set --kubelet-address or $POD_IP): kubectl logs and exec will not reach offloaded pods")
		return nil, "", nil
	}
	cert, err := auth.ServingCertificate(wh.caBundle, wh.caKey, []string{"localhost", "127.0.0.1", addr})
	if err != nil {
		return nil, "", err
	}
	server := &api.Server{Client: mgr.GetClient(), Reviewer: kubeauth.NewReviewer(mgr.GetClient()), Streams: providers, Usage: providers, Host: host, FirstPort: port, Certificate: cert}
	if err := mgr.Add(server); err != nil {
		return nil, "", err
	}
	log.Info("Virtual nodes' kubelet API", "address", addr, "firstPort", port)
	return server, addr, nil
}
