// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker/decide"
	"github.com/liqo-go/liqo/internal/broker/measure"
	"github.com/liqo-go/liqo/internal/sharing"
	"github.com/liqo-go/liqo/internal/virtualkubelet/node"
)

// DefaultFailoverAfter is how long a provider's API server must fail the
// broker's health checks before the orchestrator counts it failed.
const DefaultFailoverAfter = 20 * time.Second

// ReasonPolicyInvalid is the Ready reason of a Selection whose policy has
// an invalid field: the last decision stands.
const ReasonPolicyInvalid = "PolicyInvalid"

// choice is what the policy made of a consumer's providers.
type choice struct {
	decision brokerv1alpha1.Decision
	// failed are the providers counted failed: their pods are recreated
	// elsewhere at once, not evicted gracefully.
	failed map[string]bool
	// recheck is when the decision must be made again although nothing
	// it watches changes (a hysteresis timer, a failover's deadline); 0:
	// never.
	recheck time.Duration
}

// choose decides the consumer's providers under its policy, from what the
// broker measures of every provider.
func (o *Orchestrator) choose(ctx context.Context, sel *brokerv1alpha1.Selection, consumer string, vnodes []corev1.Node, namespaces []corev1.Namespace) (*choice, error) {
	now := o.now()
	failAfter := o.FailoverAfter
	if failAfter <= 0 {
		failAfter = DefaultFailoverAfter
	}
	providers, measurements, err := o.providerIDs(ctx)
	if err != nil {
		return nil, err
	}
	vnodeOf := map[string]*corev1.Node{}
	for i := range vnodes {
		vnodeOf[vnodes[i].Labels[offloadingv1alpha1.RemoteClusterLabel]] = &vnodes[i]
	}
	l, err := o.readLedger(ctx)
	if err != nil {
		return nil, err
	}
	free := map[string]corev1.ResourceList{}
	out := &choice{failed: map[string]bool{}}
	recheck := func(d time.Duration) {
		if d > 0 && (out.recheck == 0 || d < out.recheck) {
			out.recheck = d
		}
	}
	sees, err := o.consumerSees(ctx, consumer, now, failAfter)
	if err != nil {
		return nil, err
	}
	var candidates []decide.Candidate
	for _, id := range providers {
		c := decide.Candidate{ClusterID: id}
		if m := measurements[id]; m != nil {
			c.Uptime = measure.Uptime(&m.Status, now)
			if m.Status.LatencyMicros > 0 {
				c.Latency, c.LatencyKnown = time.Duration(m.Status.LatencyMicros)*time.Microsecond, true
			}
			if since := m.Status.UnreachableSince; since != nil {
				if down := now.Sub(since.Time); down >= failAfter {
					// Said by when, not for how long: the same failure is the
					// same decision, written once.
					c.Down, c.Why = true, fmt.Sprintf("unreachable since %s (%s)", since.UTC().Format(time.RFC3339), m.Status.LastError)
				} else {
					recheck(failAfter - down)
				}
			}
		}
		vnode := vnodeOf[id]
		if vnode == nil && !c.Down {
			c.Down, c.Why = true, "no virtual node in the broker (no offer accepted)"
		}
		if c.Down && sees[id] {
			// Said without an age, as Why: the same sight is the same
			// decision. Looked at again soon: the consumer's next view
			// may no longer see it.
			c.ConsumerSees = "the consumer's own check finds it answering (its view, written within the failover time)"
			recheck(min(viewRecheck, failAfter/2))
		}
		var adv sharingv1alpha1.Advertisement
		switch err := o.Client.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(id), Name: sharingv1alpha1.AdvertisementName(id)}, &adv); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading the offer of %s: %w", id, err)
		default:
			c.Labels, c.Prices = adv.Spec.Labels, adv.Spec.Prices
			c.Currency, c.Period = adv.Spec.Currency, brokerv1alpha1.PricePeriod(adv.Spec.PricePeriod)
		}
		if vnode != nil {
			var pods corev1.PodList
			if err := o.Client.List(ctx, &pods, client.MatchingFields{node.PodsByNodeField: vnode.Name}); err != nil {
				return nil, err
			}
			// What the others' pods leave, less what other consumers hold
			// beyond their pods: the consumer's own count as free to it,
			// or it would fail MinFree by filling a provider.
			use := map[string]corev1.ResourceList{}
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					continue
				}
				owner := p.Labels[offloadingv1alpha1.OriginClusterLabel]
				if use[owner] == nil {
					use[owner] = corev1.ResourceList{}
				}
				addAll(use[owner], sharing.PodRequests(p))
			}
			c.Free = minus(sharing.SharedOn([]corev1.Node{*vnode}, pods.Items, consumer, 100, sharing.OnProviders([]string{id})),
				l.heldByOthers(id, consumer, use))
			free[id] = c.Free
		}
		candidates = append(candidates, c)
		if c.Down {
			out.failed[id] = true
		}
	}
	demand, err := o.demand(ctx, namespaces)
	if err != nil {
		return nil, err
	}
	policy := sel.Policy()
	excluded := sel.Spec.Excluded
	if sel.Aggregated() {
		// Never its own offer sold back to it.
		excluded = append(slices.Clone(excluded), consumer)
	}
	// A consumer that changed its selection (its policy, its toggles)
	// asked for a choice anew: hysteresis keeps a choice from flapping
	// with the measurements, not from following the consumer.
	previous := sel.Status.Decision
	if sel.Status.ObservedGeneration != sel.Generation {
		previous = nil
	}
	d := decide.Decide(decide.Input{Now: now, Policy: policy, Pinned: sel.Spec.Providers, Excluded: excluded,
		Candidates: candidates, Previous: previous, Demand: demand})
	// The same decision as before keeps its time: a status written only
	// when something in it changed.
	if prev := sel.Status.Decision; prev != nil {
		same := d.DeepCopy()
		same.Time = prev.Time
		if equality.Semantic.DeepEqual(same, prev) {
			d = *same
		}
	}
	stableFor := decide.DefaultStableFor
	if policy.StableFor != nil {
		stableFor = policy.StableFor.Duration
	}
	for _, p := range d.Providers {
		if p.Since != nil {
			recheck(stableFor - now.Sub(p.Since.Time) + time.Second)
		}
	}
	// A failed provider pinned by hand stays; its pods are not moved.
	for _, id := range d.Chosen {
		delete(out.failed, id)
	}
	// What the consumer holds of each chosen provider, written over the
	// ledger read: a conflict is a decision made meanwhile, decided over.
	if err := o.reserve(ctx, l, consumer, shares(&d, policy.Count, demand, free)); err != nil {
		return nil, err
	}
	out.decision = d
	return out, nil
}

