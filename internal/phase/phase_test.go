// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package phase

import (
	"context"
	"errors"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// TestRun: phases run in order; one that ends the pass or fails stops the
// rest, and its result is the pass's; otherwise the last one's is.
func TestRun(t *testing.T) {
	var ran []string
	step := func(name string, next bool, after time.Duration, err error) Func[*[]string] {
		return func(_ context.Context, s *[]string) (ctrl.Result, bool, error) {
			*s = append(*s, name)
			return ctrl.Result{RequeueAfter: after}, next, err
		}
	}
	ctx := t.Context()
	res, err := Run(ctx, &ran, step("a", true, time.Second, nil), step("b", true, time.Minute, nil))
	if err != nil || res.RequeueAfter != time.Minute || len(ran) != 2 {
		t.Errorf("all phases: ran %v, result %v, err %v; want a, b, the last result", ran, res, err)
	}
	ran = nil
	res, err = Run(ctx, &ran, step("a", false, 2*time.Second, nil), step("b", true, 0, nil))
	if err != nil || res.RequeueAfter != 2*time.Second || len(ran) != 1 {
		t.Errorf("a phase ending the pass: ran %v, result %v, err %v; want only a, its result", ran, res, err)
	}
	ran = nil
	boom := errors.New("boom")
	if _, err = Run(ctx, &ran, step("a", true, 0, boom), step("b", true, 0, nil)); !errors.Is(err, boom) || len(ran) != 1 {
		t.Errorf("a failing phase: ran %v, err %v; want only a, its error", ran, err)
	}
}
