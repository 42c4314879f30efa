// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package lan runs LAN discovery in the controller manager: it publishes
// this cluster over mDNS while enableAdvertisement is on (withdrawing it
// with a goodbye when turned off), browses for other clusters while
// enableDiscovery is on, and reports what it finds to the ForeignCluster
// registry. It follows the ClusterConfig at run time: interface, port and
// switches take effect within a second, without a restart.
package lan

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/clusterconfig"
	"github.com/liqo-go/liqo/internal/discovery/dnssd"
	"github.com/liqo-go/liqo/internal/discovery/mdns"
	"github.com/liqo-go/liqo/internal/foreigncluster"
)

// Source is the name of the mDNS discovery source in ForeignCluster status.
const Source = "mdns"

// Discovery is the LAN discovery runnable.
type Discovery struct {
	// Store provides the ClusterConfig in force and its changes.
	Store *clusterconfig.Store
	// Registry records what is found.
	Registry *foreigncluster.Registry
	// Self returns this cluster's announcement (its name may change).
	Self func() dnssd.Announcement
	// AuthPort is the auth service's port, announced in the SRV record.
	AuthPort uint16
	// NetworkNamespace, when set, is where the mDNS socket lives (a path
	// or an `ip netns` name); the interface is looked up there.
	NetworkNamespace string

	log    logr.Logger
	failed atomic.Bool // the socket failed: reopen it at the next apply

	// pending holds the latest sighting of each cluster and address not
	// yet recorded: a slow API server makes sightings coalesce, never
	// queue up stale. Keyed by address too, so that someone announcing a
	// known ClusterID at an address of its own cannot crowd out the
	// cluster's real announcements; bounded by maxPending.
	pendingMu sync.Mutex
	pending   map[string]sighting
	wake      chan struct{}

	// browsing is the context of the current browsing session, cancelled
	// when browsing stops: a sighting still being recorded then gives up,
	// rather than recreate a ForeignCluster after discovery was turned off.
	browsingMu   sync.Mutex
	browsing     context.Context
	stopBrowsing context.CancelFunc
	current      settings
	server       *mdns.Server
	stop         context.CancelFunc // stops the server's goroutines
	querier      context.CancelFunc // stops the query loop
	self         dnssd.Announcement
}

// settings is the part of the ClusterConfig LAN discovery follows.
type settings struct {
	iface         string
	port          int
	service       string
	ttl           uint32
	advertise     bool
	discover      bool
	queryInterval time.Duration
}

func settingsOf(cfg *configv1alpha1.ClusterConfig) settings {
	d := cfg.Spec.DiscoveryConfig
	return settings{
		iface:         d.MDNSInterface,
		port:          int(d.MDNSPort),
		service:       d.ServiceName,
		ttl:           uint32(max(d.TTL, 1)),
		advertise:     d.EnableAdvertisement == nil || *d.EnableAdvertisement,
		discover:      d.EnableDiscovery == nil || *d.EnableDiscovery,
		queryInterval: time.Duration(max(d.QueryIntervalSeconds, 1)) * time.Second,
	}
}

func (s settings) socket() [3]any { return [3]any{s.iface, s.port, s.service} }

// Start runs until ctx ends, then withdraws this cluster from the LAN.
func (d *Discovery) Start(ctx context.Context) error {
	if d.Store == nil || d.Registry == nil || d.Self == nil {
		return errors.New("lan.Discovery needs Store, Registry and Self")
	}
	d.log = ctrl.LoggerFrom(ctx).WithName("mdns")
	d.pending = map[string]sighting{}
	d.wake = make(chan struct{}, 1)
	changed := d.Store.Subscribe()
	go d.record(ctx)
	resync := time.NewTicker(time.Second) // the cluster name may change without a ClusterConfig event
	defer resync.Stop()
	for {
		if cfg := d.Store.Get(); cfg != nil {
			d.apply(ctx, settingsOf(cfg))
		}
		select {
		case <-ctx.Done():
			d.shutdown()
			return nil
		case <-changed:
		case <-resync.C:
		}
	}
}

