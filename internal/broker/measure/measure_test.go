// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package measure

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

var t0 = time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)

// health answers each provider's probe as the test says: after a delay,
// with an error or not.
type health struct {
	mu    sync.Mutex
	delay map[string]time.Duration
	fail  map[string]error
}

func (h *health) Ping(ctx context.Context, id string) error {
	h.mu.Lock()
	d, err := h.delay[id], h.fail[id]
	h.mu.Unlock()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

func (h *health) set(id string, d time.Duration, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.delay[id], h.fail[id] = d, err
}

// The tracker keeps an hour of minutes and a week of hours, however long
// it runs, and the windows' uptime comes from them.
func TestTrackerBoundsItsHistory(t *testing.T) {
	var tr tracker
	at := t0
	// Nine days, a probe a minute; down for the first 30 minutes of
	// each day.
	for i := range 9 * 24 * 60 {
		at = t0.Add(time.Duration(i) * time.Minute)
		var err error
		if at.Sub(at.Truncate(24*time.Hour)) < 30*time.Minute {
			err = errors.New("refused")
		}
		tr.record(at, 3*time.Millisecond, err)
	}
	st := &tr.status
	if len(st.Minutes) != brokerv1alpha1.MinuteBuckets || len(st.Hours) != brokerv1alpha1.HourBuckets {
		t.Fatalf("%d minutes, %d hours kept; want %d and %d", len(st.Minutes), len(st.Hours), brokerv1alpha1.MinuteBuckets, brokerv1alpha1.HourBuckets)
	}
	if !st.Minutes[len(st.Minutes)-1].Start.Time.Equal(at.Truncate(time.Minute)) || !st.Hours[len(st.Hours)-1].Start.Time.Equal(at.Truncate(time.Hour)) {
		t.Errorf("the last buckets start at %v and %v, want the current minute and hour", st.Minutes[len(st.Minutes)-1].Start, st.Hours[len(st.Hours)-1].Start)
	}
	up := Uptime(st, at)
	// The last hour (23:00 to 23:59) was all up; a day and a week each
	// had 30 minutes of 1440 down.
	if up[brokerv1alpha1.Window1h] != 1 {
		t.Errorf("uptime over 1h %v, want 1", up[brokerv1alpha1.Window1h])
	}
	for _, w := range []brokerv1alpha1.UptimeWindow{brokerv1alpha1.Window24h, brokerv1alpha1.Window7d} {
		if got, want := up[w], 1-30.0/1440; got < want-0.001 || got > want+0.001 {
			t.Errorf("uptime over %s %v, want %v", w, got, want)
		}
	}
	if st.LatencyMicros != 3000 || st.Hours[len(st.Hours)-1].LatencyMicros != 3000 {
		t.Errorf("latency %d µs, the hour's %d, want 3000", st.LatencyMicros, st.Hours[len(st.Hours)-1].LatencyMicros)
	}
	if len(Uptime(&brokerv1alpha1.MeasurementStatus{}, at)) != 0 {
		t.Error("a provider never probed has an uptime")
	}
}

// A latency moving by a fifth and 2 ms is written at once; jitter is not.
func TestSignificant(t *testing.T) {
	for _, tc := range []struct {
		now, written int64
		want         bool
	}{
		{20000, 20000, false}, {21000, 20000, false}, {60000, 20000, true}, {20000, 60000, true},
		{1500, 500, false}, {3000, 500, true}, {102000, 100000, false}, {125000, 100000, true},
	} {
		if got := significant(tc.now, tc.written); got != tc.want {
			t.Errorf("from %d µs to %d µs: significant %v, want %v", tc.written, tc.now, got, tc.want)
		}
	}
}

// A provider that stops answering is still one the cluster consumes (its
// peering request fails, its virtual node is there); one never accepted,
// or unpeered, is not.
func TestConsumed(t *testing.T) {
	cond := func(typ, reason string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Reason: reason, Status: status}
	}
	requested := func(reason string, status metav1.ConditionStatus) metav1.Condition {
		return cond(discoveryv1alpha1.ConditionPeeringRequested, reason, status)
	}
	vnode := cond(discoveryv1alpha1.ConditionVirtualNodeReady, discoveryv1alpha1.ReasonProviderUnreachable, metav1.ConditionFalse)
	failed := requested(discoveryv1alpha1.ReasonRequestFailed, metav1.ConditionFalse)
	for _, tc := range []struct {
		name     string
		join     bool
		conds    []metav1.Condition
		measured bool
		want     bool
	}{
		{"accepted", true, []metav1.Condition{requested(discoveryv1alpha1.ReasonAccepted, metav1.ConditionTrue)}, false, true},
		{"down, with its virtual node", true, []metav1.Condition{failed, vnode}, false, true},
		{"down, its offer expired and its virtual node gone, measured before", true, []metav1.Condition{failed}, true, true},
		{"down, its identity refused, measured before", true, []metav1.Condition{requested(discoveryv1alpha1.ReasonAuthFailed, metav1.ConditionFalse)}, true, true},
		{"never accepted", true, []metav1.Condition{failed}, false, false},
		{"unpeered", false, []metav1.Condition{failed, vnode}, true, false},
		{"refused by the provider, measured before", true, []metav1.Condition{requested(discoveryv1alpha1.ReasonRefusedByProvider, metav1.ConditionFalse)}, true, false},
		{"pending", true, []metav1.Condition{requested(discoveryv1alpha1.ReasonPending, metav1.ConditionTrue)}, false, false},
	} {
		fc := peer("p")
		fc.Spec.Join, fc.Status.Conditions = tc.join, tc.conds
		if got := Consumed(fc, tc.measured); got != tc.want {
			t.Errorf("%s: consumed %v, want %v", tc.name, got, tc.want)
		}
	}
}

