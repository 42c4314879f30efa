// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker/decide"
)

// ledger is the providers' Reservations as the API server holds them now
// (read live: a decision is made on the latest, and written only over it).
type ledger map[string]*brokerv1alpha1.Reservation

// readLedger lists the Reservations through to the API server.
func (o *Orchestrator) readLedger(ctx context.Context) (ledger, error) {
	var list brokerv1alpha1.ReservationList
	if err := o.live().List(ctx, &list, client.InNamespace(o.Namespace)); err != nil {
		return nil, fmt.Errorf("reading the reservations: %w", err)
	}
	out := ledger{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

func (o *Orchestrator) live() client.Reader {
	if o.Live != nil {
		return o.Live
	}
	return o.Client
}

// heldByOthers is what consumers other than consumer hold of provider
// beyond what their pods there use already (those count in what is free).
func (l ledger) heldByOthers(provider, consumer string, use map[string]corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	r := l[provider]
	if r == nil {
		return out
	}
	for _, e := range r.Status.Consumers {
		if e.Consumer == consumer {
			continue
		}
		for name, q := range e.Resources {
			extra := q.DeepCopy()
			if used, ok := use[e.Consumer][name]; ok {
				extra.Sub(used)
			}
			if extra.Sign() > 0 {
				cur := out[name]
				cur.Add(extra)
				out[name] = cur
			}
		}
	}
	return out
}

// minus returns a less b, floored at 0, for the resources of a.
func minus(a, b corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range a {
		v := q.DeepCopy()
		if s, ok := b[name]; ok {
			v.Sub(s)
		}
		if v.Sign() < 0 {
			v = *resource.NewQuantity(0, q.Format)
		}
		out[name] = v
	}
	return out
}

// shares is what the consumer holds of each chosen provider: with Count
// N, a Nth of its requests at each; with Count 0, the best first hold as
// much as they have free until the requests are held.
func shares(d *brokerv1alpha1.Decision, count int32, demand corev1.ResourceList, free map[string]corev1.ResourceList) map[string]corev1.ResourceList {
	out := map[string]corev1.ResourceList{}
	if len(demand) == 0 {
		return out
	}
	if count > 0 {
		for _, id := range d.Chosen {
			out[id] = decide.Share(demand, count)
		}
		return out
	}
	left := demand.DeepCopy()
	for _, p := range d.Providers { // best first
		if !slices.Contains(d.Chosen, p.ClusterID) {
			continue
		}
		take := corev1.ResourceList{}
		for name, want := range left {
			have := free[p.ClusterID][name]
			q := want.DeepCopy()
			if have.Cmp(q) < 0 {
				q = have.DeepCopy()
			}
			if q.Sign() > 0 {
				take[name] = q
				want.Sub(q)
				left[name] = want
			}
		}
		if len(take) > 0 {
			out[p.ClusterID] = take
		}
	}
	return out
}

// reserve writes the consumer's holdings into the ledger: want per
// provider, none elsewhere. Each write is made over the version read: a
// conflict means another decision came first, and the caller decides
// again over it.
func (o *Orchestrator) reserve(ctx context.Context, l ledger, consumer string, want map[string]corev1.ResourceList) error {
	ids := make([]string, 0, len(l)+len(want))
	for id := range l {
		ids = append(ids, id)
	}
	for id := range want {
		if l[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	now := metav1.NewTime(o.now())
	for _, id := range ids {
		r := l[id]
		var entries []brokerv1alpha1.ConsumerReservation
		var had *brokerv1alpha1.ConsumerReservation
		if r != nil {
			for i, e := range r.Status.Consumers {
				if e.Consumer == consumer {
					had = &r.Status.Consumers[i]
					continue
				}
				entries = append(entries, e)
			}
		}
		res, ok := want[id]
		if ok {
			e := brokerv1alpha1.ConsumerReservation{Consumer: consumer, Resources: res, Since: now}
			if had != nil && equality.Semantic.DeepEqual(had.Resources, res) {
				e.Since = had.Since
			}
			entries = append(entries, e)
		}
		switch {
		case !ok && had == nil:
			continue
		case ok && had != nil && equality.Semantic.DeepEqual(had.Resources, res):
			continue
		case len(entries) > brokerv1alpha1.MaxReservations:
			return fmt.Errorf("provider %s: %d consumers hold part of it already", id, brokerv1alpha1.MaxReservations)
		}
		slices.SortFunc(entries, func(a, b brokerv1alpha1.ConsumerReservation) int { return strings.Compare(a.Consumer, b.Consumer) })
		if r == nil {
			r = &brokerv1alpha1.Reservation{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: id}}
			if err := o.Client.Create(ctx, r); err != nil {
				// Made by another decision meanwhile: decide again over it.
				return fmt.Errorf("the reservations of %s: %w", id, err)
			}
		}
		r.Status.Consumers = entries
		r.Status.Reserved = corev1.ResourceList{}
		for _, e := range entries {
			for name, q := range e.Resources {
				cur := r.Status.Reserved[name]
				cur.Add(q)
				r.Status.Reserved[name] = cur
			}
		}
		// Update, not patch: it fails when the ledger moved since read.
		if err := o.Client.Status().Update(ctx, r); err != nil {
			if apierrors.IsConflict(err) {
				return fmt.Errorf("the reservations of %s changed meanwhile, deciding again: %w", id, err)
			}
			return fmt.Errorf("the reservations of %s: %w", id, err)
		}
	}
	return nil
}

// release drops the consumer's holdings everywhere.
func (o *Orchestrator) release(ctx context.Context, consumer string) error {
	l, err := o.readLedger(ctx)
	if err != nil {
		return err
	}
	return o.reserve(ctx, l, consumer, nil)
}
