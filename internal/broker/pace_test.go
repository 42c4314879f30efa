// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"testing"
	"time"
)

// TestPacer: at most max moves of a consumer in any minute; a place is
// free again a minute after the move that took it; consumers count
// apart, and one with no move in the last minute is forgotten.
func TestPacer(t *testing.T) {
	var p pacer
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	if w := p.wait("a", 0, t0); w != 0 {
		t.Errorf("no bound: wait %s, want 0", w)
	}
	for i := range 3 {
		at := t0.Add(time.Duration(i) * 10 * time.Second)
		if w := p.wait("a", 3, at); w != 0 {
			t.Fatalf("move %d of 3: wait %s, want 0", i+1, w)
		}
		p.moved("a", at)
	}
	if w := p.wait("a", 3, t0.Add(25*time.Second)); w != 35*time.Second {
		t.Errorf("a 4th move at 25 s: wait %s, want 35 s (the first move leaves the window at 60 s)", w)
	}
	if w := p.wait("a", 2, t0.Add(25*time.Second)); w != 45*time.Second {
		t.Errorf("under a bound of 2, lowered after 3 moves: wait %s, want 45 s (two must leave: the second at 70 s)", w)
	}
	if w := p.wait("b", 3, t0.Add(25*time.Second)); w != 0 {
		t.Errorf("another consumer: wait %s, want 0", w)
	}
	if w := p.wait("a", 3, t0.Add(time.Minute)); w != 0 {
		t.Errorf("a minute after the first move: wait %s, want 0", w)
	}
	p.moved("a", t0.Add(time.Minute))
	if w := p.wait("a", 3, t0.Add(time.Minute+time.Second)); w != 9*time.Second {
		t.Errorf("3 moves again (at 10, 20 and 60 s): wait %s, want 9 s", w)
	}
	p.moved("b", t0.Add(3*time.Minute))
	if _, ok := p.moves["a"]; ok || len(p.moves) != 1 {
		t.Errorf("moves kept %v, want only b's: a moved over a minute ago", p.moves)
	}
}
