// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package measure is how a broker measures its providers itself, rather
// than take what they declare: health checks of each provider's API
// server with the broker's own identity there, every few seconds, whose
// history (one-minute buckets over an hour, one-hour buckets over a week)
// is kept in a Measurement per provider, so that it survives restarts.
// The Prober runs in the broker cluster's controller manager, which holds
// the identities; liqo-broker reads the Measurements (Uptime, Latency).
package measure

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
)

// Defaults of a Prober.
const (
	DefaultInterval   = 2 * time.Second
	DefaultWriteEvery = 30 * time.Second
	// parallel bounds the probes in flight.
	parallel = 16
	// LatencyWindow is how far back the latency's median reaches: a
	// change shows within half of it.
	LatencyWindow = 15 * time.Second
)

// +kubebuilder:rbac:groups=broker.liqo.io,namespace=liqo,resources=measurements,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=broker.liqo.io,namespace=liqo,resources=measurements/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=net.liqo.io,resources=tunnelendpoints,verbs=get;list;watch

// Prober health-checks every provider the cluster consumes, through the
// virtual kubelet's identity there, and keeps what it finds in a
// Measurement per provider in Namespace.
type Prober struct {
	// Client reads ForeignClusters (cached) and writes Measurements.
	Client client.Client
	// Reader reads Measurements through to the API server (the
	// controller manager may read them in the Liqo namespace only, which
	// a cluster-wide cache could not); Client when nil.
	Reader client.Reader
	// Namespace is the Liqo namespace.
	Namespace string
	// Health pings a provider's API server (the virtual kubelet's).
	Health provider.Health
	// Interval between two probes of a provider; Timeout bounds one
	// (Interval when 0).
	Interval, Timeout time.Duration
	// WriteEvery is how often a provider's Measurement is written when
	// its reachability did not change (a change is written at once).
	WriteEvery time.Duration
	// Now is injectable for tests.
	Now func() time.Time

	trackers map[string]*tracker
	// swept is when Measurements of providers gone were last removed.
	swept time.Time
	// known are the providers with a Measurement, as last listed.
	known map[string]bool
}

// tracker is one provider's measurement, as it is being made.
type tracker struct {
	status  brokerv1alpha1.MeasurementStatus
	written time.Time
	// writtenLatency and writtenTunnel are the latencies last written.
	writtenLatency, writtenTunnel int64
	loaded                        bool
	recent                        []sample // the last minute's answered probes
	minuteLat                     []int64  // the current minute's latencies
}

