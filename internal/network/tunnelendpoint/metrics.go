// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package tunnelendpoint

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/liqo-go/liqo/internal/network/gateway"
)

// The gateway's metrics, per peer (its ClusterID): what the data plane
// counted last, served as it is at scrape time.
var (
	establishedDesc = prometheus.NewDesc("liqo_gateway_peer_established",
		"1 while the peer's gateway answers probes through the tunnel, else 0.", []string{"peer"}, nil)
	latencyDesc = prometheus.NewDesc("liqo_gateway_peer_latency_seconds",
		"Round trip of the last probe answered through the tunnel.", []string{"peer"}, nil)
	handshakeDesc = prometheus.NewDesc("liqo_gateway_peer_handshake_age_seconds",
		"Time since the last WireGuard handshake with the peer completed.", []string{"peer"}, nil)
	bytesDesc = prometheus.NewDesc("liqo_gateway_peer_bytes_total",
		"Bytes WireGuard received from (rx) and sent to (tx) the peer, encrypted.", []string{"peer", "direction"}, nil)
	packetsDesc = prometheus.NewDesc("liqo_gateway_peer_packets_total",
		"Packets that came out of the tunnel from the peer (rx) and went into it to the peer (tx).", []string{"peer", "direction"}, nil)
	refusedDesc = prometheus.NewDesc("liqo_gateway_refused_packets_total",
		"Packets out of the tunnel dropped for going anywhere but this cluster's pods or the gateway's tunnel address.", nil, nil)
)

// collector serves the last observations.
type collector struct {
	mu      sync.Mutex
	peers   map[string]gateway.PeerStatus
	refused uint64
	now     func() time.Time
}

var observed = &collector{peers: map[string]gateway.PeerStatus{}, now: time.Now}

func init() { metrics.Registry.MustRegister(observed) }

func observe(name string, ps gateway.PeerStatus, has bool) {
	observed.mu.Lock()
	defer observed.mu.Unlock()
	if has {
		observed.peers[name] = ps
	} else {
		delete(observed.peers, name)
	}
}

func forget(name string) { observe(name, gateway.PeerStatus{}, false) }

func observeRefused(n uint64) {
	observed.mu.Lock()
	defer observed.mu.Unlock()
	observed.refused = n
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{establishedDesc, latencyDesc, handshakeDesc, bytesDesc, packetsDesc, refusedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(c.refused))
	for name, ps := range c.peers {
		up := 0.0
		if ps.Established {
			up = 1
			ch <- prometheus.MustNewConstMetric(latencyDesc, prometheus.GaugeValue, ps.Latency.Seconds(), name)
		}
		ch <- prometheus.MustNewConstMetric(establishedDesc, prometheus.GaugeValue, up, name)
		if !ps.LastHandshake.IsZero() {
			ch <- prometheus.MustNewConstMetric(handshakeDesc, prometheus.GaugeValue, c.now().Sub(ps.LastHandshake).Seconds(), name)
		}
		ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.CounterValue, float64(ps.RxBytes), name, "rx")
		ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.CounterValue, float64(ps.TxBytes), name, "tx")
		ch <- prometheus.MustNewConstMetric(packetsDesc, prometheus.CounterValue, float64(ps.RxPackets), name, "rx")
		ch <- prometheus.MustNewConstMetric(packetsDesc, prometheus.CounterValue, float64(ps.TxPackets), name, "tx")
	}
}
