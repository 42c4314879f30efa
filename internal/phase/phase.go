// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package phase runs one pass of a reconciler as a list of phases, in the
// shape of cluster-api's machine controller: each phase does one step and
// records what it found in the object's status (held by the scope the
// phases share); the reconciler writes the status once, after the pass.
package phase

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
)

// Func is one phase of a pass over scope s. It returns next=false to end
// the pass there (waiting for something, or after a step that must be
// recorded before the next one runs); result says when to come back. The
// last phase's result is the pass's.
type Func[S any] func(ctx context.Context, s S) (result ctrl.Result, next bool, err error)

// Run runs phases in order until one fails or ends the pass, and returns
// the result of the last one that ran.
func Run[S any](ctx context.Context, s S, phases ...Func[S]) (ctrl.Result, error) {
	var result ctrl.Result
	for _, p := range phases {
		var next bool
		var err error
		if result, next, err = p(ctx, s); err != nil || !next {
			return result, err
		}
	}
	return result, nil
}
