// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package decide chooses a consumer's providers under its policy, from
// what the broker measures of them, and says why: for every provider,
// whether it passed the policy's hard criteria (and, if not, which one
// and the value that failed it), each term of its score and the total,
// and the hysteresis that keeps a selection from flapping. It is a pure
// function of its input, so that a decision can be replayed and
// benchmarked; the orchestrator gathers the input and acts on the output.
package decide

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
)

// ZoneLabel is the offer's label the spread term reads.
const ZoneLabel = corev1.LabelTopologyZone

// DefaultStableFor is how long a change waits when the policy names no
// StableFor.
const DefaultStableFor = time.Minute

// The terms of a score, in the order they are shown.
const (
	TermPrice   = "price"
	TermLatency = "latency"
	TermUptime  = "uptime"
	TermFree    = "free"
	TermSpread  = "spread"
)

// The criteria, named by the policy's fields.
const (
	CriterionAvailability = "availability"
	CriterionMinUptime    = "requirements.minUptime"
	CriterionMaxLatency   = "requirements.maxLatency"
	CriterionMinFree      = "requirements.minFree"
	CriterionMaxPrice     = "requirements.maxPrice"
	CriterionRequired     = "requirements.requiredLabels"
	CriterionForbidden    = "requirements.forbiddenLabels"
	// CriterionCapacity: a provider must hold its share of the
	// consumer's requests (with Count N, a Nth of them; with Count 0,
	// some of each), after what other consumers use and hold.
	CriterionCapacity = brokerv1alpha1.CriterionCapacity
)

// Candidate is what the broker knows of one provider when it decides.
type Candidate struct {
	ClusterID string
	// Down says the provider counts as failed: unreachable for the
	// operator's failover time, or with no Ready virtual node; Why says
	// how, for the explanation.
	Down bool
	Why  string
	// ConsumerSees, for a provider Down, says how the consumer's own
	// check found it answering (its ConsumerView, fresh): a path the
	// broker lost, not a provider down. A provider in use that the
	// consumer sees is kept; one not in use is not chosen for it.
	ConsumerSees string
	// Uptime by window, from 0 to 1; a window absent has no health check
	// yet.
	Uptime map[brokerv1alpha1.UptimeWindow]float64
	// Latency is the median round trip of the last 15 s's health checks;
	// unknown while LatencyKnown is false.
	Latency      time.Duration
	LatencyKnown bool
	// Free is what the provider's offer leaves to this consumer: the
	// offer less what others' pods use and others' reservations (this
	// consumer's own pods there count as free to it).
	Free corev1.ResourceList
	// Prices per unit (core, GiB, pod, GPU) per Period, in Currency; a
	// resource without a price is free of charge.
	Prices   corev1.ResourceList
	Currency string
	Period   brokerv1alpha1.PricePeriod
	// Labels of the offer (region, zone, accelerators).
	Labels map[string]string
}

// Input is everything a decision depends on.
type Input struct {
	Now    time.Time
	Policy *brokerv1alpha1.Policy
	// Pinned and Excluded are the consumer's hand toggles.
	Pinned, Excluded []string
	Candidates       []Candidate
	// Previous is the last decision, for hysteresis; nil the first time.
	Previous *brokerv1alpha1.Decision
	// Demand is what the consumer's namespaces request: with Count 0 the
	// providers chosen must hold it, and prices are compared on it (on 1
	// core and 1 GiB when it is empty).
	Demand corev1.ResourceList
}

// judged is one candidate on its way through a decision.
type judged struct {
	c *Candidate
	d brokerv1alpha1.ProviderDecision
	// eligible: may be chosen (passed, or in use and kept while failing
	// a criterion, or pinned).
	eligible bool
	pinned   bool
	// incumbent: chosen by the previous decision.
	incumbent bool
	// base is the score without the spread term; weights of the others.
	base, baseWeight int64
}