// viewRecheck is how soon a decision that kept a provider on the
// consumer's view alone is made again.
const viewRecheck = 5 * time.Second

// viewSeen is when the orchestrator saw a consumer's ConsumerView change.
type viewSeen struct {
	resourceVersion string
	// at is zero for a view first seen as it was (after a restart, say):
	// its age is unknown until it changes.
	at time.Time
}

// sawView records the version of a consumer's ConsumerView the
// orchestrator sees now. The broker times a view by its own clock, as
// the node lifecycle controller times a kubelet's lease: the consumer's
// clock says nothing here.
func (o *Orchestrator) sawView(consumer, resourceVersion string, now time.Time) viewSeen {
	o.viewsMu.Lock()
	defer o.viewsMu.Unlock()
	if o.views == nil {
		o.views = map[string]viewSeen{}
	}
	s, known := o.views[consumer]
	if known && s.resourceVersion == resourceVersion {
		return s
	}
	s = viewSeen{resourceVersion: resourceVersion}
	if known {
		s.at = now
	}
	o.views[consumer] = s
	return s
}

// forgetView drops what the orchestrator saw of a consumer's view, gone
// (its consumer with it), so that the map does not grow with consumers
// gone. A decision that read the view just before it went may note it
// once more: harmless, as a view seen first counts for nothing.
func (o *Orchestrator) forgetView(consumer string) {
	o.viewsMu.Lock()
	defer o.viewsMu.Unlock()
	delete(o.views, consumer)
}