func peer(id string) *discoveryv1alpha1.ForeignCluster {
	return &discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: id},
		Spec: discoveryv1alpha1.ForeignClusterSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: id, ClusterName: id}}}
}

// TestProber, against a real API server: every provider the cluster
// consumes gets a Measurement with its reachability, latency (also
// through the tunnel, as the gateway measures it) and history; a change
// of reachability, or of the tunnel's, is written at once, the rest every
// WriteEvery; a prober started again goes on from the history stored;
// a provider no longer consumed loses its Measurement.
func TestProber(t *testing.T) {
	_, c := envtest.StartInstalled(t, "prober")
	ctx := t.Context()
	for _, id := range []string{"near", "down"} {
		fc := peer(id)
		if err := c.Create(ctx, fc); err != nil {
			t.Fatal(err)
		}
		meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{Type: discoveryv1alpha1.ConditionPeeringRequested,
			Status: metav1.ConditionTrue, Reason: discoveryv1alpha1.ReasonAccepted, Message: "accepted"})
		if err := c.Status().Update(ctx, fc); err != nil {
			t.Fatal(err)
		}
	}
	// A peer this cluster does not consume is not measured.
	if err := c.Create(ctx, peer("consumer-only")); err != nil {
		t.Fatal(err)
	}
	h := &health{delay: map[string]time.Duration{"near": 20 * time.Millisecond}, fail: map[string]error{"down": errors.New("connection refused")}}
	now := t0
	newProber := func() *Prober {
		return &Prober{Client: c, Namespace: install.DefaultNamespace, Health: h, Timeout: time.Second, WriteEvery: 10 * time.Second, Now: func() time.Time { return now }}
	}
	p := newProber()
	get := func(id string) *brokerv1alpha1.Measurement {
		t.Helper()
		var m brokerv1alpha1.Measurement
		if err := c.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: id}, &m); err != nil {
			t.Fatalf("measurement of %s: %v", id, err)
		}
		return &m
	}
	round := func() {
		t.Helper()
		if err := p.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// near's tunnel is up, 7 ms through as its gateway measures it;
	// down's is not established.
	tunnel := func(id string, latency time.Duration, established bool) {
		t.Helper()
		tep := &netv1alpha1.TunnelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: id}}
		if err := c.Get(ctx, client.ObjectKeyFromObject(tep), tep); apierrors.IsNotFound(err) {
			tep.Spec = netv1alpha1.TunnelEndpointSpec{ClusterID: id, PublicKey: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
				Remote: netv1alpha1.Ranges{PodCIDR: "10.100.0.0/16", ExternalCIDR: "10.70.0.0/16"}, RemoteSeenAs: netv1alpha1.Ranges{PodCIDR: "10.0.0.0/16", ExternalCIDR: "10.4.0.0/16"}}
			if err := c.Create(ctx, tep); err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		status := metav1.ConditionFalse
		if established {
			status = metav1.ConditionTrue
		}
		tep.Status.Latency = &metav1.Duration{Duration: latency}
		meta.SetStatusCondition(&tep.Status.Conditions, metav1.Condition{Type: netv1alpha1.ConditionEstablished, Status: status, Reason: "Probed", Message: "probed"})
		if err := c.Status().Update(ctx, tep); err != nil {
			t.Fatal(err)
		}
	}
	tunnel("near", 7*time.Millisecond, true)
	tunnel("down", 3*time.Millisecond, false)
	round()
	near, down := get("near"), get("down")
	if near.Status.TunnelLatencyMicros != 7000 || down.Status.TunnelLatencyMicros != 0 {
		t.Errorf("tunnel latency near %d µs, down %d; want 7000 (its gateway's figure) and none (not established)", near.Status.TunnelLatencyMicros, down.Status.TunnelLatencyMicros)
	}
	if !near.Status.Reachable || near.Status.LatencyMicros < 20000 || near.Status.LatencyMicros > 900000 {
		t.Errorf("near: reachable %v, latency %d µs; want reachable at 20 ms or more", near.Status.Reachable, near.Status.LatencyMicros)
	}
	if down.Status.Reachable || down.Status.UnreachableSince == nil || !down.Status.UnreachableSince.Time.Equal(t0) || down.Status.LastError != "connection refused" {
		t.Errorf("down: %+v", down.Status)
	}
	var list brokerv1alpha1.MeasurementList
	if err := c.List(ctx, &list); err != nil || len(list.Items) != 2 {
		t.Fatalf("%d measurements (%v), want near's and down's only", len(list.Items), err)
	}

	// 2 s later: nothing changed, nothing written; down comes back:
	// written at once.
	now = t0.Add(2 * time.Second)
	h.set("down", 0, nil)
	round()
	if n := get("near"); n.Status.LastProbe.Time.Equal(now) || n.Status.Minutes[0].Probes != 1 {
		t.Errorf("near written again before WriteEvery: %+v", n.Status)
	}
	if d := get("down"); !d.Status.Reachable || d.Status.UnreachableSince != nil || d.Status.Minutes[0].Probes != 2 || d.Status.Minutes[0].Up != 1 {
		t.Errorf("down, back: %+v; want reachable at once, 1 of 2 probes up", d.Status)
	}
	now = t0.Add(10 * time.Second)
	round()
	if n := get("near"); n.Status.Minutes[0].Probes != 3 {
		t.Errorf("near after WriteEvery: %d probes stored, want 3", n.Status.Minutes[0].Probes)
	}
	// near's tunnel goes down: written at once, before WriteEvery.
	tunnel("near", 7*time.Millisecond, false)
	now = t0.Add(11 * time.Second)
	round()
	if n := get("near"); n.Status.TunnelLatencyMicros != 0 || !n.Status.LastProbe.Time.Equal(now) {
		t.Errorf("near's tunnel down: %d µs written at %v, want none at once (%v)", n.Status.TunnelLatencyMicros, n.Status.LastProbe, now)
	}

	// Started again, it goes on from what is stored.
	p = newProber()
	now = t0.Add(12 * time.Second)
	h.set("near", 0, errors.New("timeout"))
	round()
	if n := get("near"); n.Status.Minutes[0].Probes != 5 || n.Status.Minutes[0].Up != 4 || n.Status.Reachable {
		t.Errorf("near after a restart: %+v; want 4 of 5 probes up, unreachable now", n.Status.Minutes[0])
	}
	if up := Uptime(&get("near").Status, now); up[brokerv1alpha1.Window1h] != 0.8 || up[brokerv1alpha1.Window7d] != 0.8 {
		t.Errorf("near's uptime %v, want 0.8 over each window", up)
	}

	// No longer consumed: its Measurement goes, at the next sweep
	// (every WriteEvery).
	now = t0.Add(30 * time.Second)
	if err := c.Delete(ctx, peer("down")); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := p.Round(ctx); err != nil {
			return err
		}
		var m brokerv1alpha1.Measurement
		if err := c.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: "down"}, &m); err == nil {
			return errors.New("down's measurement is still there")
		}
		return nil
	})

	// near, down so long that its offer expired and its virtual node went
	// (its peering request failing, no VirtualNodeReady), is still
	// consumed: a prober started anew knows it from its Measurement,
	// measures it down, and its sweep keeps its history.
	var fc discoveryv1alpha1.ForeignCluster
	if err := c.Get(ctx, client.ObjectKey{Name: "near"}, &fc); err != nil {
		t.Fatal(err)
	}
	fc.Spec.Join = true
	if err := c.Update(ctx, &fc); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{Type: discoveryv1alpha1.ConditionPeeringRequested,
		Status: metav1.ConditionFalse, Reason: discoveryv1alpha1.ReasonRequestFailed, Message: "connection refused"})
	if err := c.Status().Update(ctx, &fc); err != nil {
		t.Fatal(err)
	}
	p = newProber()
	now = t0.Add(50 * time.Second)
	round()
	if n := get("near"); !n.Status.LastProbe.Time.Equal(now) || n.Status.Reachable || n.Status.Minutes[0].Up != 4 {
		t.Errorf("near, down with its virtual node gone: %+v; want measured now, unreachable, its 4 probes up kept", n.Status)
	}
}