// Decide chooses the consumer's providers.
func Decide(in Input) brokerv1alpha1.Decision {
	p := normalize(in.Policy)
	stableFor := DefaultStableFor
	if p.StableFor != nil {
		stableFor = p.StableFor.Duration
	}
	prev := map[string]*brokerv1alpha1.ProviderDecision{}
	wasChosen := map[string]bool{}
	if in.Previous != nil {
		for i := range in.Previous.Providers {
			prev[in.Previous.Providers[i].ClusterID] = &in.Previous.Providers[i]
		}
		for _, id := range in.Previous.Chosen {
			wasChosen[id] = true
		}
	}
	pin := p.Toggles != brokerv1alpha1.TogglesIgnore
	now := metav1.NewTime(in.Now)
	share := Share(in.Demand, p.Count)

	all := make([]*judged, 0, len(in.Candidates))
	for i := range in.Candidates {
		c := &in.Candidates[i]
		j := &judged{c: c, d: brokerv1alpha1.ProviderDecision{ClusterID: c.ClusterID}, incumbent: wasChosen[c.ClusterID]}
		all = append(all, j)
		if pin && slices.Contains(in.Excluded, c.ClusterID) {
			j.d.Verdict, j.d.Message = brokerv1alpha1.VerdictExcluded, "disabled by hand"
			continue
		}
		j.pinned = pin && slices.Contains(in.Pinned, c.ClusterID)
		f := check(&p, c)
		if f == nil {
			f = capacity(c, share)
		}
		switch {
		case f == nil:
			j.eligible = true
		case j.pinned:
			j.eligible = true
			j.d.Criterion, j.d.Measured, j.d.Limit = f.criterion, f.measured, f.limit
		case j.incumbent && f.criterion == CriterionAvailability && c.ConsumerSees != "":
			// Down to the broker, up to the consumer: its pods there
			// may well serve; kept while the consumer still sees it.
			j.eligible = true
			j.d.Verdict = brokerv1alpha1.VerdictKept
			j.d.Criterion, j.d.Measured, j.d.Limit = f.criterion, f.measured, f.limit
			j.d.Message = fmt.Sprintf("in use, kept although the broker finds it down (%s): %s", f.measured, c.ConsumerSees)
			continue
		case j.incumbent && f.criterion != CriterionAvailability:
			// In use: kept until it has failed the criterion for StableFor.
			since := now
			if pd := prev[c.ClusterID]; pd != nil && pd.Verdict == brokerv1alpha1.VerdictKept && pd.Criterion == f.criterion && pd.Since != nil {
				since = *pd.Since
			}
			if in.Now.Sub(since.Time) < stableFor {
				j.eligible = true
				j.d.Verdict, j.d.Since = brokerv1alpha1.VerdictKept, &since
				j.d.Criterion, j.d.Measured, j.d.Limit = f.criterion, f.measured, f.limit
				j.d.Message = fmt.Sprintf("in use, kept although %s: %s, limit %s, since %s; replaced once that has lasted %s",
					f.criterion, f.measured, f.limit, since.UTC().Format(time.RFC3339), stableFor)
				continue
			}
			j.filter(f)
		default:
			j.filter(f)
		}
	}

	var scored []*judged
	for _, j := range all {
		if j.eligible {
			scored = append(scored, j)
		}
	}
	score(&p, in.Demand, scored)

	// The ideal order: greedy, the spread term counted against the zones
	// of those ranked before.
	ideal := rank(&p, scored)
	target := int(p.Count)
	if target == 0 {
		target = needed(ideal, in.Demand)
	}

	chosen := map[string]bool{}
	count := 0
	for _, j := range ideal {
		if j.pinned {
			chosen[j.c.ClusterID] = true
			count++
		}
	}
	// Those in use stay, best first, as far as the slots go; then the
	// best of the others fill what is left, at once.
	var incumbents, challengers []*judged
	for _, j := range ideal {
		switch {
		case j.pinned:
		case j.incumbent:
			incumbents = append(incumbents, j)
		default:
			challengers = append(challengers, j)
		}
	}
	var kept []*judged
	for _, j := range incumbents {
		if count < target {
			kept = append(kept, j)
			chosen[j.c.ClusterID] = true
			count++
		}
	}
	ci := 0
	for ; ci < len(challengers) && count < target; ci++ {
		chosen[challengers[ci].c.ClusterID] = true
		count++
	}
	// Then a better challenger replaces the worst kept one only once it
	// has beaten it by the margin for StableFor.
	for ; ci < len(challengers) && len(kept) > 0; ci++ {
		ch := challengers[ci]
		worst := kept[len(kept)-1]
		if ch.d.Score < worst.d.Score+*p.Margin {
			break
		}
		since := now
		if pd := prev[ch.c.ClusterID]; pd != nil && pd.Verdict == brokerv1alpha1.VerdictOutscored && pd.Since != nil {
			since = *pd.Since
		}
		if in.Now.Sub(since.Time) >= stableFor {
			delete(chosen, worst.c.ClusterID)
			chosen[ch.c.ClusterID] = true
			worst.d.Message = fmt.Sprintf("replaced by %s, which scored %d to its %d since %s", ch.c.ClusterID, ch.d.Score, worst.d.Score, since.UTC().Format(time.RFC3339))
			kept = kept[:len(kept)-1]
			continue
		}
		ch.d.Since = &since
		ch.d.Message = fmt.Sprintf("scores %d, %d more than %s in use, since %s: replaces it once that has lasted %s",
			ch.d.Score, ch.d.Score-worst.d.Score, worst.c.ClusterID, since.UTC().Format(time.RFC3339), stableFor)
		if worst.d.Verdict == "" {
			worst.d.Verdict = brokerv1alpha1.VerdictKept
			worst.d.Message = fmt.Sprintf("in use, kept: %s scores %d to its %d, for less than %s yet", ch.c.ClusterID, ch.d.Score, worst.d.Score, stableFor)
		}
		// Only the worst kept is challenged at a time, by the best
		// challenger: the next challenger waits its turn.
		break
	}

	out := brokerv1alpha1.Decision{Time: now}
	for _, j := range all {
		id := j.c.ClusterID
		switch {
		case j.d.Verdict == brokerv1alpha1.VerdictExcluded || j.d.Verdict == brokerv1alpha1.VerdictFiltered:
		case chosen[id]:
			out.Chosen = append(out.Chosen, id)
			switch {
			case j.pinned:
				j.d.Verdict = brokerv1alpha1.VerdictPinned
				j.d.Message = "enabled by hand"
				if j.d.Criterion != "" {
					j.d.Message += fmt.Sprintf(", although %s: %s, limit %s", j.d.Criterion, j.d.Measured, j.d.Limit)
				}
			case j.d.Verdict == brokerv1alpha1.VerdictKept:
			default:
				j.d.Verdict = brokerv1alpha1.VerdictChosen
				j.d.Message = fmt.Sprintf("passed every criterion and scored %d", j.d.Score)
			}
		default:
			j.d.Verdict = brokerv1alpha1.VerdictOutscored
			if p.Count == 0 && j.d.Since == nil {
				j.d.Verdict = brokerv1alpha1.VerdictNotNeeded
			}
			switch {
			case j.d.Message != "": // waiting to replace one in use, or replaced
			case p.Count == 0:
				j.d.Message = fmt.Sprintf("scored %d; those chosen hold the consumer's requests", j.d.Score)
			default:
				j.d.Message = fmt.Sprintf("scored %d; %d providers asked, better ones chosen", j.d.Score, p.Count)
			}
		}
		out.Providers = append(out.Providers, j.d)
	}
	slices.Sort(out.Chosen)
	slices.SortStableFunc(out.Providers, func(a, b brokerv1alpha1.ProviderDecision) int {
		return cmp.Or(cmp.Compare(order(a), order(b)), cmp.Compare(b.Score, a.Score), strings.Compare(a.ClusterID, b.ClusterID))
	})
	out.Message = summary(&out, len(in.Candidates))
	return out
}