// NeedLeaderElection is false: every replica answers on the LAN the same.
func (d *Discovery) NeedLeaderElection() bool { return false }

func (d *Discovery) apply(ctx context.Context, s settings) {
	if d.failed.Swap(false) {
		d.shutdown()
	}
	if s.socket() != d.current.socket() || d.server == nil {
		d.shutdown()
		d.current = settings{}
		if s.iface == "" {
			return // mDNS stays off until an interface is named
		}
		if err := d.open(ctx, s); err != nil {
			d.log.Error(err, "Cannot start mDNS; retrying", "interface", s.iface, "port", s.port)
			return
		}
	}
	self := d.Self()
	switch {
	case s.advertise && (!d.current.advertise || self != d.self || s.ttl != d.current.ttl):
		d.self = self
		inst := &dnssd.Instance{
			Name: self.ClusterID, Service: s.service, Domain: "local.", Host: self.ClusterID,
			Port: d.AuthPort, IPs: d.addresses(), Announcement: self,
		}
		server := d.server
		go func() {
			if err := server.Publish(ctx, inst); err != nil {
				d.log.Error(err, "Announcing this cluster failed")
			}
		}()
		d.log.Info("Advertising this cluster", "interface", s.iface, "port", s.port)
	case !s.advertise && d.current.advertise:
		if err := d.server.Withdraw(); err != nil {
			d.log.Error(err, "Sending the mDNS goodbye failed")
		}
		d.log.Info("Stopped advertising this cluster")
	}
	if s.discover != d.current.discover || s.queryInterval != d.current.queryInterval {
		d.server.SetBrowsing(s.discover)
		if d.querier != nil {
			d.querier()
			d.querier = nil
		}
		if s.discover {
			qctx, cancel := context.WithCancel(ctx)
			d.querier = cancel
			go d.query(qctx, d.server, s.queryInterval)
			d.log.Info("Browsing for clusters", "every", s.queryInterval)
		} else {
			d.log.Info("Stopped browsing for clusters")
		}
	}
	d.current = s
	d.setBrowsing(ctx, s.discover)
	dnssd.MDNSAdvertising.Set(boolGauge(s.advertise))
	dnssd.MDNSBrowsing.Set(boolGauge(s.discover))
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (d *Discovery) open(ctx context.Context, s settings) error {
	conn, err := mdns.ListenInNamespace(ctx, d.NetworkNamespace, s.iface, s.port)
	if err != nil {
		return err
	}
	d.server = mdns.NewServer(conn, mdns.Options{Service: s.service, TTL: s.ttl, Handler: handler{d}})
	// Not cancelled with ctx: shutdown() sends the goodbye first, then
	// stops the server itself.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.stop = cancel
	server := d.server
	go func() {
		if err := server.Serve(sctx); err != nil {
			d.log.Error(err, "mDNS socket failed; reopening it")
			d.failed.Store(true)
		}
	}()
	return nil
}

func (d *Discovery) shutdown() {
	if d.server == nil {
		return
	}
	if d.current.advertise {
		_ = d.server.Withdraw() // best effort: peers age us out anyway
	}
	if d.querier != nil {
		d.querier()
		d.querier = nil
	}
	d.stop()
	d.server = nil
	d.endBrowsing()
	dnssd.MDNSAdvertising.Set(0)
	dnssd.MDNSBrowsing.Set(0)
}

// query asks the LAN for clusters at once and then every interval: one
// packet per interval, for as long as browsing is on.
func (d *Discovery) query(ctx context.Context, server *mdns.Server, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := server.Query(); err != nil {
			d.log.V(1).Info("mDNS query failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

type sighting struct {
	announcement dnssd.Announcement
	at           time.Time
}

// record turns announcements into ForeignClusters, off the socket's read
// loop so that a slow API server never makes mDNS drop packets. Its writes
// use the browsing session's context (derived from ctx, cancelled when
// browsing is turned off), not ctx itself.
func (d *Discovery) record(ctx context.Context) { //nolint:contextcheck // see above
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		}
		d.pendingMu.Lock()
		batch := d.pending
		d.pending = make(map[string]sighting, len(batch))
		d.pendingMu.Unlock()
		bctx := d.browsingContext()
		if bctx == nil {
			continue // found before browsing was turned off: too late now
		}
		// Record in parallel, a few at a time: one slow write must not
		// hold back every other cluster's sighting.
		var wg sync.WaitGroup
		slots := make(chan struct{}, recordWorkers)
		for _, s := range batch {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				err := d.Registry.Seen(bctx, foreigncluster.Discovery{
					Sighting: foreigncluster.Sighting(s.announcement), Source: Source, Type: discoveryv1alpha1.LanDiscovery, At: s.at,
				})
				var refused *foreigncluster.RefusedError
				if errors.As(err, &refused) {
					handler{d}.Dropped(&dnssd.DropError{Reason: refused.Reason, Detail: refused.Detail}, nil)
					return
				}
				if err != nil && bctx.Err() == nil {
					d.log.Error(err, "Recording a cluster found on the LAN failed", "clusterID", s.announcement.ClusterID)
				}
			})
		}
		wg.Wait()
	}
}

