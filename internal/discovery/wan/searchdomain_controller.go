// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package wan runs WAN discovery: for each SearchDomain it browses
// the DNS-SD records of its domain, reports every cluster listed there to
// the ForeignCluster registry, withdraws the ones no longer listed, and
// lists what it produced in its status. A domain that does not resolve
// sets a condition and changes nothing else.
package wan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/discovery/dnssd"
	"github.com/liqo-go/liqo/internal/foreigncluster"
)

const finalizer = discoveryv1alpha1.SearchDomainFinalizer

// Source names a SearchDomain as a discovery source.
func Source(name string) string { return "searchdomain/" + name }

// +kubebuilder:rbac:groups=discovery.liqo.io,resources=searchdomains,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=discovery.liqo.io,resources=searchdomains/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=discovery.liqo.io,resources=searchdomains/finalizers,verbs=update

// Reconciler resolves SearchDomains.
type Reconciler struct {
	// Client reads and writes SearchDomains.
	Client client.Client
	// Registry records what is found.
	Registry *foreigncluster.Registry
	// Resolver browses DNS.
	Resolver *dnssd.Resolver
	// Service is the DNS-SD service type browsed.
	Service func() string
	// Interval is how often each domain is resolved again.
	Interval func() time.Duration
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var sd discoveryv1alpha1.SearchDomain
	if err := r.Client.Get(ctx, req.NamespacedName, &sd); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	source := Source(sd.Name)
	if !sd.DeletionTimestamp.IsZero() {
		for _, id := range sd.Status.ForeignClusters {
			if err := r.Registry.Withdrawn(ctx, id, source); err != nil {
				return ctrl.Result{}, err
			}
		}
		controllerutil.RemoveFinalizer(&sd, finalizer)
		return ctrl.Result{}, r.Client.Update(ctx, &sd)
	}
	if controllerutil.AddFinalizer(&sd, finalizer) {
		if err := r.Client.Update(ctx, &sd); err != nil {
			return ctrl.Result{}, err
		}
	}

	orig := sd.DeepCopy()
	found, drops, err := r.Resolver.Browse(ctx, sd.Spec.Domain, r.Service())
	refused := append([]*dnssd.DropError{}, drops...)
	for _, d := range drops {
		dnssd.DroppedTotal.WithLabelValues(dnssd.SourceDNS, d.Reason).Inc()
		log.V(1).Info("Dropped a DNS-SD record", "domain", sd.Spec.Domain, "reason", d.Reason, "detail", d.Detail)
	}
	if err != nil {
		// The domain does not resolve: say so, and leave the clusters it
		// listed alone (a DNS outage is no reason to forget them).
		meta.SetStatusCondition(&sd.Status.Conditions, metav1.Condition{
			Type: discoveryv1alpha1.ConditionResolved, Status: metav1.ConditionFalse, Reason: "DNSError",
			Message: err.Error(), ObservedGeneration: sd.Generation,
		})
		return ctrl.Result{RequeueAfter: r.Interval()}, r.patchStatus(ctx, orig, &sd)
	}

	var ids, errs = []string{}, []error{}
	for _, f := range found {
		if f.Announcement == nil {
			continue
		}
		dnssd.FoundTotal.WithLabelValues(dnssd.SourceDNS).Inc()
		err := r.Registry.Seen(ctx, foreigncluster.Discovery{
			Sighting: foreigncluster.Sighting(*f.Announcement), Source: source, Type: discoveryv1alpha1.WanDiscovery, AutoJoin: sd.Spec.AutoJoin,
		})
		var rerr *foreigncluster.RefusedError
		if errors.As(err, &rerr) {
			drop := &dnssd.DropError{Reason: rerr.Reason, Detail: rerr.Detail}
			// Refused: counted. A cluster listed at an address not (yet)
			// proved to be it stays listed, as after a failed write:
			// withdrawing it would delete it, and its pinned key and CA
			// with it, for whoever answers there next to be trusted anew.
			dnssd.DroppedTotal.WithLabelValues(dnssd.SourceDNS, drop.Reason).Inc()
			log.V(1).Info("Refused a DNS-SD instance", "domain", sd.Spec.Domain, "reason", drop.Reason, "detail", drop.Detail)
			refused = append(refused, drop)
			if drop.Reason != foreigncluster.RefusedUnverifiedAddress {
				continue
			}
			err = nil
		}
		if err != nil {
			// Still listed: a failed write is no reason to withdraw it.
			errs = append(errs, err)
		}
		if f.Announcement.ClusterID != r.Registry.LocalClusterID {
			ids = append(ids, f.Announcement.ClusterID)
		}
	}
	sort.Strings(ids)
	ids = slices.Compact(ids)
	for _, id := range sd.Status.ForeignClusters {
		if !slices.Contains(ids, id) {
			if err := r.Registry.Withdrawn(ctx, id, source); err != nil {
				errs = append(errs, err)
				ids = append(ids, id) // still listed until withdrawn
			}
		}
	}
	sort.Strings(ids)
	sd.Status.ForeignClusters = ids
	now := metav1.Now()
	sd.Status.LastResolved = &now
	cond := metav1.Condition{
		Type: discoveryv1alpha1.ConditionResolved, Status: metav1.ConditionTrue, Reason: discoveryv1alpha1.ReasonResolved,
		Message: fmt.Sprintf("%d clusters listed in %s", len(ids), sd.Spec.Domain), ObservedGeneration: sd.Generation,
	}
	if len(refused) > 0 {
		// "0 clusters listed" must never hide what was refused.
		cond.Reason, cond.Message = discoveryv1alpha1.ReasonRecordsDropped, cond.Message+"; "+dropSummary(refused)
	}
	meta.SetStatusCondition(&sd.Status.Conditions, cond)
	if err := r.patchStatus(ctx, orig, &sd); err != nil {
		errs = append(errs, err)
	}
	return ctrl.Result{RequeueAfter: r.Interval()}, errors.Join(errs...)
}

func (r *Reconciler) patchStatus(ctx context.Context, orig, sd *discoveryv1alpha1.SearchDomain) error {
	if err := r.Client.Status().Patch(ctx, sd, client.MergeFrom(orig)); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Registry == nil || r.Resolver == nil || r.Service == nil || r.Interval == nil {
		return errors.New("searchdomain.Reconciler needs Client, Registry, Resolver, Service and Interval")
	}
	return ctrl.NewControllerManagedBy(mgr).
		// Status writes (every resolution) must not trigger resolutions;
		// deletion bumps the generation too.
		For(&discoveryv1alpha1.SearchDomain{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("searchdomain").
		Complete(r)
}

// maxDropDetail bounds each example in the condition's message: the
// details quote what a DNS server served.
const maxDropDetail = 200

// dropSummary says how many instances were dropped or refused, by reason
// (the label of liqo_discovery_dropped_total), with the first of each.
func dropSummary(drops []*dnssd.DropError) string {
	count := map[string]int{}
	first := map[string]string{}
	var reasons []string
	for _, d := range drops {
		if count[d.Reason] == 0 {
			reasons = append(reasons, d.Reason)
			first[d.Reason] = d.Detail
		}
		count[d.Reason]++
	}
	sort.Strings(reasons)
	parts := make([]string, 0, len(reasons))
	for _, reason := range reasons {
		detail := first[reason]
		if len(detail) > maxDropDetail {
			detail = detail[:maxDropDetail] + "..."
		}
		parts = append(parts, fmt.Sprintf("%d %s (%s)", count[reason], reason, strconv.QuoteToASCII(detail)))
	}
	return fmt.Sprintf("%d dropped: %s", len(drops), strings.Join(parts, ", "))
}