// order sorts chosen providers first, then those passing, then the rest.
func order(d brokerv1alpha1.ProviderDecision) int {
	switch d.Verdict {
	case brokerv1alpha1.VerdictChosen, brokerv1alpha1.VerdictPinned, brokerv1alpha1.VerdictKept:
		return 0
	case brokerv1alpha1.VerdictOutscored, brokerv1alpha1.VerdictNotNeeded:
		return 1
	default:
		return 2
	}
}

func summary(d *brokerv1alpha1.Decision, n int) string {
	s := fmt.Sprintf("chose %s of %d", strings.Join(d.Chosen, ", "), n)
	if len(d.Chosen) == 0 {
		s = fmt.Sprintf("no provider chosen of %d: none passes the policy", n)
	}
	var out []string
	for _, p := range d.Providers {
		if p.Verdict == brokerv1alpha1.VerdictFiltered {
			out = append(out, fmt.Sprintf("%s (%s: %s, limit %s)", p.ClusterID, p.Criterion, p.Measured, p.Limit))
		}
	}
	if len(out) > 0 {
		s += "; filtered out: " + strings.Join(out, ", ")
	}
	return s
}

func (j *judged) filter(f *failure) {
	j.d.Verdict = brokerv1alpha1.VerdictFiltered
	j.d.Criterion, j.d.Measured, j.d.Limit = f.criterion, f.measured, f.limit
	j.d.Message = fmt.Sprintf("filtered out by %s: %s, limit %s", f.criterion, f.measured, f.limit)
}

