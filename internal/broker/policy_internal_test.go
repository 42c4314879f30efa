// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"testing"
	"time"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
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

// TestDecisionOutcome: a decision is counted as changed when its chosen
// providers differ from the last decision's as a set, kept when they do
// not, and none when it chose nothing.
func TestDecisionOutcome(t *testing.T) {
	last := &brokerv1alpha1.Decision{Chosen: []string{"a", "b"}}
	for _, c := range []struct {
		name   string
		last   *brokerv1alpha1.Decision
		chosen []string
		want   string
	}{
		{"first", nil, []string{"a"}, decisionChanged},
		{"same, another order", last, []string{"b", "a"}, decisionKept},
		{"one more", last, []string{"a", "b", "c"}, decisionChanged},
		{"one less", last, []string{"a"}, decisionChanged},
		{"none", last, nil, decisionNone},
		{"none, first", nil, nil, decisionNone},
	} {
		if got := decisionOutcome(c.last, c.chosen); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
