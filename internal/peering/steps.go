// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// newSteps returns a function that logs, at debug level (V(1)), each step
// of what, with the time it took since the previous one: where a peering
// spends its time (--zap-log-level=debug).
func newSteps(ctx context.Context, what string, keysAndValues ...any) func(step string) {
	log := ctrl.LoggerFrom(ctx).V(1).WithValues(keysAndValues...)
	if !log.Enabled() {
		return func(string) {}
	}
	last := time.Now()
	return func(step string) {
		now := time.Now()
		log.Info("Step of "+what, "step", step, "took", now.Sub(last).String())
		last = now
	}
}