// normalize fills a policy's defaults.
func normalize(in *brokerv1alpha1.Policy) brokerv1alpha1.Policy {
	var p brokerv1alpha1.Policy
	if in != nil {
		p = *in
	}
	w := &p.Weights
	if w.Price == 0 && w.Latency == 0 && w.Uptime == 0 && w.Free == 0 && w.Spread == 0 {
		*w = brokerv1alpha1.Weights{Price: 1, Latency: 1, Uptime: 1, Free: 1, Spread: 1}
	}
	if p.Toggles == "" {
		p.Toggles = brokerv1alpha1.TogglesPin
	}
	if p.Margin == nil {
		p.Margin = ptr.To(DefaultMargin)
	}
	return p
}

// DefaultMargin is a policy's margin when it names none (as the API's
// default): 100 score points, a tenth better.
const DefaultMargin int32 = 100

// failure is a criterion a candidate fails.
type failure struct{ criterion, measured, limit string }

// check returns the first criterion c fails, nil when it passes them.
func check(p *brokerv1alpha1.Policy, c *Candidate) *failure {
	r := &p.Requirements
	if c.Down {
		return &failure{CriterionAvailability, cmp.Or(c.Why, "down"), "reachable"}
	}
	if r.MinUptime != nil {
		want, _ := parsePercent(r.MinUptime.Percent)
		got, ok := c.Uptime[r.MinUptime.Window]
		if !ok {
			return &failure{CriterionMinUptime, "no health check yet over " + string(r.MinUptime.Window), r.MinUptime.Percent + "%"}
		}
		if got*100 < want {
			return &failure{CriterionMinUptime, fmt.Sprintf("%s over %s", percent(got), r.MinUptime.Window), r.MinUptime.Percent + "%"}
		}
	}
	if r.MaxLatency != nil {
		if !c.LatencyKnown {
			return &failure{CriterionMaxLatency, "not measured yet", r.MaxLatency.Duration.String()}
		}
		if c.Latency > r.MaxLatency.Duration {
			return &failure{CriterionMaxLatency, millis(c.Latency), millis(r.MaxLatency.Duration)}
		}
	}
	for _, name := range sortedNames(r.MinFree) {
		want := r.MinFree[name]
		got := c.Free[name]
		if got.Cmp(want) < 0 {
			return &failure{CriterionMinFree, fmt.Sprintf("%s %s free", name, got.String()), fmt.Sprintf("%s %s", name, want.String())}
		}
	}
	if m := r.MaxPrice; m != nil {
		period := cmp.Or(m.Period, brokerv1alpha1.PerHour)
		if len(c.Prices) > 0 && c.Currency != m.Currency {
			return &failure{CriterionMaxPrice, "priced in " + cmp.Or(c.Currency, "no currency"), "priced in " + m.Currency}
		}
		for _, name := range sortedNames(m.PerUnit) {
			limit := m.PerUnit[name]
			price, ok := c.Prices[name]
			if !ok {
				continue
			}
			got := perHour(price.AsApproximateFloat64(), c.Period)
			if got > perHour(limit.AsApproximateFloat64(), period)*(1+1e-9) {
				return &failure{CriterionMaxPrice, fmt.Sprintf("%s %s %s/%s", name, amount(price), c.Currency, per(c.Period)),
					fmt.Sprintf("%s %s %s/%s", name, amount(limit), m.Currency, per(period))}
			}
		}
	}
	for _, k := range sortedKeys(r.RequiredLabels) {
		v, ok := c.Labels[k]
		if !ok || (r.RequiredLabels[k] != "" && v != r.RequiredLabels[k]) {
			return &failure{CriterionRequired, label(k, v, ok), label(k, r.RequiredLabels[k], true)}
		}
	}
	for _, k := range sortedKeys(r.ForbiddenLabels) {
		v, ok := c.Labels[k]
		if ok && (r.ForbiddenLabels[k] == "" || v == r.ForbiddenLabels[k]) {
			return &failure{CriterionForbidden, label(k, v, ok), "not " + label(k, r.ForbiddenLabels[k], true)}
		}
	}
	return nil
}

