// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"testing"
	"time"
)

// TestSawView: a view is timed by the broker's clock from its first
// change seen (not from its first sight, whose age is unknown), and a
// view gone is forgotten.
func TestSawView(t *testing.T) {
	var o Orchestrator
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	if s := o.sawView("c-1", "10", t0); !s.at.IsZero() {
		t.Errorf("first sight timed %v, want unknown", s.at)
	}
	if s := o.sawView("c-1", "10", t0.Add(time.Second)); !s.at.IsZero() {
		t.Errorf("the same version again timed %v, want unknown", s.at)
	}
	if s := o.sawView("c-1", "11", t0.Add(2*time.Second)); !s.at.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("a change timed %v, want when it was seen", s.at)
	}
	o.sawView("c-2", "5", t0)
	o.forgetView("c-1")
	if _, ok := o.views["c-1"]; ok || len(o.views) != 1 {
		t.Errorf("views %v after c-1's was deleted, want c-2's alone", o.views)
	}
	if s := o.sawView("c-1", "12", t0.Add(3*time.Second)); !s.at.IsZero() {
		t.Errorf("a view made again timed %v, want unknown, as a first sight", s.at)
	}
}
