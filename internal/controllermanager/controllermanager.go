// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package controllermanager wires the liqo-controller-manager: it settles
// the cluster identity, makes sure the ClusterConfig singleton exists, and
// runs every Liqo controller in one controller-runtime manager with metrics
// and health endpoints. cmd/liqo-controller-manager only parses flags and
// calls Run.
package controllermanager

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/liqo-go/liqo/api"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/broker/measure"
	"github.com/liqo-go/liqo/internal/clusterconfig"
	"github.com/liqo-go/liqo/internal/clusterid"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/kubeauth"
	"github.com/liqo-go/liqo/internal/peering"
)

// Options are the controller manager's command-line settings.
type Options struct {
	// Kubeconfig is the path of a kubeconfig; empty means in-cluster.
	Kubeconfig string
	// Namespace is the Liqo namespace.
	Namespace string
	// ClusterName overrides ClusterConfig's clusterName.
	ClusterName string
	// PodCIDR and ServiceCIDR fill ClusterConfig's networkConfig where
	// it has none (the values liqoctl install detected); a range set in
	// the ClusterConfig wins.
	PodCIDR, ServiceCIDR string
	// MetricsBindAddress serves Prometheus metrics; "0" disables it.
	MetricsBindAddress string
	// MetricsSecure serves metrics over HTTPS to callers the API server
	// authenticates (TokenReview) and authorizes (SubjectAccessReview,
	// get on the non-resource URL /metrics), as controller-runtime's
	// secure serving does; false serves plain HTTP to anyone.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key for the metrics endpoint;
	// empty means a self-signed certificate made at start.
	MetricsCertDir string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables it.
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's /debug/pprof; "" or "0" disables it.
	PprofBindAddress string
	// LeaderElect enables leader election, for running several replicas.
	LeaderElect bool
	// AuthBindAddress is where the auth service listens.
	AuthBindAddress string
	// AuthURL is the auth service's URL as peers reach it; derived from
	// AuthBindAddress when empty.
	AuthURL string
	// AuthService, when AuthURL is empty, is the Service in the Liqo
	// namespace peers reach the auth service through: the URL is its
	// load balancer's address, or a node's address and its node port.
	AuthService string
	// APIServerURL is this cluster's API server as peers reach it; the
	// kubeconfig's server when empty.
	APIServerURL string
	// MDNSNetworkNamespace is the network namespace the mDNS socket is
	// opened in; empty means the controller manager's own.
	MDNSNetworkNamespace string
	// DNSProxy says the chart's DNS proxy runs (dnsProxy.enabled): each
	// consumer gets a DNS Service of it, and its virtual kubelet learns
	// where (internal/offloading/dnsproxy).
	DNSProxy bool
	// MeasureProviders health-checks every provider, with the virtual
	// kubelet's identity, every ProbeInterval, and keeps the history in
	// a Measurement per provider (a broker's KPIs: internal/broker/measure).
	MeasureProviders bool
	ProbeInterval    time.Duration
	// ClusterDomain is this cluster's DNS domain, as the proxy's answers
	// carry it.
	ClusterDomain string
	// KubeAPIQPS and KubeAPIBurst bound the requests to the API server.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// DNSServer is the DNS server SearchDomains are resolved with
	// (host:port); the first nameserver of /etc/resolv.conf when empty.
	DNSServer string
	// WebhookBindAddress is where the admission webhook listens.
	WebhookBindAddress string
	// WebhookService, when set, is the Service in the Liqo namespace the
	// API server reaches the webhook through (port 443); WebhookURL is
	// then unused.
	WebhookService string
	// WebhookURL is the webhook's base URL as the API server reaches it;
	// derived from WebhookBindAddress when empty.
	WebhookURL string
	// KubeletBindAddress is where the virtual nodes' kubelet API (logs,
	// exec) listens: each virtual node takes its own port, from this
	// one up (port 0: any free port); "0" disables it.
	KubeletBindAddress string
	// KubeletAddress is the address the API server reaches that API at,
	// which the virtual nodes carry as their InternalIP; derived from
	// KubeletBindAddress, or $POD_IP, when empty.
	KubeletAddress string
	// VirtualNodeTaint taints the virtual nodes so that only pods of
	// offloaded namespaces (which tolerate it) land there.
	VirtualNodeTaint bool
	// OpaqueVirtualNodes names new virtual nodes liqo-<random> rather
	// than after their provider: an aggregating broker's, whose
	// consumers read their pods' node names.
	OpaqueVirtualNodes bool
	// ForceUnpeerAfter bounds an unpeering from an unreachable provider.
	ForceUnpeerAfter time.Duration
	// ExchangeTTL is how long a token exchange may wait for its
	// PeeringRequest before what it created is removed.
	ExchangeTTL time.Duration
	// GatewayEndpoint is host:port where peers reach this cluster's
	// gateway; when empty, the node address of a running gateway pod and
	// GatewayPort.
	GatewayEndpoint string
	// GatewayPort is the UDP port the gateway listens on.
	GatewayPort int32
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Namespace:              install.DefaultNamespace,
		ClusterDomain:          "cluster.local",
		ProbeInterval:          measure.DefaultInterval,
		MetricsBindAddress:     ":8080",
		MetricsSecure:          true,
		HealthProbeBindAddress: ":8081",
		AuthBindAddress:        ":8443",
		WebhookBindAddress:     ":9443",
		KubeletBindAddress:     ":10250",
		ForceUnpeerAfter:       peering.DefaultForceUnpeerAfter,
		ExchangeTTL:            peering.DefaultExchangeTTL,
		KubeAPIQPS:             200,
		KubeAPIBurst:           400,
		GatewayPort:            51820,
		VirtualNodeTaint:       true,
	}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig; in-cluster configuration when empty")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "The Liqo namespace")
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "Name this cluster announces to its peers; overrides ClusterConfig spec.clusterName")
	fs.StringVar(&o.PodCIDR, "pod-cidr", o.PodCIDR, "The cluster's pod CIDR, written to ClusterConfig spec.networkConfig.podCIDR when that is empty")
	fs.StringVar(&o.ServiceCIDR, "service-cidr", o.ServiceCIDR, "The cluster's service CIDR, written to ClusterConfig spec.networkConfig.serviceCIDR when that is empty")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of the Prometheus metrics endpoint; 0 disables it")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve metrics over HTTPS, only to callers allowed get on /metrics (e.g. by the ClusterRole liqo-metrics-reader); false serves plain HTTP to anyone")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir, "Directory with tls.crt and tls.key for the metrics endpoint (default: a self-signed certificate)")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of the /healthz and /readyz endpoints; 0 disables them")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", o.PprofBindAddress, "Address of Go's /debug/pprof endpoints, for profiling; empty or 0 disables them")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader among replicas before running controllers")
	fs.StringVar(&o.AuthBindAddress, "auth-bind-address", o.AuthBindAddress, "Address the auth service listens on")
	fs.StringVar(&o.AuthURL, "auth-url", o.AuthURL, "URL peers reach the auth service at (default: https:// and the bind address, or the host name when it binds all addresses)")
	fs.StringVar(&o.AuthService, "auth-service", o.AuthService, "Service, in the Liqo namespace, peers reach the auth service through, when --auth-url is empty: its load balancer's address, or a node's address and the node port")
	fs.StringVar(&o.MDNSNetworkNamespace, "mdns-network-namespace", o.MDNSNetworkNamespace, "Network namespace (path, or name under /var/run/netns) to open the mDNS socket in; the process's own when empty")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Queries per second to the API server")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of queries to the API server")
	fs.StringVar(&o.DNSServer, "dns-server", o.DNSServer, "DNS server (host:port) to resolve SearchDomains with (default: the first nameserver of /etc/resolv.conf)")
	fs.BoolVar(&o.MeasureProviders, "measure-providers", o.MeasureProviders, "Health-check every provider's API server, with the virtual kubelet's identity there, every --probe-interval, and keep the history in a Measurement per provider in the Liqo namespace (the chart's broker.enabled: the broker's KPIs)")
	fs.DurationVar(&o.ProbeInterval, "probe-interval", o.ProbeInterval, "How often --measure-providers probes each provider")
	fs.BoolVar(&o.DNSProxy, "dns-proxy", o.DNSProxy, "The DNS proxy runs in the Liqo namespace (the chart's dnsProxy.enabled): give each consumer a DNS Service of it, where its offloaded pods reach Services by the consumer's namespace names")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain, "This cluster's DNS domain")
	fs.StringVar(&o.WebhookBindAddress, "webhook-bind-address", o.WebhookBindAddress, "Address the admission webhook listens on")
	fs.StringVar(&o.WebhookService, "webhook-service", o.WebhookService, "Service, in the Liqo namespace, the API server reaches the webhook through on port 443 (in a pod); --webhook-url is then unused")
	fs.StringVar(&o.WebhookURL, "webhook-url", o.WebhookURL, "Base URL the API server reaches the webhook at (default: https:// and the bind address, or the host name when it binds all addresses)")
	fs.StringVar(&o.KubeletBindAddress, "kubelet-bind-address", o.KubeletBindAddress, "Address the virtual nodes' kubelet API (kubectl logs, exec) listens on; each virtual node takes its own port, from this one up (port 0: any free port); 0 disables it")
	fs.StringVar(&o.KubeletAddress, "kubelet-address", o.KubeletAddress, "IP address the API server reaches the virtual nodes' kubelet API at (default: the bind address's host, or $POD_IP)")
	fs.BoolVar(&o.OpaqueVirtualNodes, "opaque-virtual-nodes", o.OpaqueVirtualNodes, "Name new virtual nodes liqo-<random hex> rather than after their provider (the chart sets it when broker.modes has aggregator: an aggregated consumer reads its pods' node names in the broker)")
	fs.BoolVar(&o.VirtualNodeTaint, "virtual-node-taint", o.VirtualNodeTaint, "Taint the virtual nodes (offloading.liqo.io/virtual-node=true:NoExecute) so that only pods of offloaded namespaces, which tolerate it, land there; false leaves them untainted, for suites that take only untainted nodes as schedulable (upstream conformance)")
	fs.DurationVar(&o.ExchangeTTL, "peering-exchange-ttl", o.ExchangeTTL, "How long a token exchange may wait for its PeeringRequest before the identity it issued is revoked")
	fs.DurationVar(&o.ForceUnpeerAfter, "force-unpeer-after", o.ForceUnpeerAfter, "How long an unpeering waits for an unreachable provider before removing the local side alone")
	fs.StringVar(&o.APIServerURL, "api-server-url", o.APIServerURL, "URL peers reach this cluster's API server at (default: the kubeconfig's server)")
	fs.StringVar(&o.GatewayEndpoint, "gateway-endpoint", o.GatewayEndpoint, "host:port where peers reach this cluster's gateway (default: the node address of a running gateway pod, and --gateway-port)")
	fs.Int32Var(&o.GatewayPort, "gateway-port", o.GatewayPort, "UDP port the gateway listens on")
}

