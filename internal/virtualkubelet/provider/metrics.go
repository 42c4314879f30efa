// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package provider

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// reflectionErrors counts the reflections into a provider that failed and
// are retried: the reflectors' answer to a provider that refuses, times
// out or is not there, by provider.
var reflectionErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "liqo_virtualkubelet_reflection_errors_total",
	Help: "Reflections of a pod or object into a provider that failed and are retried, by provider and resource (a conflict, retried at once, is not counted).",
}, []string{"provider", "resource"})

func init() { metrics.Registry.MustRegister(reflectionErrors) }

// ReflectionFailed counts err, if it is one, against the reflection of
// kind into providerID. A conflict (a write raced another, and is tried
// again with what the cache shows) is not a failure.
func ReflectionFailed(providerID string, kind Kind, err error) {
	if err == nil || providerID == "" || apierrors.IsConflict(err) {
		return
	}
	reflectionErrors.WithLabelValues(providerID, string(kind)).Inc()
}

// ReflectionErrors is how many reflections of kind into providerID
// failed so far.
func ReflectionErrors(providerID string, kind Kind) float64 {
	var m dto.Metric
	if err := reflectionErrors.WithLabelValues(providerID, string(kind)).Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
