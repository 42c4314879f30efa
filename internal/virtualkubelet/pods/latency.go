// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package pods

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The steps of a pod's reflection whose latency is measured.
const (
	// StepCreate runs from the moment the virtual kubelet sees a pod
	// bound to a virtual node, with no copy in the provider, until the
	// copy is created there.
	StepCreate = "create"
	// StepStatus runs from the moment the virtual kubelet sees a change
	// of the provider's pod until the consumer's pod shows it.
	StepStatus = "status"
)

// ReflectionSeconds is the latency of each step of a pod's reflection.
var ReflectionSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name: "liqo_virtualkubelet_pod_reflection_seconds",
	Help: "Latency of a pod's reflection, by step: create (a pod bound to a virtual node, seen, until its copy is created in the provider) " +
		"and status (a change of the provider's pod, seen, until the consumer's pod status is written).",
	Buckets: prometheus.ExponentialBuckets(0.005, 2, 15), // 5 ms to 82 s
}, []string{"step"})

func init() { metrics.Registry.MustRegister(ReflectionSeconds) }

// clock keeps, for each pod a step waits for, when the wait began; an
// entry goes when the step is done or has nothing to do, or the pod goes,
// so there are never more than pods.
type clock struct {
	mu    sync.Mutex
	since map[string]map[types.NamespacedName]time.Time
}

// start records now for pod's step, unless a wait already began.
func (c *clock) start(step string, pod types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since == nil {
		c.since = map[string]map[types.NamespacedName]time.Time{}
	}
	if c.since[step] == nil {
		c.since[step] = map[types.NamespacedName]time.Time{}
	}
	if _, ok := c.since[step][pod]; !ok {
		c.since[step][pod] = time.Now()
	}
}

// done observes how long pod's step took, if it was waited for, and
// forgets it.
func (c *clock) done(step string, pod types.NamespacedName) {
	c.mu.Lock()
	began, ok := c.since[step][pod]
	delete(c.since[step], pod)
	c.mu.Unlock()
	if ok {
		ReflectionSeconds.WithLabelValues(step).Observe(time.Since(began).Seconds())
	}
}

// forget drops pod's wait for step without observing it: there was
// nothing to do.
func (c *clock) forget(step string, pod types.NamespacedName) {
	c.mu.Lock()
	delete(c.since[step], pod)
	c.mu.Unlock()
}

// forgetAll drops every wait of pod: it is gone.
func (c *clock) forgetAll(pod types.NamespacedName) {
	c.mu.Lock()
	for _, waits := range c.since {
		delete(waits, pod)
	}
	c.mu.Unlock()
}

// pending is how many waits step has, for tests.
func (c *clock) pending(step string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.since[step])
}

// starting is h, and it starts step's clock for each object it is given
// that counts (nil counts every one), as the event arrives.
func starting(c *clock, step string, counts func(client.Object) bool, h handler.EventHandler) handler.EventHandler {
	start := func(o client.Object) {
		if o != nil && (counts == nil || counts(o)) {
			c.start(step, client.ObjectKeyFromObject(o))
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			start(e.Object)
			h.Create(ctx, e, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			start(e.ObjectNew)
			h.Update(ctx, e, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(ctx, e, q)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			start(e.Object)
			h.Generic(ctx, e, q)
		},
	}
}

// boundAndLive is a pod the virtual kubelet must create in a provider,
// unless it is there already.
func boundAndLive(o client.Object) bool {
	pod, ok := o.(*corev1.Pod)
	return ok && pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil
}