// metricsServer returns the metrics endpoint's options: by default HTTPS,
// with the caller authenticated and authorized by the API server.
func (o *Options) metricsServer() metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.MetricsBindAddress}
	if o.MetricsSecure {
		m.SecureServing = true
		m.FilterProvider = kubeauth.Filter
		m.CertDir = o.MetricsCertDir
	}
	return m
}

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	if o.Namespace == "" {
		return errors.New("--namespace must not be empty")
	}
	for flag, v := range map[string]string{"--pod-cidr": o.PodCIDR, "--service-cidr": o.ServiceCIDR} {
		if v == "" {
			continue
		}
		if p, err := netip.ParsePrefix(v); err != nil || p.Masked() != p {
			return fmt.Errorf("%s=%s: want a network such as 10.244.0.0/16", flag, v)
		}
	}
	return nil
}

// networkSeed is what the flags say of the cluster's address ranges.
func (o *Options) networkSeed() configv1alpha1.NetworkConfig {
	return configv1alpha1.NetworkConfig{PodCIDR: o.PodCIDR, ServiceCIDR: o.ServiceCIDR}
}

func (o *Options) restConfig() (*rest.Config, error) {
	if o.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", o.Kubeconfig, err)
		}
		return cfg, nil
	}
	return ctrl.GetConfig()
}