// consumerSees are the providers the consumer's own view finds answering,
// in a view the broker saw written within the failover time; none for a
// view older, or never seen to change.
func (o *Orchestrator) consumerSees(ctx context.Context, consumer string, now time.Time, within time.Duration) (map[string]bool, error) {
	var v brokerv1alpha1.ConsumerView
	switch err := o.Client.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer), Name: brokerv1alpha1.ConsumerViewName}, &v); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the consumer's view: %w", err)
	}
	s := o.sawView(consumer, v.ResourceVersion, now)
	if s.at.IsZero() || now.Sub(s.at) >= within {
		return nil, nil
	}
	out := map[string]bool{}
	for _, p := range v.Spec.Providers {
		if p.Answered {
			out[p.ClusterID] = true
		}
	}
	return out, nil
}

// addAll adds b to a.
func addAll(a, b corev1.ResourceList) {
	for name, q := range b {
		cur := a[name]
		cur.Add(q)
		a[name] = cur
	}
}

// holds says whether the cached ledger shows the consumer holding part of
// a provider (then release reads it live and drops that).
func (o *Orchestrator) holds(ctx context.Context, consumer string) (bool, error) {
	var list brokerv1alpha1.ReservationList
	if err := o.Client.List(ctx, &list, client.InNamespace(o.Namespace)); err != nil {
		return false, err
	}
	for i := range list.Items {
		for _, e := range list.Items[i].Status.Consumers {
			if e.Consumer == consumer {
				return true, nil
			}
		}
	}
	return false, nil
}

// providerIDs are the clusters the broker consumes, and its Measurements
// by provider (read once for the decision).
func (o *Orchestrator) providerIDs(ctx context.Context) ([]string, map[string]*brokerv1alpha1.Measurement, error) {
	var fcs discoveryv1alpha1.ForeignClusterList
	if err := o.Client.List(ctx, &fcs); err != nil {
		return nil, nil, fmt.Errorf("listing the ForeignClusters: %w", err)
	}
	var ms brokerv1alpha1.MeasurementList
	if err := o.Client.List(ctx, &ms, client.InNamespace(o.Namespace)); err != nil {
		return nil, nil, fmt.Errorf("listing the measurements: %w", err)
	}
	measured := make(map[string]*brokerv1alpha1.Measurement, len(ms.Items))
	for i := range ms.Items {
		measured[ms.Items[i].Name] = &ms.Items[i]
	}
	var out []string
	for i := range fcs.Items {
		// A provider down stays one: its failure is what a policy acts on.
		if id := fcs.Items[i].Spec.ClusterIdentity.ClusterID; measure.Consumed(&fcs.Items[i], measured[id] != nil) {
			out = append(out, id)
		}
	}
	return out, measured, nil
}

// demand is what the consumer's pods in the namespaces it offloads to the
// broker request.
func (o *Orchestrator) demand(ctx context.Context, namespaces []corev1.Namespace) (corev1.ResourceList, error) {
	sum := corev1.ResourceList{}
	for i := range namespaces {
		var pods corev1.PodList
		if err := o.Client.List(ctx, &pods, client.InNamespace(namespaces[i].Name)); err != nil {
			return nil, err
		}
		for j := range pods.Items {
			p := &pods.Items[j]
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			addAll(sum, sharing.PodRequests(p))
		}
	}
	return sum, nil
}

func (o *Orchestrator) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// policyCondition is the Ready condition of a Selection whose policy is
// invalid.
func policyCondition(sel *brokerv1alpha1.Selection, msg string) metav1.Condition {
	return metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonPolicyInvalid, ObservedGeneration: sel.Generation,
		Message: "the policy is invalid, the last decision stands: " + msg}
}