type sample struct {
	at      time.Time
	latency time.Duration
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one
// replica measures.
func (p *Prober) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable: it probes until ctx ends.
func (p *Prober) Start(ctx context.Context) error {
	if p.Interval <= 0 {
		p.Interval = DefaultInterval
	}
	if p.Timeout <= 0 {
		p.Timeout = p.Interval
	}
	if p.WriteEvery <= 0 {
		p.WriteEvery = DefaultWriteEvery
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	log := ctrl.LoggerFrom(ctx).WithName("prober")
	tick := time.NewTicker(p.Interval)
	defer tick.Stop()
	for {
		if err := p.Round(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Measuring the providers")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Round probes every provider once, and writes what is due.
func (p *Prober) Round(ctx context.Context) error {
	if p.trackers == nil {
		p.trackers = map[string]*tracker{}
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	now := p.Now()
	var measurements *brokerv1alpha1.MeasurementList
	if p.known == nil || now.Sub(p.swept) >= p.writeEvery() {
		// Which providers have a history: one consumed before stays
		// consumed while it is down (Consumed); read at the start, and
		// again at each sweep, which this list serves too.
		measurements = &brokerv1alpha1.MeasurementList{}
		if err := p.reader().List(ctx, measurements, client.InNamespace(p.Namespace)); err != nil {
			return err
		}
		p.known = map[string]bool{}
		for i := range measurements.Items {
			p.known[measurements.Items[i].Name] = true
		}
	}
	providers, err := p.providers(ctx)
	if err != nil {
		return err
	}
	type result struct {
		id      string
		at      time.Time
		latency time.Duration
		err     error
	}
	results := make([]result, len(providers))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, id := range providers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			timeout := p.Timeout
			if timeout <= 0 {
				timeout = DefaultInterval
			}
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			start := time.Now()
			err := p.Health.Ping(pctx, id)
			results[i] = result{id: id, at: p.Now(), latency: time.Since(start), err: err}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err // stopping: the probes ended by it are no measurement
	}
	var errs []error
	for _, r := range results {
		t, err := p.tracker(ctx, r.id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		changed := t.record(r.at, r.latency, r.err)
		tunnel, err := p.tunnelLatency(ctx, r.id)
		if err != nil {
			// Not read: the figure stands, a failed read is no tunnel down.
			errs = append(errs, err)
			tunnel = t.status.TunnelLatencyMicros
		}
		changed = changed || (tunnel == 0) != (t.status.TunnelLatencyMicros == 0)
		t.status.TunnelLatencyMicros = tunnel
		if changed || significant(t.status.LatencyMicros, t.writtenLatency) || significant(tunnel, t.writtenTunnel) || r.at.Sub(t.written) >= p.writeEvery() {
			if err := p.write(ctx, r.id, t); err != nil {
				errs = append(errs, err)
				continue
			}
			t.written, t.writtenLatency, t.writtenTunnel = r.at, t.status.LatencyMicros, tunnel
		}
	}
	// A provider no longer consumed loses its measurement.
	for id := range p.trackers {
		if !slices.Contains(providers, id) {
			delete(p.trackers, id)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("writing measurements: %v", errs)
	}
	if measurements == nil {
		return nil
	}
	p.swept = now
	for i := range measurements.Items {
		if !slices.Contains(providers, measurements.Items[i].Name) {
			if err := p.Client.Delete(ctx, &measurements.Items[i]); client.IgnoreNotFound(err) != nil {
				errs = append(errs, err)
			}
			delete(p.known, measurements.Items[i].Name)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("writing measurements: %v", errs)
	}
	return nil
}

func (p *Prober) reader() client.Reader {
	if p.Reader != nil {
		return p.Reader
	}
	return p.Client
}

func (p *Prober) writeEvery() time.Duration {
	if p.WriteEvery > 0 {
		return p.WriteEvery
	}
	return DefaultWriteEvery
}

// providers are the clusters this one consumes (Consumed).
func (p *Prober) providers(ctx context.Context) ([]string, error) {
	var fcs discoveryv1alpha1.ForeignClusterList
	if err := p.Client.List(ctx, &fcs); err != nil {
		return nil, fmt.Errorf("listing the ForeignClusters: %w", err)
	}
	var out []string
	for i := range fcs.Items {
		id := fcs.Items[i].Spec.ClusterIdentity.ClusterID
		if Consumed(&fcs.Items[i], p.trackers[id] != nil || p.known[id]) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Consumed says whether this cluster consumes fc: its PeeringRequest was
// accepted; or it still wants the peering (join), its request fails (the
// provider does not answer, or gives no identity), and it was consumed
// before: it has a virtual node here, or measured says it has a history
// (a Measurement). A provider down is still one this cluster consumes,
// and must be measured down, not forgotten: also once its offer expired
// while it was down and its virtual node went with it, which used to
// drop it from every decision and delete its history.
func Consumed(fc *discoveryv1alpha1.ForeignCluster, measured bool) bool {
	if fc.Spec.ClusterIdentity.ClusterID == "" {
		return false
	}
	c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
	if c != nil && c.Status == metav1.ConditionTrue && c.Reason == discoveryv1alpha1.ReasonAccepted {
		return true
	}
	if !fc.Spec.Join || c == nil || (c.Reason != discoveryv1alpha1.ReasonRequestFailed && c.Reason != discoveryv1alpha1.ReasonAuthFailed) {
		return false
	}
	return measured || meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionVirtualNodeReady) != nil
}

// tunnelLatency is the round trip through the tunnel to provider's
// gateway as this cluster's gateway last measured it, in microseconds: 0
// while the tunnel is not established, or there is none (no network
// fabric, or its API not installed).
func (p *Prober) tunnelLatency(ctx context.Context, provider string) (int64, error) {
	var tep netv1alpha1.TunnelEndpoint
	switch err := p.Client.Get(ctx, client.ObjectKey{Name: provider}, &tep); {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("reading the tunnel to %s: %w", provider, err)
	}
	if tep.Status.Latency == nil || !meta.IsStatusConditionTrue(tep.Status.Conditions, netv1alpha1.ConditionEstablished) {
		return 0, nil
	}
	return max(tep.Status.Latency.Microseconds(), 1), nil
}

// tracker returns id's tracker, its history read back from its
// Measurement the first time.
func (p *Prober) tracker(ctx context.Context, id string) (*tracker, error) {
	t := p.trackers[id]
	if t == nil {
		t = &tracker{}
		p.trackers[id] = t
	}
	if !t.loaded {
		var m brokerv1alpha1.Measurement
		switch err := p.reader().Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: id}, &m); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading the measurement of %s: %w", id, err)
		default:
			t.status = m.Status
		}
		t.loaded = true
	}
	return t, nil
}

// record adds a probe; it says whether the provider's reachability
// changed.
func (t *tracker) record(at time.Time, latency time.Duration, err error) bool {
	st := &t.status
	up := err == nil
	changed := st.LastProbe == nil || st.Reachable != up
	now := metav1.NewTime(at)
	st.LastProbe, st.Reachable = &now, up
	if up {
		st.UnreachableSince, st.LastError = nil, ""
		t.recent = append(t.recent, sample{at: at, latency: latency})
	} else {
		if st.UnreachableSince == nil {
			st.UnreachableSince = &now
		}
		st.LastError = err.Error()
		if len(st.LastError) > 256 {
			st.LastError = st.LastError[:256]
		}
	}
	t.recent = slices.DeleteFunc(t.recent, func(s sample) bool { return at.Sub(s.at) > LatencyWindow })
	var lats []int64
	for _, s := range t.recent {
		lats = append(lats, s.latency.Microseconds())
	}
	st.LatencyMicros = median(lats)

	// The minute's bucket.
	minute := at.Truncate(time.Minute)
	if n := len(st.Minutes); n == 0 || !st.Minutes[n-1].Start.Time.Equal(minute) {
		st.Minutes = append(st.Minutes, brokerv1alpha1.Bucket{Start: metav1.NewTime(minute)})
		t.minuteLat = nil
	}
	st.Minutes = trim(st.Minutes, at.Add(-time.Hour), brokerv1alpha1.MinuteBuckets)
	b := &st.Minutes[len(st.Minutes)-1]
	b.Probes++
	if up {
		b.Up++
		t.minuteLat = append(t.minuteLat, latency.Microseconds())
		b.LatencyMicros = median(t.minuteLat)
	}
	// The hour's.
	hour := at.Truncate(time.Hour)
	if n := len(st.Hours); n == 0 || !st.Hours[n-1].Start.Time.Equal(hour) {
		st.Hours = append(st.Hours, brokerv1alpha1.Bucket{Start: metav1.NewTime(hour)})
	}
	st.Hours = trim(st.Hours, at.Add(-7*24*time.Hour), brokerv1alpha1.HourBuckets)
	h := &st.Hours[len(st.Hours)-1]
	h.Probes++
	if up {
		h.Up++
	}
	// The hour's latency is the median of its minutes' (all kept).
	var mins []int64
	for _, m := range st.Minutes {
		if !m.Start.Time.Before(hour) && m.LatencyMicros > 0 {
			mins = append(mins, m.LatencyMicros)
		}
	}
	h.LatencyMicros = median(mins)
	return changed
}

// significant says whether the latency moved, since last written, by a
// fifth and by 2 ms at least: written at once, so that a provider
// becoming far shows within LatencyWindow/2, not at the next WriteEvery.
func significant(now, written int64) bool {
	d := now - written
	if d < 0 {
		d = -d
	}
	return d >= 2000 && d*5 >= written
}

// trim drops the buckets that started before since, and the oldest
// beyond limit.
func trim(bs []brokerv1alpha1.Bucket, since time.Time, limit int) []brokerv1alpha1.Bucket {
	bs = slices.DeleteFunc(bs, func(b brokerv1alpha1.Bucket) bool { return !b.Start.After(since) })
	if len(bs) > limit {
		bs = bs[len(bs)-limit:]
	}
	return bs
}

func median(vs []int64) int64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[len(s)/2]
}

// write stores t's status in id's Measurement, creating it.
func (p *Prober) write(ctx context.Context, id string, t *tracker) error {
	var m brokerv1alpha1.Measurement
	key := client.ObjectKey{Namespace: p.Namespace, Name: id}
	err := p.reader().Get(ctx, key, &m)
	if apierrors.IsNotFound(err) {
		m = brokerv1alpha1.Measurement{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: id,
			Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: id}}}
		if err := p.Client.Create(ctx, &m); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("measurement of %s: %w", id, err)
		}
	} else if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(m.Status, t.status) {
		return nil
	}
	patch := client.MergeFrom(m.DeepCopy())
	m.Status = *t.status.DeepCopy()
	if err := p.Client.Status().Patch(ctx, &m, patch); err != nil {
		return fmt.Errorf("measurement of %s: %w", id, err)
	}
	return nil
}

// Uptime is the share of the probes answered over each window, from its
// buckets; a window without probes is absent.
func Uptime(st *brokerv1alpha1.MeasurementStatus, now time.Time) map[brokerv1alpha1.UptimeWindow]float64 {
	out := map[brokerv1alpha1.UptimeWindow]float64{}
	add := func(w brokerv1alpha1.UptimeWindow, bs []brokerv1alpha1.Bucket, span time.Duration) {
		var probes, up int64
		for _, b := range bs {
			if now.Sub(b.Start.Time) < span {
				probes += int64(b.Probes)
				up += int64(b.Up)
			}
		}
		if probes > 0 {
			out[w] = float64(up) / float64(probes)
		}
	}
	add(brokerv1alpha1.Window1h, st.Minutes, time.Hour)
	add(brokerv1alpha1.Window24h, st.Hours, 24*time.Hour)
	add(brokerv1alpha1.Window7d, st.Hours, 7*24*time.Hour)
	return out
}
