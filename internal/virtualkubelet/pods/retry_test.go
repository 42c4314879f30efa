// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package pods

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestRetryLimiterCaps: a pod refused again and again (a quota that does
// not fit it yet) is tried again within maxRetryDelay, however many times
// it failed; the first retries stay quick, and a success starts over.
func TestRetryLimiterCaps(t *testing.T) {
	l := retryLimiter()
	pod := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}}
	if d := l.When(pod); d > 10*time.Millisecond {
		t.Errorf("first retry after %v, want at most 10ms", d)
	}
	var last time.Duration
	for range 40 {
		last = l.When(pod)
		if last > maxRetryDelay {
			t.Fatalf("a retry after %v, more than %v", last, maxRetryDelay)
		}
	}
	if last != maxRetryDelay {
		t.Errorf("after 40 failures the delay is %v, want the cap %v", last, maxRetryDelay)
	}
	l.Forget(pod)
	if d := l.When(pod); d > 10*time.Millisecond {
		t.Errorf("after a success the next retry waits %v, want at most 10ms", d)
	}
}
