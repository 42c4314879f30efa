// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	"slices"
	"testing"
)

// Under a policy the providers in use are the last decision's; before
// any decision (or under a policy invalid from the start), those enabled
// by hand, never none.
func TestInUse(t *testing.T) {
	hand := Selection{Spec: SelectionSpec{Providers: []string{"a"}}}
	if got := hand.InUse(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("without a policy: %v", got)
	}
	undecided := Selection{Spec: SelectionSpec{Providers: []string{"a"}, Policy: &Policy{Count: 1}}}
	if got := undecided.InUse(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("a policy not decided on yet: %v, want the providers enabled by hand", got)
	}
	decided := undecided
	decided.Status.Decision = &Decision{Chosen: []string{"b", "c"}}
	if got := decided.InUse(); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("a policy decided on: %v", got)
	}
}

// Under a decision the broker offers the consumer every provider its
// policy would let it use, not only those chosen: those outscored, not
// needed, or too small for today's requests too; never those disabled
// by hand or failing another criterion.
func TestOffered(t *testing.T) {
	hand := Selection{Spec: SelectionSpec{Providers: []string{"a"}}}
	if got := hand.Offered(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("without a policy: %v", got)
	}
	undecided := Selection{Spec: SelectionSpec{Providers: []string{"a"}, Policy: &Policy{Count: 1}}}
	if got := undecided.Offered(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("a policy not decided on yet: %v, want the providers enabled by hand", got)
	}
	decided := undecided
	decided.Status.Decision = &Decision{Chosen: []string{"chosen"}, Providers: []ProviderDecision{
		{ClusterID: "chosen", Verdict: VerdictChosen},
		{ClusterID: "outscored", Verdict: VerdictOutscored},
		{ClusterID: "notneeded", Verdict: VerdictNotNeeded},
		{ClusterID: "kept", Verdict: VerdictKept},
		{ClusterID: "small", Verdict: VerdictFiltered, Criterion: CriterionCapacity},
		{ClusterID: "slow", Verdict: VerdictFiltered, Criterion: "requirements.maxLatency"},
		{ClusterID: "down", Verdict: VerdictFiltered, Criterion: "availability"},
		{ClusterID: "off", Verdict: VerdictExcluded},
	}}
	if got, want := decided.Offered(), []string{"chosen", "kept", "notneeded", "outscored", "small"}; !slices.Equal(got, want) {
		t.Errorf("a policy decided on: %v, want %v", got, want)
	}
	if got := decided.InUse(); !slices.Equal(got, []string{"chosen"}) {
		t.Errorf("in use: %v, want only the chosen", got)
	}
}
