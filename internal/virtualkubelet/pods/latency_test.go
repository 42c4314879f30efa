// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package pods

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
)

// testStep is a step of the test's own, which the reflector never times.
const testStep = "test-step"

func observed(t *testing.T) uint64 {
	t.Helper()
	var m dto.Metric
	if err := ReflectionSeconds.WithLabelValues(testStep).(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// TestClock: a wait is observed once, when its step is done, from when it
// began (a second start does not restart it); a wait with nothing to do
// and the waits of a pod that goes are dropped unobserved, so none is
// left behind.
func TestClock(t *testing.T) {
	const step = testStep
	var c clock
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	before := observed(t)
	c.done(step, a) // never started: nothing to observe
	if got := observed(t) - before; got != 0 {
		t.Fatalf("a step never started was observed %d times", got)
	}
	c.start(step, a)
	began := c.since[step][a]
	c.start(step, a)
	if c.since[step][a] != began {
		t.Fatal("a second start restarted the wait")
	}
	c.start(step, b)
	c.start(StepStatus, b)
	if c.pending(step) != 2 {
		t.Fatalf("%d waits, want 2", c.pending(step))
	}
	c.done(step, a)
	c.done(step, a)
	if got := observed(t) - before; got != 1 {
		t.Fatalf("observed %d times, want once", got)
	}
	c.forget(step, b)
	if got := observed(t) - before; got != 1 || c.pending(step) != 0 {
		t.Fatalf("a forgotten wait was observed (%d) or kept (%d pending)", got, c.pending(step))
	}
	c.start(step, b)
	c.forgetAll(b)
	if c.pending(step) != 0 || c.pending(StepStatus) != 0 {
		t.Fatalf("a pod that went keeps %d and %d waits", c.pending(step), c.pending(StepStatus))
	}
}
