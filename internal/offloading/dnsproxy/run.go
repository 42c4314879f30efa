// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package dnsproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/liqo-go/liqo/api"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
)

// Options are the flags of `liqo-gateway dns`.
type Options struct {
	Kubeconfig string
	// Namespace is Liqo's, where the consumers' DNS Services are.
	Namespace string
	// Upstream is the cluster DNS, host:port; the first nameserver of
	// ResolvConf when empty.
	Upstream   string
	ResolvConf string
	// Domain is the cluster's DNS domain.
	Domain                 string
	MetricsBindAddress     string
	HealthProbeBindAddress string
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{Namespace: install.DefaultNamespace, ResolvConf: "/etc/resolv.conf", Domain: "cluster.local",
		MetricsBindAddress: "0", HealthProbeBindAddress: ":8085"}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig; in-cluster configuration when empty")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "The Liqo namespace, where each consumer's DNS Service is")
	fs.StringVar(&o.Upstream, "upstream", o.Upstream, "The cluster DNS, host:port (default: the first nameserver of --resolv-conf, port 53)")
	fs.StringVar(&o.ResolvConf, "resolv-conf", o.ResolvConf, "Where the cluster DNS is read from when --upstream is empty")
	fs.StringVar(&o.Domain, "domain", o.Domain, "The cluster's DNS domain")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of the /healthz and /readyz endpoints; 0 disables them")
}

// Run serves every consumer's DNS until ctx ends.
func Run(ctx context.Context, o *Options) error {
	if o.Namespace == "" {
		return errors.New("--namespace must not be empty")
	}
	if o.Upstream == "" {
		rc, err := dns.ClientConfigFromFile(o.ResolvConf)
		if err != nil {
			return fmt.Errorf("no --upstream, and %s cannot be read: %w", o.ResolvConf, err)
		}
		if len(rc.Servers) == 0 {
			return fmt.Errorf("no --upstream, and no nameserver in %s", o.ResolvConf)
		}
		o.Upstream = net.JoinHostPort(rc.Servers[0], "53")
	}
	cfg, err := ctrl.GetConfig()
	if o.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	}
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	// Only what the proxy reads: the DNS Services of the Liqo namespace,
	// the namespaces made for consumers, and the pods' addresses (to
	// refuse a query from another consumer's pods).
	madeForConsumers, err := labels.NewRequirement(offloadingv1alpha1.OriginClusterLabel, selection.Exists, nil)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: api.NewScheme(),
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Service{}:   {Namespaces: map[string]cache.Config{o.Namespace: {}}},
				&corev1.Namespace{}: {Label: labels.NewSelector().Add(*madeForConsumers)},
				&corev1.Pod{}:       {Transform: podAddresses},
			},
		},
		Metrics:                metricsserver.Options{BindAddress: o.MetricsBindAddress},
		HealthProbeBindAddress: o.HealthProbeBindAddress,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	p := &Proxy{Client: mgr.GetClient(), Namespace: o.Namespace, Upstream: o.Upstream, Domain: o.Domain,
		Log: ctrl.Log.WithName("dns-proxy")}
	if err := p.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	if err := metrics.Registry.Register(p); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("informers", func(r *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(r.Context()) {
			return errors.New("the caches are not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	p.Log.Info("Starting the DNS proxy", "upstream", o.Upstream, "domain", o.Domain)
	return mgr.Start(ctx)
}

// podAddresses keeps of a pod only what Proxy.foreign reads: where it is,
// whether it has an address of its own, and which.
func podAddresses(o any) (any, error) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion, DeletionTimestamp: pod.DeletionTimestamp},
		Spec:   corev1.PodSpec{HostNetwork: pod.Spec.HostNetwork},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, PodIP: pod.Status.PodIP, PodIPs: pod.Status.PodIPs},
	}, nil
}

var (
	foreignDesc = prometheus.NewDesc("liqo_dns_proxy_foreign_queries_total",
		"Queries at a consumer's DNS address from pods made for another consumer (answered REFUSED).", []string{"consumer", "port"}, nil)
	failedDesc = prometheus.NewDesc("liqo_dns_proxy_upstream_failures_total",
		"Queries of a consumer's pods the cluster DNS did not answer (answered SERVFAIL).", []string{"consumer", "port"}, nil)
	droppedDesc = prometheus.NewDesc("liqo_dns_proxy_dropped_messages_total",
		"Messages to a consumer's DNS address that were no standard query (dropped, or answered FORMERR or NOTIMP).", []string{"consumer", "port"}, nil)
	refusedDesc = prometheus.NewDesc("liqo_dns_proxy_refused_queries_total",
		"Queries of a consumer's pods answered REFUSED: more were being forwarded at once than the proxy allows one consumer.", []string{"consumer", "port"}, nil)
)

// Describe implements prometheus.Collector.
func (p *Proxy) Describe(ch chan<- *prometheus.Desc) {
	ch <- failedDesc
	ch <- droppedDesc
	ch <- refusedDesc
	ch <- foreignDesc
}

// Collect implements prometheus.Collector: the counts of the consumers
// served now.
func (p *Proxy) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for port, l := range p.serving {
		ps := strconv.Itoa(int(port))
		ch <- prometheus.MustNewConstMetric(failedDesc, prometheus.CounterValue, float64(l.handler.Failed()), l.consumer, ps)
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(l.handler.Dropped()), l.consumer, ps)
		ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(l.handler.Refused()), l.consumer, ps)
		ch <- prometheus.MustNewConstMetric(foreignDesc, prometheus.CounterValue, float64(l.handler.ForeignQueries()), l.consumer, ps)
	}
}