// recordWorkers bounds the sightings recorded at once.
const recordWorkers = 8

// maxPending bounds the sightings waiting to be recorded.
const maxPending = 1024

func pendingKey(a *dnssd.Announcement) string { return a.ClusterID + " " + a.AuthURL }

func (d *Discovery) setBrowsing(ctx context.Context, on bool) {
	if !on {
		d.endBrowsing()
		return
	}
	d.browsingMu.Lock()
	defer d.browsingMu.Unlock()
	if d.browsing == nil {
		d.browsing, d.stopBrowsing = context.WithCancel(ctx)
	}
}

// endBrowsing cancels the browsing session, if any: sightings still being
// recorded are dropped.
func (d *Discovery) endBrowsing() {
	d.browsingMu.Lock()
	defer d.browsingMu.Unlock()
	if d.browsing != nil {
		d.stopBrowsing()
		d.browsing, d.stopBrowsing = nil, nil
	}
}

// browsingContext returns the current browsing session's context, or nil
// when not browsing.
func (d *Discovery) browsingContext() context.Context {
	d.browsingMu.Lock()
	defer d.browsingMu.Unlock()
	return d.browsing
}

func (d *Discovery) addresses() []net.IP {
	if d.server == nil {
		return nil
	}
	return d.server.Addresses()
}

type handler struct{ d *Discovery }

func (h handler) Found(f dnssd.Found, from net.Addr) {
	if f.Goodbye {
		// A sighting still pending is older than the goodbye: drop it.
		id, _, _ := strings.Cut(f.Instance, ".")
		h.d.pendingMu.Lock()
		for k := range h.d.pending {
			if strings.HasPrefix(k, id+" ") {
				delete(h.d.pending, k)
			}
		}
		h.d.pendingMu.Unlock()
		return // the checker ages the cluster out
	}
	if f.Announcement == nil {
		return // a PTR without its TXT: the next answer brings it
	}
	dnssd.FoundTotal.WithLabelValues(dnssd.SourceMDNS).Inc()
	key := pendingKey(f.Announcement)
	h.d.pendingMu.Lock()
	_, known := h.d.pending[key]
	full := !known && len(h.d.pending) >= maxPending
	if !full {
		h.d.pending[key] = sighting{announcement: *f.Announcement, at: time.Now()}
	}
	h.d.pendingMu.Unlock()
	if full {
		h.Dropped(&dnssd.DropError{Reason: dnssd.ReasonOverloaded, Detail: "too many sightings waiting to be recorded"}, from)
		return
	}
	select {
	case h.d.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

func (h handler) Dropped(err *dnssd.DropError, from net.Addr) {
	dnssd.DroppedTotal.WithLabelValues(dnssd.SourceMDNS, err.Reason).Inc()
	h.d.log.V(1).Info("Dropped mDNS input", "from", from, "reason", err.Reason, "detail", err.Detail)
}