// Run runs the controller manager until ctx ends.
func Run(ctx context.Context, o *Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	log := ctrl.Log.WithName("setup")
	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	// The defaults (20/30) throttle a burst of discoveries or pods.
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	scheme := api.NewScheme()

	// The identity is settled before anything else runs, with a client that
	// reads through to the API server: no cache exists yet.
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	id, source, err := (&clusterid.Ensurer{Client: direct, Namespace: o.Namespace}).Ensure(ctx)
	if err != nil {
		return fmt.Errorf("settling the ClusterID: %w", err)
	}
	log.Info("Cluster identity settled", "clusterID", id, "source", source)
	if err := clusterconfig.EnsureDefault(ctx, direct, o.networkSeed()); err != nil {
		return err
	}

	wh, err := newWebhookServer(ctx, direct, o)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		WebhookServer:           wh.server,
		Cache:                   cacheOptions(),
		Metrics:                 o.metricsServer(),
		HealthProbeBindAddress:  o.HealthProbeBindAddress,
		PprofBindAddress:        o.PprofBindAddress,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        "liqo-controller-manager",
		LeaderElectionNamespace: o.Namespace,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := metrics.Registry.Register(&stateCollector{reader: mgr.GetClient(), elected: mgr.Elected()}); err != nil {
		return fmt.Errorf("registering the peering state metrics: %w", err)
	}
	if err := setupPhaseEvents(mgr); err != nil {
		return fmt.Errorf("setting up the phase events: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}

	if _, err := auth.EnsureToken(ctx, direct, o.Namespace); err != nil {
		return err
	}

	store := &clusterconfig.Store{}
	authURL, authServer, err := setupDiscovery(ctx, mgr, o, cfg, direct, id, store)
	if err != nil {
		return err
	}
	// One setup per area, in the order of the layers (docs/development.md),
	// but for offloading, which is handed the virtual kubelet's clients and
	// providers.
	if err := setupPeering(mgr, o, direct, id, authURL, authServer, store, wh); err != nil {
		return err
	}
	if err := setupSharing(mgr, o, direct, id, store); err != nil {
		return err
	}
	remotes, providers, err := setupVirtualKubelet(ctx, mgr, o, id, wh)
	if err != nil {
		return err
	}
	if err := setupIntroductions(mgr, o, direct, id, remotes, store); err != nil {
		return err
	}
	if err := setupNetwork(mgr, o, direct, id, remotes, store); err != nil {
		return err
	}
	if err := setupOffloading(ctx, mgr, o, direct, id, remotes, providers, store); err != nil {
		return err
	}
	if err := (&clusterconfig.Reconciler{
		Client:              mgr.GetClient(),
		ClusterID:           id,
		ClusterNameOverride: o.ClusterName,
		Seed:                o.networkSeed(),
		AuthURL:             authURL,
		Store:               store,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the ClusterConfig controller: %w", err)
	}

	log.Info("Starting the manager")
	return mgr.Start(ctx)
}

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
