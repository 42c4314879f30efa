// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"sync"
	"time"
)

// paceWindow is the window maxMovesPerMinute counts moves over.
const paceWindow = time.Minute

// pacer keeps, by consumer, when the orchestrator moved its pods (evicted
// them off a provider no longer in use) over the last paceWindow: a
// policy's maxMovesPerMinute bounds them. In memory: a broker that
// restarts counts from zero, so at most one window's moves more. An
// eviction whose request timed out but went through is not counted: one
// move more.
type pacer struct {
	mu    sync.Mutex
	moves map[string][]time.Time // consumer -> its moves, oldest first
}

// wait is how long consumer must wait, at now, before one more move
// under max moves a window: 0 when it may move now (or max is 0, no
// bound).
func (p *pacer) wait(consumer string, maxMoves int32, now time.Time) time.Duration {
	if maxMoves <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	recent := p.recent(consumer, now)
	if len(recent) < int(maxMoves) {
		return 0
	}
	// The move that leaves the window next, as many as are over the
	// bound, frees a place.
	return recent[len(recent)-int(maxMoves)].Add(paceWindow).Sub(now)
}

// moved records one move of consumer's at now.
func (p *pacer) moved(consumer string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.moves == nil {
		p.moves = map[string][]time.Time{}
	}
	// Consumers with no move in the window are forgotten: the map holds
	// only those that moved in the last minute.
	for c := range p.moves {
		if c != consumer && len(p.recent(c, now)) == 0 {
			delete(p.moves, c)
		}
	}
	p.moves[consumer] = append(p.recent(consumer, now), now)
}

// recent drops consumer's moves older than the window, and returns
// those left. p.mu is held.
func (p *pacer) recent(consumer string, now time.Time) []time.Time {
	m := p.moves[consumer]
	i := 0
	for i < len(m) && !m[i].After(now.Add(-paceWindow)) {
		i++
	}
	if i > 0 {
		m = m[i:]
		if len(m) == 0 {
			delete(p.moves, consumer)
		} else {
			p.moves[consumer] = m
		}
	}
	return m
}
