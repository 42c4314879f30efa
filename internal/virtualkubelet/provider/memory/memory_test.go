// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package memory_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider/memory"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider/providertest"
)

// TestContract: the in-memory provider answers as the contract says a
// provider does, so that what the reflectors' tests show holds against a
// real one: API errors on stale writes, deletions by UID, graceful pod
// deletion, and an event for every change.
func TestContract(t *testing.T) {
	p := memory.New()
	providertest.Run(t, providertest.Harness{
		Providers: p, Provider: "p1", LocalClusterID: "consumer", Local: "web", Remote: "consumer-web", Node: "n1",
		Remove: func(_ context.Context, kind provider.Kind, name string) error {
			p.Remove("p1", kind, "consumer-web", name)
			return nil
		},
		Measure: func(_ context.Context, pod string, at time.Time, usage map[string]corev1.ResourceList) error {
			p.Measure("p1", "consumer-web", pod, provider.PodUsage{Timestamp: at, Window: 10 * time.Second, Containers: usage})
			return nil
		},
	})
}