// Share is what each provider must hold of demand: with count N, a Nth of
// each resource; with count 0, some of each (a milli-unit).
func Share(demand corev1.ResourceList, count int32) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range demand {
		if q.Sign() <= 0 {
			continue
		}
		if count <= 0 {
			out[name] = *resource.NewMilliQuantity(1, q.Format)
			continue
		}
		out[name] = *resource.NewMilliQuantity((q.MilliValue()+int64(count)-1)/int64(count), q.Format)
	}
	return out
}

// capacity returns the failure of a candidate that cannot hold share.
func capacity(c *Candidate, share corev1.ResourceList) *failure {
	for _, name := range sortedNames(share) {
		want := share[name]
		if got := c.Free[name]; got.Cmp(want) < 0 {
			return &failure{CriterionCapacity, fmt.Sprintf("%s %s free", name, got.String()), fmt.Sprintf("%s %s, its share of the consumer's requests", name, want.String())}
		}
	}
	return nil
}

func label(k, v string, ok bool) string {
	switch {
	case !ok:
		return "no " + k
	case v == "":
		return k
	default:
		return k + "=" + v
	}
}

// amount shows a price as a decimal number.
func amount(q resource.Quantity) string {
	return strconv.FormatFloat(q.AsApproximateFloat64(), 'f', -1, 64)
}

// per shows a period in a price.
func per(p brokerv1alpha1.PricePeriod) string {
	if p == brokerv1alpha1.PerMonth {
		return "month"
	}
	return "h"
}

func perHour(v float64, period brokerv1alpha1.PricePeriod) float64 {
	if period == brokerv1alpha1.PerMonth {
		return v / brokerv1alpha1.HoursPerMonth
	}
	return v
}

// units is a resource amount in the units prices are per: cores of cpu,
// GiB of memory and of storage, and the count of anything else.
func units(name corev1.ResourceName, q resource.Quantity) float64 {
	switch name {
	case corev1.ResourceMemory, corev1.ResourceStorage, corev1.ResourceEphemeralStorage:
		return q.AsApproximateFloat64() / (1 << 30)
	default:
		return q.AsApproximateFloat64()
	}
}

