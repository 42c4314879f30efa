// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The providers' KPIs as Prometheus metrics, read from the catalog at
// each scrape: a provider that goes leaves no stale series.
var (
	kpiReachable = prometheus.NewDesc("liqo_broker_provider_reachable",
		"1 when the broker's last health check of the provider's API server was answered ready, else 0.", []string{"provider"}, nil)
	kpiLatency = prometheus.NewDesc("liqo_broker_provider_latency_seconds",
		"Median round trip of the last 15 s's health checks of the provider's API server.", []string{"provider"}, nil)
	kpiTunnelLatency = prometheus.NewDesc("liqo_broker_provider_tunnel_latency_seconds",
		"Round trip through the network fabric's tunnel to the provider's gateway, as the broker cluster's gateway measures it; absent while no tunnel is established.", []string{"provider"}, nil)
	kpiUptime = prometheus.NewDesc("liqo_broker_provider_uptime_ratio",
		"Share of the health checks the provider answered over a window (1h, 24h, 7d).", []string{"provider", "window"}, nil)
	kpiAge = prometheus.NewDesc("liqo_broker_provider_measurement_age_seconds",
		"How long ago the provider was last probed.", []string{"provider"}, nil)
	kpiFree = prometheus.NewDesc("liqo_broker_provider_free",
		"What the provider's offer leaves free of the broker's use, by resource (cores, bytes, pods...).", []string{"provider", "resource"}, nil)
	kpiOffered = prometheus.NewDesc("liqo_broker_provider_offered",
		"What the provider offers the broker, by resource.", []string{"provider", "resource"}, nil)
	kpiPrice = prometheus.NewDesc("liqo_broker_provider_price",
		"The provider's price per unit of a resource (core, GiB, pod) per period, in a currency.", []string{"provider", "resource", "currency", "period"}, nil)
	kpiPods = prometheus.NewDesc("liqo_broker_provider_pods",
		"The broker's pods at the provider, by phase (running, pending, failed).", []string{"provider", "phase"}, nil)
	kpiStart = prometheus.NewDesc("liqo_broker_provider_pod_start_seconds",
		"Median time from a pod's creation to its readiness, over the broker's pods Ready at the provider.", []string{"provider"}, nil)
)

// kpiCollector exports the KPIs of the current Server's catalog.
type kpiCollector struct{ server atomic.Pointer[Server] }

var (
	kpis         kpiCollector
	registerKPIs sync.Once
)

// exportKPIs makes s the server whose catalog the metrics show.
func exportKPIs(s *Server) {
	kpis.server.Store(s)
	registerKPIs.Do(func() { metrics.Registry.MustRegister(&kpis) })
}

// Describe implements prometheus.Collector.
func (k *kpiCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{kpiReachable, kpiLatency, kpiTunnelLatency, kpiUptime, kpiAge, kpiFree, kpiOffered, kpiPrice, kpiPods, kpiStart} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (k *kpiCollector) Collect(ch chan<- prometheus.Metric) {
	s := k.server.Load()
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs, err := s.catalog(ctx)
	if err != nil {
		ctrl.Log.WithName("broker").Error(err, "Collecting the providers' KPIs")
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, c := range cs {
		if !c.Provider || c.KPIs == nil {
			continue
		}
		id, kp := c.ClusterID, c.KPIs
		reachable := 0.0
		if kp.Reachable {
			reachable = 1
		}
		gauge(kpiReachable, reachable, id)
		if kp.LatencyMillis != nil {
			gauge(kpiLatency, *kp.LatencyMillis/1000, id)
		}
		if kp.TunnelLatencyMillis != nil {
			gauge(kpiTunnelLatency, *kp.TunnelLatencyMillis/1000, id)
		}
		if kp.AgeSeconds != nil {
			gauge(kpiAge, *kp.AgeSeconds, id)
		}
		for w, u := range kp.Uptime {
			gauge(kpiUptime, u, id, string(w))
		}
		for name, q := range c.Free {
			gauge(kpiFree, q.AsApproximateFloat64(), id, string(name))
		}
		if c.Offer != nil {
			for name, q := range c.Offer.Resources {
				gauge(kpiOffered, q.AsApproximateFloat64(), id, string(name))
			}
			for name, q := range c.Offer.Prices {
				gauge(kpiPrice, q.AsApproximateFloat64(), id, string(name), c.Offer.Currency, c.Offer.Period)
			}
		}
		gauge(kpiPods, float64(kp.Pods.Running), id, "running")
		gauge(kpiPods, float64(kp.Pods.Pending), id, "pending")
		gauge(kpiPods, float64(kp.Pods.Failed), id, "failed")
		if kp.Pods.StartMillis != nil {
			gauge(kpiStart, *kp.Pods.StartMillis/1000, id)
		}
	}
}
