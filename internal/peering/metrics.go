// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Reasons of liqo_peering_waits_total: the waits that remain on the way
// to a peering, each for something this cluster cannot see by watching.
const (
	// waitAuthRetry: the token exchange failed; it is tried again after
	// a back-off (0.5 s, growing to 5 s), the reason in Authenticated.
	waitAuthRetry = "AuthenticationRetry"
	// waitRequestRetry: creating the PeeringRequest failed; tried again
	// after 5 s, the reason in PeeringRequested.
	waitRequestRetry = "RequestRetry"
	// waitRefusalGrace: the provider refused the identity while not
	// ready (an API server whose authorizer has not synced); asked again
	// every second for up to refusalGrace before authenticating again.
	waitRefusalGrace = "RefusedWhileNotReady"
	// waitRBACPropagation: the provider's authorizer does not know the
	// identity's new grant yet; read again every 100 ms, for up to 5 s.
	waitRBACPropagation = "RBACPropagation"
	// waitConsumerNotVerified: the provider could not verify the consumer
	// yet; tried again after 5 s, the reason in ConsumerVerified.
	waitConsumerNotVerified = "ConsumerNotVerified"
)

var (
	waits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "liqo_peering_waits_total",
		Help: "Waits on the way to a peering that no watch can end early (retries after a failure, propagation delays), by reason.",
	}, []string{"reason"})
	durations = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "liqo_peering_duration_seconds",
		Help:    "Time from join to the PeeringRequest admitted by the provider (phase requested) and accepted by it (phase accepted), as the consumer saw it.",
		Buckets: []float64{0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300},
	}, []string{"phase"})
)

func init() { metrics.Registry.MustRegister(waits, durations) }

// joinClock times each peering from when this controller manager first
// saw it joined until it is accepted.
type joinClock struct{ started sync.Map } // ForeignCluster name -> *joinTiming

type joinTiming struct {
	start     time.Time
	requested bool
}

// observe records the peering of fc at its current stage. A peering seen
// only once accepted (accepted before this controller manager started) is
// not timed. One ForeignCluster is reconciled by one worker at a time.
func (j *joinClock) observe(fc string, requested, accepted bool) {
	if accepted {
		v, ok := j.started.LoadAndDelete(fc)
		if !ok {
			return
		}
		t := v.(*joinTiming)
		if !t.requested {
			durations.WithLabelValues("requested").Observe(time.Since(t.start).Seconds())
		}
		durations.WithLabelValues("accepted").Observe(time.Since(t.start).Seconds())
		return
	}
	v, _ := j.started.LoadOrStore(fc, &joinTiming{start: time.Now()})
	if t := v.(*joinTiming); requested && !t.requested {
		t.requested = true
		durations.WithLabelValues("requested").Observe(time.Since(t.start).Seconds())
	}
}

// forget drops fc's timing (unpeered).
func (j *joinClock) forget(fc string) { j.started.Delete(fc) }