// basket is what prices are compared on: the demand, or 1 core and 1 GiB.
func basket(demand corev1.ResourceList) corev1.ResourceList {
	if len(demand) > 0 {
		return demand
	}
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
}

// cost is what c charges for the basket an hour; ok is false when it is
// priced in another currency than the one compared.
func cost(c *Candidate, b corev1.ResourceList, currency string) (float64, bool) {
	if len(c.Prices) > 0 && c.Currency != currency {
		return 0, false
	}
	var sum float64
	for name, q := range b {
		if price, ok := c.Prices[name]; ok {
			sum += perHour(price.AsApproximateFloat64(), c.Period) * units(name, q)
		}
	}
	return sum, true
}

// score fills every eligible candidate's terms but spread, and its base.
func score(p *brokerv1alpha1.Policy, demand corev1.ResourceList, js []*judged) {
	if len(js) == 0 {
		return
	}
	w := p.Weights
	b := basket(demand)
	currency := ""
	if p.Requirements.MaxPrice != nil {
		currency = p.Requirements.MaxPrice.Currency
	} else {
		// The currency most of them price in.
		n := map[string]int{}
		for _, j := range js {
			if len(j.c.Prices) > 0 {
				n[j.c.Currency]++
			}
		}
		for cur, k := range n {
			if k > n[currency] || (k == n[currency] && cur < currency) {
				currency = cur
			}
		}
	}
	window := brokerv1alpha1.Window24h
	if p.Requirements.MinUptime != nil {
		window = p.Requirements.MinUptime.Window
	}
	costs := make([]float64, len(js))
	lat := make([]float64, len(js))
	up := make([]float64, len(js))
	free := make([]float64, len(js))
	priced, measured, known := make([]bool, len(js)), make([]bool, len(js)), make([]bool, len(js))
	for i, j := range js {
		costs[i], priced[i] = cost(j.c, b, currency)
		lat[i], measured[i] = float64(j.c.Latency), j.c.LatencyKnown
		up[i], known[i] = j.c.Uptime[window]
	}
	// Free capacity: the mean over cpu and memory of each one's share of
	// the emptiest's.
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		vals := make([]float64, len(js))
		for i, j := range js {
			q := j.c.Free[name]
			vals[i] = q.AsApproximateFloat64()
		}
		lo, hi := bounds(vals, nil)
		for i := range js {
			free[i] += place(vals[i], lo, hi, true) / 2
		}
	}
	plo, phi := bounds(costs, priced)
	llo, lhi := bounds(lat, measured)
	ulo, uhi := bounds(up, known)
	for i, j := range js {
		terms := []brokerv1alpha1.Term{
			{Name: TermPrice, Weight: w.Price},
			{Name: TermLatency, Weight: w.Latency},
			{Name: TermUptime, Weight: w.Uptime},
			{Name: TermFree, Weight: w.Free},
		}
		if priced[i] {
			terms[0].Measured = fmt.Sprintf("%.4g %s/h", costs[i], cmp.Or(currency, "free"))
			if len(j.c.Prices) == 0 {
				terms[0].Measured = "no price"
			}
			terms[0].Score = permille(place(costs[i], plo, phi, false))
		} else {
			terms[0].Measured = "priced in " + j.c.Currency + ", not " + currency
		}
		if measured[i] {
			terms[1].Measured = millis(j.c.Latency)
			terms[1].Score = permille(place(lat[i], llo, lhi, false))
		} else {
			terms[1].Measured = "not measured yet"
		}
		if known[i] {
			terms[2].Measured = percent(up[i]) + " over " + string(window)
			terms[2].Score = permille(place(up[i], ulo, uhi, true))
		} else {
			terms[2].Measured = "no health check yet over " + string(window)
		}
		cpu, mem := j.c.Free[corev1.ResourceCPU], j.c.Free[corev1.ResourceMemory]
		terms[3].Measured = fmt.Sprintf("cpu %s, memory %s", cpu.String(), mem.String())
		terms[3].Score = permille(free[i])
		j.d.Terms = terms
		j.base, j.baseWeight = 0, 0
		for _, t := range terms {
			j.base += int64(t.Score) * int64(t.Weight)
			j.baseWeight += int64(t.Weight)
		}
		j.d.Score = total(j.base, j.baseWeight)
	}
}

