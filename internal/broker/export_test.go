// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import dto "github.com/prometheus/client_model/go"

// Decisions is how many decisions had outcome so far
// (liqo_broker_decisions_total).
func Decisions(outcome string) float64 {
	var m dto.Metric
	if err := decisions.WithLabelValues(outcome).Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
