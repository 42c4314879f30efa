// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package decide

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
)

var t0 = time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)

func res(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

func candidate(id string, latency time.Duration, cpuPrice string, free corev1.ResourceList) Candidate {
	return Candidate{
		ClusterID: id, Latency: latency, LatencyKnown: true, Free: free,
		Uptime:   map[brokerv1alpha1.UptimeWindow]float64{brokerv1alpha1.Window1h: 1, brokerv1alpha1.Window24h: 1},
		Prices:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuPrice)},
		Currency: "EUR", Period: brokerv1alpha1.PerHour,
	}
}

func find(d brokerv1alpha1.Decision, id string) brokerv1alpha1.ProviderDecision {
	for _, p := range d.Providers {
		if p.ClusterID == id {
			return p
		}
	}
	return brokerv1alpha1.ProviderDecision{}
}

func term(p brokerv1alpha1.ProviderDecision, name string) brokerv1alpha1.Term {
	for _, t := range p.Terms {
		if t.Name == name {
			return t
		}
	}
	return brokerv1alpha1.Term{}
}

// Two providers asked for under a price and a latency limit: the two that
// pass are chosen, and the third's explanation names the criterion and
// the value that ruled it out.
func TestDecideFiltersAndExplains(t *testing.T) {
	policy := &brokerv1alpha1.Policy{Count: 2, Requirements: brokerv1alpha1.Requirements{
		MaxLatency: &metav1.Duration{Duration: 50 * time.Millisecond},
		MaxPrice:   &brokerv1alpha1.MaxPrice{Currency: "EUR", PerUnit: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.05")}},
	}}
	in := Input{Now: t0, Policy: policy, Candidates: []Candidate{
		candidate("cheap-far", 80*time.Millisecond, "0.01", res("8", "16Gi")),
		candidate("near", 5*time.Millisecond, "0.04", res("4", "8Gi")),
		candidate("mid", 20*time.Millisecond, "0.02", res("4", "8Gi")),
		candidate("dear", 5*time.Millisecond, "0.09", res("4", "8Gi")),
	}}
	d := Decide(in)
	if !slices.Equal(d.Chosen, []string{"mid", "near"}) {
		t.Fatalf("chosen %v, want mid and near; %s", d.Chosen, d.Message)
	}
	far := find(d, "cheap-far")
	if far.Verdict != brokerv1alpha1.VerdictFiltered || far.Criterion != CriterionMaxLatency || far.Measured != "80.0ms" || far.Limit != "50.0ms" {
		t.Errorf("cheap-far: %+v, want filtered by %s at 80.0ms over 50.0ms", far, CriterionMaxLatency)
	}
	dear := find(d, "dear")
	if dear.Verdict != brokerv1alpha1.VerdictFiltered || dear.Criterion != CriterionMaxPrice || !strings.Contains(dear.Measured, "0.09") {
		t.Errorf("dear: %+v, want filtered by %s at 0.09", dear, CriterionMaxPrice)
	}
	if len(far.Terms) != 0 {
		t.Errorf("a filtered provider has no score terms, got %v", far.Terms)
	}
	for _, want := range []string{"cheap-far (requirements.maxLatency: 80.0ms, limit 50.0ms)", "dear (requirements.maxPrice"} {
		if !strings.Contains(d.Message, want) {
			t.Errorf("the decision's message %q does not say %q", d.Message, want)
		}
	}
	if !d.Time.Equal(&metav1.Time{Time: t0}) {
		t.Errorf("decision time %v, want %v", d.Time, t0)
	}
	near, mid := find(d, "near"), find(d, "mid")
	if near.Verdict != brokerv1alpha1.VerdictChosen || mid.Verdict != brokerv1alpha1.VerdictChosen {
		t.Errorf("near %s, mid %s: want both Chosen", near.Verdict, mid.Verdict)
	}
	// Each term is there, with its measured value; the total is their
	// weighted mean.
	for _, p := range []brokerv1alpha1.ProviderDecision{near, mid} {
		var sum, weight int64
		for _, tm := range p.Terms {
			sum += int64(tm.Score) * int64(tm.Weight)
			weight += int64(tm.Weight)
		}
		if got := total(sum, weight); got != p.Score || len(p.Terms) != 5 {
			t.Errorf("%s: score %d, its %d terms give %d", p.ClusterID, p.Score, len(p.Terms), got)
		}
	}
	if tm := term(near, TermLatency); tm.Score != 1000 || tm.Measured != "5.0ms" {
		t.Errorf("near's latency term %+v, want 1000 from 5.0ms", tm)
	}
	if tm := term(mid, TermPrice); tm.Score != 1000 || !strings.Contains(tm.Measured, "EUR/h") {
		t.Errorf("mid's price term %+v, want 1000 (the cheapest passing)", tm)
	}
	// Best first.
	if d.Providers[0].Score < d.Providers[1].Score {
		t.Errorf("providers not best first: %v", d.Providers)
	}
}

// Changing a weight changes the choice, and the terms say why.
func TestDecideWeightsChangeTheChoice(t *testing.T) {
	cands := []Candidate{
		candidate("near-dear", 2*time.Millisecond, "0.08", res("4", "8Gi")),
		candidate("far-cheap", 40*time.Millisecond, "0.01", res("4", "8Gi")),
	}
	byPrice := Decide(Input{Now: t0, Policy: &brokerv1alpha1.Policy{Count: 1, Weights: brokerv1alpha1.Weights{Price: 10, Latency: 1}}, Candidates: cands})
	byLatency := Decide(Input{Now: t0, Policy: &brokerv1alpha1.Policy{Count: 1, Weights: brokerv1alpha1.Weights{Price: 1, Latency: 10}}, Candidates: cands})
	if !slices.Equal(byPrice.Chosen, []string{"far-cheap"}) || !slices.Equal(byLatency.Chosen, []string{"near-dear"}) {
		t.Fatalf("by price %v, by latency %v: want far-cheap, then near-dear", byPrice.Chosen, byLatency.Chosen)
	}
	nd := find(byPrice, "near-dear")
	// Eight times as dear: an eighth of the price term; twenty times as
	// far: a twentieth of the latency term.
	if nd.Verdict != brokerv1alpha1.VerdictOutscored || term(nd, TermPrice).Score != 125 || term(nd, TermPrice).Weight != 10 {
		t.Errorf("by price, near-dear: %+v; want Outscored with a price term of 125 weighing 10", nd)
	}
	if fc := find(byLatency, "far-cheap"); term(fc, TermLatency).Score != 50 || term(fc, TermLatency).Weight != 10 || fc.Score >= find(byLatency, "near-dear").Score {
		t.Errorf("by latency, far-cheap: %+v; want a latency term of 50 weighing 10, outscored", fc)
	}
}

// A latency oscillating around the limit does not make the selection
// flap: the provider in use is kept while it fails for less than
// StableFor, and a provider outside it is not taken in while it fails.
func TestDecideDoesNotFlap(t *testing.T) {
	policy := &brokerv1alpha1.Policy{Count: 1, StableFor: &metav1.Duration{Duration: time.Minute}, Margin: ptr.To[int32](100),
		Requirements: brokerv1alpha1.Requirements{MaxLatency: &metav1.Duration{Duration: 30 * time.Millisecond}}}
	var prev *brokerv1alpha1.Decision
	changes := 0
	var chosen []string
	// Every 5 s for 2 minutes, a's latency swings across the limit every
	// 20 s; b is steady but dearer.
	for i := 0; i <= 24; i++ {
		now := t0.Add(time.Duration(i) * 5 * time.Second)
		lat := 20 * time.Millisecond
		if (i/4)%2 == 1 {
			lat = 40 * time.Millisecond
		}
		d := Decide(Input{Now: now, Policy: policy, Previous: prev, Candidates: []Candidate{
			candidate("a", lat, "0.01", res("4", "8Gi")),
			candidate("b", 10*time.Millisecond, "0.02", res("4", "8Gi")),
		}})
		if prev != nil && !slices.Equal(d.Chosen, chosen) {
			changes++
		}
		if a := find(d, "a"); lat > 30*time.Millisecond && slices.Contains(d.Chosen, "a") && (a.Verdict != brokerv1alpha1.VerdictKept || a.Criterion != CriterionMaxLatency || a.Since == nil) {
			t.Errorf("at %s, a over the limit and in use: %+v, want Kept naming %s since when", now.Sub(t0), a, CriterionMaxLatency)
		}
		chosen, prev = d.Chosen, &d
	}
	if changes > 1 {
		t.Errorf("the selection changed %d times in 2 minutes", changes)
	}

	// Failing for StableFor and more, it is replaced.
	prev = nil
	for i := 0; i <= 14; i++ {
		now := t0.Add(time.Duration(i) * 5 * time.Second)
		lat := 20 * time.Millisecond
		if i > 0 {
			lat = 40 * time.Millisecond
		}
		d := Decide(Input{Now: now, Policy: policy, Previous: prev, Candidates: []Candidate{
			candidate("a", lat, "0.01", res("4", "8Gi")),
			candidate("b", 10*time.Millisecond, "0.02", res("4", "8Gi")),
		}})
		failing := now.Sub(t0.Add(5 * time.Second))
		want := "a"
		if failing >= time.Minute {
			want = "b"
		}
		if !slices.Equal(d.Chosen, []string{want}) {
			t.Fatalf("after failing for %s: chose %v, want %s; %s", failing, d.Chosen, want, find(d, "a").Message)
		}
		prev = &d
	}
}

// A provider beating the one in use replaces it only once it has beaten
// it by the margin for StableFor; one better by less never does.
func TestDecideHysteresis(t *testing.T) {
	policy := &brokerv1alpha1.Policy{Count: 1, Margin: ptr.To[int32](100), StableFor: &metav1.Duration{Duration: 30 * time.Second},
		Weights: brokerv1alpha1.Weights{Latency: 1}}
	// run returns the first decision, the one that changed the selection
	// if any, and the last.
	run := func(bLatency time.Duration, steps int) (first, changed, last brokerv1alpha1.Decision) {
		prev := &brokerv1alpha1.Decision{Chosen: []string{"a"}}
		for i := range steps {
			d := Decide(Input{Now: t0.Add(time.Duration(i) * 10 * time.Second), Policy: policy, Previous: prev, Candidates: []Candidate{
				candidate("a", 20*time.Millisecond, "0.01", res("4", "8Gi")),
				candidate("b", bLatency, "0.01", res("4", "8Gi")),
				candidate("c", 30*time.Millisecond, "0.01", res("4", "8Gi")),
			}})
			if i == 0 {
				first = d
			}
			if !slices.Equal(d.Chosen, prev.Chosen) {
				changed = d
			}
			last, prev = d, &d
		}
		return first, changed, last
	}
	first, changed, last := run(10*time.Millisecond, 5)
	if !slices.Equal(first.Chosen, []string{"a"}) {
		t.Errorf("at once, b better by the margin: chose %v, want a kept", first.Chosen)
	}
	if b := find(first, "b"); b.Since == nil || !strings.Contains(b.Message, "replaces it once") || find(first, "a").Verdict != brokerv1alpha1.VerdictKept {
		t.Errorf("b waiting: %+v; a: %+v", b, find(first, "a"))
	}
	if !slices.Equal(last.Chosen, []string{"b"}) || !changed.Time.Equal(&metav1.Time{Time: t0.Add(30 * time.Second)}) || !strings.Contains(find(changed, "a").Message, "replaced by b") {
		t.Errorf("b better by the margin for 30 s: changed at %v to %v, want b at 30 s; a: %s", changed.Time, changed.Chosen, find(changed, "a").Message)
	}
	// b only a little better than a (1000 against 950 of 1000 points).
	_, _, last = run(19500*time.Microsecond, 10)
	if !slices.Equal(last.Chosen, []string{"a"}) {
		t.Errorf("b better by less than the margin: chose %v, want a", last.Chosen)
	}
	// No margin named: the default, 100 points, holds b back the same.
	policy.Margin = nil
	if _, _, last = run(19500*time.Microsecond, 10); !slices.Equal(last.Chosen, []string{"a"}) {
		t.Errorf("no margin named, b better by less than the default margin: chose %v, want a", last.Chosen)
	}
	// A margin of 0 is one: b, a little better for StableFor, replaces a.
	policy.Margin = ptr.To[int32](0)
	if _, _, last = run(19500*time.Microsecond, 10); !slices.Equal(last.Chosen, []string{"b"}) {
		t.Errorf("a margin of 0, b better for StableFor: chose %v, want b", last.Chosen)
	}
}

// A provider that is down is replaced at once, StableFor or not, and a
// free slot is filled at once.
func TestDecideFailsOverAtOnce(t *testing.T) {
	policy := &brokerv1alpha1.Policy{Count: 2, StableFor: &metav1.Duration{Duration: time.Hour}}
	prev := &brokerv1alpha1.Decision{Chosen: []string{"a", "b"}}
	a := candidate("a", 5*time.Millisecond, "0.01", res("4", "8Gi"))
	a.Down, a.Why = true, "unreachable for 21s"
	d := Decide(Input{Now: t0, Policy: policy, Previous: prev, Candidates: []Candidate{
		a, candidate("b", 5*time.Millisecond, "0.01", res("4", "8Gi")), candidate("c", 50*time.Millisecond, "0.05", res("1", "1Gi")),
	}})
	if !slices.Equal(d.Chosen, []string{"b", "c"}) {
		t.Fatalf("chose %v, want b and c", d.Chosen)
	}
	if fa := find(d, "a"); fa.Verdict != brokerv1alpha1.VerdictFiltered || fa.Criterion != CriterionAvailability || fa.Measured != "unreachable for 21s" {
		t.Errorf("a: %+v", fa)
	}
}

// A provider in use that the broker finds down but the consumer's own
// check finds answering is kept, saying both; one not in use that the
// consumer claims to see is not chosen for it.
func TestDecideConsumerSees(t *testing.T) {
	policy := &brokerv1alpha1.Policy{Count: 1}
	prev := &brokerv1alpha1.Decision{Chosen: []string{"a"}}
	a := candidate("a", 5*time.Millisecond, "0.01", res("4", "8Gi"))
	a.Down, a.Why, a.ConsumerSees = true, "unreachable for 21s", "the consumer's own check answered 3s ago"
	b := candidate("b", 5*time.Millisecond, "0.01", res("4", "8Gi"))
	d := Decide(Input{Now: t0, Policy: policy, Previous: prev, Candidates: []Candidate{a, b}})
	if !slices.Equal(d.Chosen, []string{"a"}) {
		t.Fatalf("chose %v, want a kept", d.Chosen)
	}
	fa := find(d, "a")
	if fa.Verdict != brokerv1alpha1.VerdictKept || fa.Criterion != CriterionAvailability ||
		!strings.Contains(fa.Message, "unreachable for 21s") || !strings.Contains(fa.Message, "answered 3s ago") {
		t.Errorf("a: %+v, want Kept saying both views", fa)
	}
	// Not in use: the broker cannot run pods where it does not reach.
	d = Decide(Input{Now: t0, Policy: policy, Previous: &brokerv1alpha1.Decision{Chosen: []string{"b"}}, Candidates: []Candidate{a, b}})
	if !slices.Equal(d.Chosen, []string{"b"}) || find(d, "a").Verdict != brokerv1alpha1.VerdictFiltered {
		t.Errorf("a not in use, seen by the consumer only: chose %v, a %+v; want b, a filtered", d.Chosen, find(d, "a"))
	}
	// Without the consumer's view, a goes.
	a.ConsumerSees = ""
	if d = Decide(Input{Now: t0, Policy: policy, Previous: prev, Candidates: []Candidate{a, b}}); !slices.Equal(d.Chosen, []string{"b"}) {
		t.Errorf("a down with no second opinion: chose %v, want b", d.Chosen)
	}
}

// Hand toggles pin providers in and out, unless the policy ignores them.
func TestDecideToggles(t *testing.T) {
	cands := []Candidate{
		candidate("best", 1*time.Millisecond, "0.01", res("8", "16Gi")),
		candidate("good", 2*time.Millisecond, "0.02", res("8", "16Gi")),
		candidate("worst", 90*time.Millisecond, "0.09", res("1", "1Gi")),
	}
	policy := &brokerv1alpha1.Policy{Count: 2, Requirements: brokerv1alpha1.Requirements{MaxLatency: &metav1.Duration{Duration: 50 * time.Millisecond}}}
	d := Decide(Input{Now: t0, Policy: policy, Candidates: cands, Pinned: []string{"worst"}, Excluded: []string{"best"}})
	if !slices.Equal(d.Chosen, []string{"good", "worst"}) {
		t.Errorf("pinned worst, excluded best: chose %v", d.Chosen)
	}
	if w := find(d, "worst"); w.Verdict != brokerv1alpha1.VerdictPinned || w.Criterion != CriterionMaxLatency || !strings.Contains(w.Message, "although") {
		t.Errorf("worst: %+v, want Pinned although it fails the latency", w)
	}
	if b := find(d, "best"); b.Verdict != brokerv1alpha1.VerdictExcluded {
		t.Errorf("best: %+v, want Excluded", b)
	}
	policy.Toggles = brokerv1alpha1.TogglesIgnore
	d = Decide(Input{Now: t0, Policy: policy, Candidates: cands, Pinned: []string{"worst"}, Excluded: []string{"best"}})
	if !slices.Equal(d.Chosen, []string{"best", "good"}) {
		t.Errorf("toggles ignored: chose %v, want best and good", d.Chosen)
	}
}

// Count 0 chooses as many as the consumer's requests need, best first;
// spread prefers a zone not taken yet.
func TestDecideAsManyAsNeededAndSpread(t *testing.T) {
	zone := func(c Candidate, z string) Candidate { c.Labels = map[string]string{ZoneLabel: z}; return c }
	cands := []Candidate{
		zone(candidate("a1", 1*time.Millisecond, "0.01", res("4", "8Gi")), "a"),
		zone(candidate("a2", 1*time.Millisecond, "0.01", res("4", "8Gi")), "a"),
		zone(candidate("b1", 1*time.Millisecond, "0.01", res("4", "8Gi")), "b"),
	}
	policy := &brokerv1alpha1.Policy{Weights: brokerv1alpha1.Weights{Spread: 10, Latency: 1}}
	d := Decide(Input{Now: t0, Policy: policy, Candidates: cands, Demand: res("6", "4Gi")})
	if len(d.Chosen) != 2 || !slices.Contains(d.Chosen, "b1") {
		t.Fatalf("6 cores asked of providers of 4: chose %v, want two, across both zones", d.Chosen)
	}
	var notNeeded brokerv1alpha1.ProviderDecision
	for _, p := range d.Providers {
		if !slices.Contains(d.Chosen, p.ClusterID) {
			notNeeded = p
		}
	}
	if notNeeded.Verdict != brokerv1alpha1.VerdictNotNeeded || term(notNeeded, TermSpread).Score != 0 || term(notNeeded, TermSpread).Measured != "zone a, taken" {
		t.Errorf("the third: %+v, want NotNeeded, its zone taken", notNeeded)
	}
	d = Decide(Input{Now: t0, Policy: policy, Candidates: cands, Demand: res("2", "1Gi")})
	if len(d.Chosen) != 1 {
		t.Errorf("2 cores asked: chose %v, want one", d.Chosen)
	}
}

// Criteria each filter with their own name and value.
func TestDecideCriteria(t *testing.T) {
	base := func() Candidate { return candidate("p", 5*time.Millisecond, "0.01", res("4", "8Gi")) }
	cases := []struct {
		name      string
		req       brokerv1alpha1.Requirements
		change    func(*Candidate)
		criterion string
		measured  string
	}{
		{"uptime", brokerv1alpha1.Requirements{MinUptime: &brokerv1alpha1.MinUptime{Window: brokerv1alpha1.Window1h, Percent: "99.5"}},
			func(c *Candidate) { c.Uptime[brokerv1alpha1.Window1h] = 0.98 }, CriterionMinUptime, "98.00% over 1h"},
		{"uptime unknown", brokerv1alpha1.Requirements{MinUptime: &brokerv1alpha1.MinUptime{Window: brokerv1alpha1.Window7d, Percent: "90"}},
			func(*Candidate) {}, CriterionMinUptime, "no health check yet over 7d"},
		{"latency unknown", brokerv1alpha1.Requirements{MaxLatency: &metav1.Duration{Duration: time.Second}},
			func(c *Candidate) { c.LatencyKnown = false }, CriterionMaxLatency, "not measured yet"},
		{"free gpus", brokerv1alpha1.Requirements{MinFree: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
			func(*Candidate) {}, CriterionMinFree, "nvidia.com/gpu 0 free"},
		{"free memory", brokerv1alpha1.Requirements{MinFree: res("1", "16Gi")},
			func(*Candidate) {}, CriterionMinFree, "memory 8Gi free"},
		{"currency", brokerv1alpha1.Requirements{MaxPrice: &brokerv1alpha1.MaxPrice{Currency: "USD", PerUnit: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
			func(*Candidate) {}, CriterionMaxPrice, "priced in EUR"},
		{"monthly price", brokerv1alpha1.Requirements{MaxPrice: &brokerv1alpha1.MaxPrice{Currency: "EUR", Period: brokerv1alpha1.PerMonth, PerUnit: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}}},
			func(*Candidate) {}, CriterionMaxPrice, "cpu 0.01 EUR/h"},
		{"required label", brokerv1alpha1.Requirements{RequiredLabels: map[string]string{"topology.kubernetes.io/region": "eu"}},
			func(c *Candidate) { c.Labels = map[string]string{"topology.kubernetes.io/region": "us"} }, CriterionRequired, "topology.kubernetes.io/region=us"},
		{"forbidden label", brokerv1alpha1.Requirements{ForbiddenLabels: map[string]string{"spot": ""}},
			func(c *Candidate) { c.Labels = map[string]string{"spot": "true"} }, CriterionForbidden, "spot=true"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.change(&c)
			d := Decide(Input{Now: t0, Policy: &brokerv1alpha1.Policy{Count: 1, Requirements: tc.req}, Candidates: []Candidate{c}})
			p := find(d, "p")
			if p.Verdict != brokerv1alpha1.VerdictFiltered || p.Criterion != tc.criterion || p.Measured != tc.measured {
				t.Errorf("%+v, want filtered by %s, measured %q", p, tc.criterion, tc.measured)
			}
			// The positive control: the same provider passes without it.
			d = Decide(Input{Now: t0, Policy: &brokerv1alpha1.Policy{Count: 1}, Candidates: []Candidate{c}})
			if !slices.Equal(d.Chosen, []string{"p"}) {
				t.Errorf("without the criterion: chose %v", d.Chosen)
			}
		})
	}
}

// A provider that cannot hold its share of the consumer's requests is
// filtered out, naming what is free and what was needed.
func TestDecideCapacity(t *testing.T) {
	cands := []Candidate{
		candidate("best-full", 1*time.Millisecond, "0.01", res("1", "8Gi")),
		candidate("next", 9*time.Millisecond, "0.02", res("4", "8Gi")),
	}
	d := Decide(Input{Now: t0, Policy: &brokerv1alpha1.Policy{Count: 1}, Candidates: cands, Demand: res("3", "1Gi")})
	if !slices.Equal(d.Chosen, []string{"next"}) {
		t.Fatalf("3 cores asked of one provider: chose %v, want next", d.Chosen)
	}
	if f := find(d, "best-full"); f.Verdict != brokerv1alpha1.VerdictFiltered || f.Criterion != CriterionCapacity || f.Measured != "cpu 1 free" || !strings.HasPrefix(f.Limit, "cpu 3") {
		t.Errorf("best-full: %+v", f)
	}
	// Two providers asked: each holds half.
	d = Decide(Input{Now: t0, Policy: &brokerv1alpha1.Policy{Count: 2}, Candidates: cands, Demand: res("2", "1Gi")})
	if !slices.Equal(d.Chosen, []string{"best-full", "next"}) {
		t.Errorf("2 cores asked of two providers: chose %v, want both", d.Chosen)
	}
	if got := Share(res("3", "1Gi"), 2); got.Cpu().MilliValue() != 1500 || got.Memory().Value() != 512<<20 {
		t.Errorf("a half of 3 cores and 1Gi: %v", got)
	}
}

func TestValidate(t *testing.T) {
	bad := &brokerv1alpha1.SelectionSpec{Providers: []string{"a"}, Excluded: []string{"a"}, Policy: &brokerv1alpha1.Policy{
		Count: -1, Margin: ptr.To[int32](2000), Toggles: "Sometimes", StableFor: &metav1.Duration{Duration: 2 * time.Hour},
		Weights: brokerv1alpha1.Weights{Price: 101},
		Requirements: brokerv1alpha1.Requirements{
			MinUptime:       &brokerv1alpha1.MinUptime{Window: "2h", Percent: "NaN"},
			MaxLatency:      &metav1.Duration{},
			MinFree:         corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")},
			MaxPrice:        &brokerv1alpha1.MaxPrice{Currency: "euro", Period: "Day"},
			RequiredLabels:  map[string]string{"not a key!": ""},
			ForbiddenLabels: map[string]string{"ok": "not a value!"},
		},
	}}
	var got []string
	for _, e := range Validate(bad) {
		got = append(got, e.Field)
	}
	want := []string{
		"spec.excluded[0]", "spec.policy.count", "spec.policy.margin",
		"spec.policy.requirements.forbiddenLabels[ok]",
		"spec.policy.requirements.maxLatency", "spec.policy.requirements.maxPrice.currency", "spec.policy.requirements.maxPrice.perUnit",
		"spec.policy.requirements.maxPrice.period", "spec.policy.requirements.minFree[cpu]",
		"spec.policy.requirements.minUptime.percent", "spec.policy.requirements.minUptime.window",
		"spec.policy.requirements.requiredLabels[not a key!]", "spec.policy.stableFor", "spec.policy.toggles", "spec.policy.weights.price",
	}
	if !slices.Equal(got, want) {
		t.Errorf("fields named:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// As many resources as a caller likes: refused past the bound, not
	// carried into every decision.
	many := corev1.ResourceList{}
	for i := range MaxResources + 1 {
		many[corev1.ResourceName(fmt.Sprintf("example.com/r%d", i))] = resource.MustParse("1")
	}
	huge := &brokerv1alpha1.SelectionSpec{Policy: &brokerv1alpha1.Policy{Requirements: brokerv1alpha1.Requirements{
		MinFree: many, MaxPrice: &brokerv1alpha1.MaxPrice{Currency: "EUR", PerUnit: many},
	}}}
	got = nil
	for _, e := range Validate(huge) {
		if e.Type == field.ErrorTypeTooMany {
			got = append(got, e.Field)
		}
	}
	if want := []string{"spec.policy.requirements.maxPrice.perUnit", "spec.policy.requirements.minFree"}; !slices.Equal(got, want) {
		t.Errorf("too many resources: fields %v, want %v", got, want)
	}
	good := &brokerv1alpha1.SelectionSpec{Providers: []string{"a"}, Excluded: []string{"b"}, Policy: &brokerv1alpha1.Policy{
		Count: 2, Weights: brokerv1alpha1.Weights{Price: 100},
		Requirements: brokerv1alpha1.Requirements{MinUptime: &brokerv1alpha1.MinUptime{Window: "24h", Percent: "99.9"},
			MaxPrice: &brokerv1alpha1.MaxPrice{Currency: "EUR", PerUnit: res("0.1", "0.01")}},
	}}
	if errs := Validate(good); len(errs) > 0 {
		t.Errorf("a valid spec: %v", errs)
	}
}

// BenchmarkDecide100 decides over 100 providers with synthetic
// measurements; the orchestrator's decision adds reading and writing the
// Selection (bench/).
func BenchmarkDecide100(b *testing.B) {
	var cands []Candidate
	for i := range 100 {
		c := candidate(fmt.Sprintf("p%03d", i), time.Duration(1+i%37)*time.Millisecond, fmt.Sprintf("0.0%d", 1+i%9), res(fmt.Sprint(1+i%16), fmt.Sprintf("%dGi", 1+i%64)))
		c.Labels = map[string]string{ZoneLabel: fmt.Sprintf("z%d", i%5)}
		cands = append(cands, c)
	}
	policy := &brokerv1alpha1.Policy{Count: 5, Weights: brokerv1alpha1.Weights{Price: 3, Latency: 2, Uptime: 1, Free: 1, Spread: 2},
		Requirements: brokerv1alpha1.Requirements{MaxLatency: &metav1.Duration{Duration: 30 * time.Millisecond}}}
	prev := Decide(Input{Now: t0, Policy: policy, Candidates: cands})
	b.ReportAllocs()
	for b.Loop() {
		d := Decide(Input{Now: t0.Add(time.Second), Policy: policy, Candidates: cands, Previous: &prev})
		if len(d.Chosen) != 5 {
			b.Fatalf("chose %v", d.Chosen)
		}
	}
}
