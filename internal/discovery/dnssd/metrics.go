// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package dnssd

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metric label values of the source label.
const (
	SourceMDNS = "mdns"
	SourceDNS  = "dns"
)

var (
	// DroppedTotal counts network input dropped by discovery, by source
	// (mdns, dns) and reason (the Reason* constants).
	DroppedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "liqo_discovery_dropped_total",
		Help: "Discovery input (packets, records) dropped as invalid, by source and reason.",
	}, []string{"source", "reason"})

	// FoundTotal counts valid announcements received, by source.
	FoundTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "liqo_discovery_announcements_total",
		Help: "Valid cluster announcements received, by source.",
	}, []string{"source"})
)

var (
	// MDNSAdvertising is 1 while this cluster is announced on the LAN.
	MDNSAdvertising = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "liqo_discovery_mdns_advertising",
		Help: "1 while this cluster is announced with mDNS, 0 otherwise.",
	})
	// MDNSBrowsing is 1 while this cluster browses the LAN for others.
	MDNSBrowsing = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "liqo_discovery_mdns_browsing",
		Help: "1 while this cluster browses for other clusters with mDNS, 0 otherwise.",
	})
)

func init() {
	metrics.Registry.MustRegister(DroppedTotal, FoundTotal, MDNSAdvertising, MDNSBrowsing)
}