// rank orders the eligible candidates best first, greedily: each step's
// spread term counts the zones of those ranked before. Each candidate's
// score is final once ranked.
func rank(p *brokerv1alpha1.Policy, js []*judged) []*judged {
	left := slices.Clone(js)
	out := make([]*judged, 0, len(js))
	zones := map[string]bool{}
	w := int64(p.Weights.Spread)
	for len(left) > 0 {
		best, bestScore := -1, int32(0)
		for i, j := range left {
			s := total(j.base+w*int64(spread(j, zones)), j.baseWeight+w)
			if best < 0 || s > bestScore || (s == bestScore && j.c.ClusterID < left[best].c.ClusterID) {
				best, bestScore = i, s
			}
		}
		j := left[best]
		zone, ok := j.c.Labels[ZoneLabel]
		t := brokerv1alpha1.Term{Name: TermSpread, Weight: p.Weights.Spread, Score: spread(j, zones)}
		switch {
		case !ok:
			t.Measured = "no zone"
		case t.Score > 0:
			t.Measured = "zone " + zone + ", new"
		default:
			t.Measured = "zone " + zone + ", taken"
		}
		j.d.Terms = append(j.d.Terms, t)
		j.d.Score = bestScore
		if ok {
			zones[zone] = true
		}
		out = append(out, j)
		left = slices.Delete(left, best, best+1)
	}
	return out
}

// spread is 1000 for a candidate in a zone not taken yet, else 0.
func spread(j *judged, zones map[string]bool) int32 {
	zone, ok := j.c.Labels[ZoneLabel]
	if !ok || zones[zone] {
		return 0
	}
	return 1000
}

func total(sum, weight int64) int32 {
	if weight == 0 {
		return 0
	}
	return int32(min(max((sum+weight/2)/weight, 0), 1000))
}

// needed is how many of the ranked candidates, best first, hold the
// demand: at least one.
func needed(ranked []*judged, demand corev1.ResourceList) int {
	if len(demand) == 0 {
		return min(1, len(ranked))
	}
	sum := corev1.ResourceList{}
	for i, j := range ranked {
		for name, q := range j.c.Free {
			s := sum[name]
			s.Add(q)
			sum[name] = s
		}
		holds := true
		for name, want := range demand {
			if got := sum[name]; got.Cmp(want) < 0 {
				holds = false
				break
			}
		}
		if holds {
			return i + 1
		}
	}
	return len(ranked)
}

// bounds returns the least and greatest of vals whose ok is true (all,
// with ok nil).
func bounds(vals []float64, ok []bool) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for i, v := range vals {
		if ok == nil || ok[i] {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	return lo, hi
}

// place scores v against the best of its kind, from 0 to 1: v/hi when
// more is better (twice the free capacity, twice the score), lo/v when
// less is (twice the latency or the price, half the score). A ratio, not
// a place between the worst and the best: a difference of noise (9.1 ms
// against 9.8) is worth its size, not the whole scale.
func place(v, lo, hi float64, more bool) float64 {
	var x float64
	switch {
	case more && hi <= 0, !more && v <= 0:
		x = 1
	case more:
		x = v / hi
	default:
		x = lo / v
	}
	return min(max(x, 0), 1)
}

func permille(x float64) int32 { return int32(math.Round(x * 1000)) }

func millis(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

func percent(x float64) string { return fmt.Sprintf("%.2f%%", x*100) }

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
