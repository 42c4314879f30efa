// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package decide

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
)

// MaxStableFor bounds a policy's StableFor: a provider failing a
// criterion is kept no longer.
const MaxStableFor = time.Hour

// MaxResources bounds the resources a policy names in minFree and in
// maxPrice.perUnit, as the Selection's schema does.
const MaxResources = 32

var currency = regexp.MustCompile(`^[A-Z]{3}$`)

// Validate checks a Selection's spec as the broker reads it, naming the
// field of each error: what the CRD's schema checks again (for callers of
// the API, before they write), and what it cannot (quantities' signs,
// label keys, percentages, toggles both ways).
func Validate(spec *brokerv1alpha1.SelectionSpec) field.ErrorList {
	var errs field.ErrorList
	root := field.NewPath("spec")
	for i, id := range spec.Excluded {
		if slices.Contains(spec.Providers, id) {
			errs = append(errs, field.Invalid(root.Child("excluded").Index(i), id, "also in spec.providers: a provider is pinned in or out, not both"))
		}
	}
	p := spec.Policy
	if p == nil {
		return errs
	}
	path := root.Child("policy")
	if p.Count < 0 || p.Count > brokerv1alpha1.MaxSelectedProviders {
		errs = append(errs, field.Invalid(path.Child("count"), p.Count, fmt.Sprintf("from 0 (as many as needed) to %d", brokerv1alpha1.MaxSelectedProviders)))
	}
	for name, w := range map[string]int32{"price": p.Weights.Price, "latency": p.Weights.Latency, "uptime": p.Weights.Uptime, "free": p.Weights.Free, "spread": p.Weights.Spread} {
		if w < 0 || w > 100 {
			errs = append(errs, field.Invalid(path.Child("weights", name), w, "from 0 to 100"))
		}
	}
	if p.Toggles != "" && p.Toggles != brokerv1alpha1.TogglesPin && p.Toggles != brokerv1alpha1.TogglesIgnore {
		errs = append(errs, field.NotSupported(path.Child("toggles"), p.Toggles, []string{string(brokerv1alpha1.TogglesPin), string(brokerv1alpha1.TogglesIgnore)}))
	}
	if p.Margin != nil && (*p.Margin < 0 || *p.Margin > 1000) {
		errs = append(errs, field.Invalid(path.Child("margin"), *p.Margin, "from 0 to 1000 score points"))
	}
	if p.StableFor != nil && (p.StableFor.Duration < 0 || p.StableFor.Duration > MaxStableFor) {
		errs = append(errs, field.Invalid(path.Child("stableFor"), p.StableFor.Duration.String(), fmt.Sprintf("from 0 to %s", MaxStableFor)))
	}
	if p.MaxMovesPerMinute < 0 {
		errs = append(errs, field.Invalid(path.Child("maxMovesPerMinute"), p.MaxMovesPerMinute, "0 (no bound) or more"))
	}
	r := &p.Requirements
	rp := path.Child("requirements")
	if u := r.MinUptime; u != nil {
		if !slices.Contains(brokerv1alpha1.Windows, u.Window) {
			errs = append(errs, field.NotSupported(rp.Child("minUptime", "window"), u.Window, []string{"1h", "24h", "7d"}))
		}
		if _, err := parsePercent(u.Percent); err != nil {
			errs = append(errs, field.Invalid(rp.Child("minUptime", "percent"), u.Percent, err.Error()))
		}
	}
	if r.MaxLatency != nil && r.MaxLatency.Duration <= 0 {
		errs = append(errs, field.Invalid(rp.Child("maxLatency"), r.MaxLatency.Duration.String(), "more than 0"))
	}
	if len(r.MinFree) > MaxResources {
		errs = append(errs, field.TooMany(rp.Child("minFree"), len(r.MinFree), MaxResources))
	}
	for _, name := range sortedNames(r.MinFree) {
		if q := r.MinFree[name]; q.Sign() < 0 {
			errs = append(errs, field.Invalid(rp.Child("minFree").Key(string(name)), q.String(), "0 or more"))
		}
	}
	if m := r.MaxPrice; m != nil {
		if !currency.MatchString(m.Currency) {
			errs = append(errs, field.Invalid(rp.Child("maxPrice", "currency"), m.Currency, "three capital letters (ISO 4217), such as EUR"))
		}
		if m.Period != "" && m.Period != brokerv1alpha1.PerHour && m.Period != brokerv1alpha1.PerMonth {
			errs = append(errs, field.NotSupported(rp.Child("maxPrice", "period"), m.Period, []string{string(brokerv1alpha1.PerHour), string(brokerv1alpha1.PerMonth)}))
		}
		if len(m.PerUnit) == 0 {
			errs = append(errs, field.Required(rp.Child("maxPrice", "perUnit"), "at least one resource's price"))
		}
		if len(m.PerUnit) > MaxResources {
			errs = append(errs, field.TooMany(rp.Child("maxPrice", "perUnit"), len(m.PerUnit), MaxResources))
		}
		for _, name := range sortedNames(m.PerUnit) {
			if q := m.PerUnit[name]; q.Sign() < 0 {
				errs = append(errs, field.Invalid(rp.Child("maxPrice", "perUnit").Key(string(name)), q.String(), "0 or more"))
			}
		}
	}
	for name, labels := range map[string]map[string]string{"requiredLabels": r.RequiredLabels, "forbiddenLabels": r.ForbiddenLabels} {
		for _, k := range sortedKeys(labels) {
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				errs = append(errs, field.Invalid(rp.Child(name).Key(k), k, msgs[0]))
			}
			if v := labels[k]; v != "" {
				if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
					errs = append(errs, field.Invalid(rp.Child(name).Key(k), v, msgs[0]))
				}
			}
		}
	}
	slices.SortFunc(errs, func(a, b *field.Error) int {
		if a.Field < b.Field {
			return -1
		}
		if a.Field > b.Field {
			return 1
		}
		return 0
	})
	return errs
}

// parsePercent parses a percentage from 0 to 100.
func parsePercent(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || v < 0 || v > 100 {
		return 0, fmt.Errorf("a percentage from 0 to 100, such as 99.5")
	}
	return v, nil
}
