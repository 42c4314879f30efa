// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"math"
	"testing"
)

// TestQuantile: quantiles of the observations between two readings,
// linear within a bucket, the highest finite bound past it, NaN for none.
func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	before := []Bucket{{0.1, 5}, {0.2, 5}, {0.4, 5}, {inf, 5}}
	// In between: 10 under 0.1 s, 10 in (0.1, 0.2], none above.
	after := []Bucket{{0.1, 15}, {0.2, 25}, {0.4, 25}, {inf, 25}}
	for _, c := range []struct{ q, want float64 }{{0.5, 0.1}, {0.25, 0.05}, {0.75, 0.15}, {1, 0.2}} {
		if got := Quantile(c.q, before, after); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("q%.2f = %v, want %v", c.q, got, c.want)
		}
	}
	// Past the last finite bound: that bound.
	over := []Bucket{{0.1, 5}, {0.2, 5}, {0.4, 5}, {inf, 15}}
	if got := Quantile(0.99, before, over); got != 0.4 {
		t.Errorf("q0.99 beyond the buckets = %v, want 0.4", got)
	}
	if got := Quantile(0.5, before, before); !math.IsNaN(got) {
		t.Errorf("nothing observed: %v, want NaN", got)
	}
}
