// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker/decide"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/sharing"
	"github.com/liqo-go/liqo/internal/virtualkubelet/node"
)

// The Ready condition of a Selection and its reasons.
const (
	ConditionReady = "Ready"
	// ReasonServing: every enabled provider serves, none drains.
	ReasonServing = "Serving"
	// ReasonDraining: the consumer's pods are moving off disabled
	// providers.
	ReasonDraining = "Draining"
	// ReasonUnavailable: an enabled provider has no Ready virtual node in
	// the broker.
	ReasonUnavailable = "ProviderUnavailable"
	// ReasonNoProvider: the consumer enabled no provider: its pods wait.
	ReasonNoProvider = "NoProviderEnabled"
	// ReasonStranded: the providers the consumer's pods run on failed,
	// and no other in use answers: the pods stay there (not evicted to
	// wait with nowhere to run) until one does.
	ReasonStranded = "NoProviderAnswers"
)

// drainRetry is how soon a drain blocked by a PodDisruptionBudget is
// tried again.
const drainRetry = 5 * time.Second

// evictionTimeout bounds one eviction request.
const evictionTimeout = 2 * time.Second

// evictions counts the orchestrator's evictions from disabled providers.
var evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "liqo_broker_evictions_total",
	Help: "The orchestrator's evictions of pods from a provider their consumer no longer uses, by provider and result: evicted; failed-over (off a failed provider); held (a PodDisruptionBudget, or the API server, held it for now) and paced (the policy's maxMovesPerMinute reached), each counted at every try.",
}, []string{"provider", "result"})

// decisionSeconds times the decisions under a policy.
var decisionSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "liqo_broker_decision_seconds",
	Help:    "How long a decision under a consumer's policy took: reading the providers' measurements, offers and pods, deciding, and holding the reservations.",
	Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
})

// decisions counts the decisions under a policy by outcome.
var decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "liqo_broker_decisions_total",
	Help: "Decisions under a consumer's policy, by outcome: changed (the chosen providers differ from the last decision's), kept (the same), none (no provider passes the policy now: the pods stay where they run), invalid (the policy does not validate: the last choice is kept) and failed (the providers' measurements, offers or pods could not be read: tried again).",
}, []string{"outcome"})

// Outcomes of a decision (liqo_broker_decisions_total).
const (
	decisionChanged = "changed"
	decisionKept    = "kept"
	decisionNone    = "none"
	decisionInvalid = "invalid"
	decisionFailed  = "failed"
)

func init() { metrics.Registry.MustRegister(evictions, decisionSeconds, decisions) }

// decisionOutcome says what a decision that chose chosen did, against
// the last one recorded (nil: none yet).
func decisionOutcome(last *brokerv1alpha1.Decision, chosen []string) string {
	if len(chosen) == 0 {
		return decisionNone
	}
	var before []string
	if last != nil {
		before = last.Chosen
	}
	a, b := slices.Clone(before), slices.Clone(chosen)
	slices.Sort(a)
	slices.Sort(b)
	if slices.Equal(slices.Compact(a), slices.Compact(b)) {
		return decisionKept
	}
	return decisionChanged
}

// Orchestrator re-offloads each consumer's pods to the providers the
// consumer enabled (its Selection). A consumer offloads a namespace to
// the broker as to any provider; the namespace the broker makes for it is
// offloaded in turn, by a NamespaceOffloading the orchestrator keeps, to
// the consumer's providers only (PodOffloadingStrategy Remote: nothing
// runs on the broker's own nodes). New pods go to the enabled providers
// (the namespace's ProvidersAnnotation, which the pod webhook turns into
// node affinity); the pods of a provider the consumer disabled are
// evicted, gracefully and within the namespace's PodDisruptionBudgets,
// and the consumer's virtual kubelet creates them again, to land on an
// enabled provider; a provider leaves the NamespaceOffloading once none
// of the consumer's pods is left there. Requests are keyed by consumer.
type Orchestrator struct {
	// Client reads (cached) and writes.
	Client client.Client
	// Namespace is the Liqo namespace, where the providers'
	// Measurements are.
	Namespace string
	// FailoverAfter is how long a provider must fail the broker's health
	// checks before a policy counts it failed (DefaultFailoverAfter when
	// 0).
	FailoverAfter time.Duration
	// Now is injectable for tests.
	Now func() time.Time
	// Live reads through to the API server (the reservations' ledger);
	// Client when nil.
	Live client.Reader
	// AggregateNew gives every new consumer a Selection that aggregates
	// (the broker runs the aggregator and not the orchestrator).
	AggregateNew bool
	// Decided, when set, is told how long each decision under a policy
	// took: reading the measurements, offers and pods, deciding and
	// holding the reservations, before the Selection's status is written.
	Decided func(time.Duration)

	viewsMu sync.Mutex
	views   map[string]viewSeen // consumer -> its ConsumerView, as last seen
	pace    pacer               // each consumer's moves, for maxMovesPerMinute
}

// Reconcile implements reconcile.Reconciler.
func (o *Orchestrator) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	consumer := req.Name
	sel, err := o.selection(ctx, consumer)
	if err != nil {
		return ctrl.Result{}, err
	}
	if sel == nil {
		if sel, err = o.firstSelection(ctx, consumer); err != nil {
			return ctrl.Result{}, err
		}
	}
	if sel == nil || sel.Policy() == nil {
		// No policy (or no consumer any more): it holds nothing.
		if held, err := o.holds(ctx, consumer); err != nil || held {
			if err == nil {
				err = o.release(ctx, consumer)
			}
			if err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if sel == nil {
		// Not a consumer of this broker (no peering towards it yet): its
		// namespaces here, if any, are not the orchestrator's.
		return ctrl.Result{}, nil
	}
	if sel.Aggregated() {
		// It sees one pool: nothing of its Selection, which names the
		// providers.
		if err := o.revokeLogin(ctx, consumer); err != nil {
			return ctrl.Result{}, err
		}
	} else {
		if err := o.ensureLogin(ctx, consumer); err != nil {
			return ctrl.Result{}, err
		}
		if err := o.ensureView(ctx, consumer); err != nil {
			return ctrl.Result{}, err
		}
	}
	var vnodes corev1.NodeList
	if err := o.Client.List(ctx, &vnodes, client.MatchingLabels{offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue}); err != nil {
		return ctrl.Result{}, err
	}
	providerOf := map[string]string{} // node name -> provider
	ready := map[string]bool{}
	for i := range vnodes.Items {
		n := &vnodes.Items[i]
		p := n.Labels[offloadingv1alpha1.RemoteClusterLabel]
		providerOf[n.Name] = p
		ready[p] = ready[p] || node.Ready(n) == corev1.ConditionTrue
	}
	var namespaces corev1.NamespaceList
	if err := o.Client.List(ctx, &namespaces, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer}); err != nil {
		return ctrl.Result{}, err
	}
	namespaces.Items = slices.DeleteFunc(namespaces.Items, func(ns corev1.Namespace) bool {
		return !ns.DeletionTimestamp.IsZero() || ns.Labels[discoveryv1alpha1.TenantLabel] != ""
	})

	// Without a policy, the providers are those the consumer enabled;
	// under one, those the broker chooses (an invalid policy keeps the
	// last choice).
	enabled := sel.Spec.Providers
	var result ctrl.Result
	var ch *choice
	invalid := ""
	if sel.Policy() != nil {
		if errs := decide.Validate(&sel.Spec); len(errs) > 0 {
			invalid = errs.ToAggregate().Error()
			enabled = sel.InUse()
			decisions.WithLabelValues(decisionInvalid).Inc()
		} else {
			start := time.Now()
			if ch, err = o.choose(ctx, sel, consumer, vnodes.Items, namespaces.Items); err != nil {
				decisions.WithLabelValues(decisionFailed).Inc()
				return ctrl.Result{}, err
			}
			decisionSeconds.Observe(time.Since(start).Seconds())
			decisions.WithLabelValues(decisionOutcome(sel.Status.Decision, ch.decision.Chosen)).Inc()
			if o.Decided != nil {
				o.Decided(time.Since(start))
			}
			enabled = ch.decision.Chosen
			result.RequeueAfter = ch.recheck
		}
	}
	serving := slices.DeleteFunc(slices.Clone(enabled), func(p string) bool { return !ready[p] })

	count := newTally()
	var failed map[string]bool
	if ch != nil {
		failed = ch.failed
	}
	// A policy that chooses no provider for now (none passes, or none
	// holds the consumer's requests) leaves the pods where they run:
	// evicted, they would wait here with nowhere to go.
	stay := sel.Policy() != nil && len(serving) == 0
	var maxMoves int32
	if p := sel.Policy(); p != nil {
		maxMoves = p.MaxMovesPerMinute
	}
	marks := nsMarks{aggregated: sel.Aggregated()}
	if sel.Aggregated() && sel.Spec.Aggregate.Placement == brokerv1alpha1.PlacementBinPack {
		if marks.packOrder, err = o.packOrder(ctx, vnodes.Items, serving); err != nil {
			return ctrl.Result{}, err
		}
	}
	for i := range namespaces.Items {
		r, err := o.orchestrate(ctx, &namespaces.Items[i], marks, enabled, serving, providerOf, failed, stay, maxMoves, count)
		if err != nil {
			return ctrl.Result{}, err
		}
		if r.RequeueAfter > 0 {
			retryIn(&result, r.RequeueAfter)
		}
	}
	var decision *brokerv1alpha1.Decision
	switch {
	case ch != nil:
		decision = &ch.decision
	case invalid != "":
		decision = sel.Status.Decision
	}
	if err := o.report(ctx, sel, enabled, decision, invalid, ready, count); err != nil {
		return ctrl.Result{}, err
	}
	return result, nil
}

func (o *Orchestrator) selection(ctx context.Context, consumer string) (*brokerv1alpha1.Selection, error) {
	var sel brokerv1alpha1.Selection
	err := o.Client.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer), Name: brokerv1alpha1.SelectionName}, &sel)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return &sel, err
}

// firstSelection gives a consumer peered with the broker its Selection,
// empty: the broker offers it nothing until it enables providers (the
// offer follows the Selection), and its pods wait; or, with AggregateNew,
// one that aggregates every provider. Nil for a cluster that does not
// consume the broker.
func (o *Orchestrator) firstSelection(ctx context.Context, consumer string) (*brokerv1alpha1.Selection, error) {
	var fc discoveryv1alpha1.ForeignCluster
	if err := o.Client.Get(ctx, client.ObjectKey{Name: consumer}, &fc); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if !fc.Status.IncomingPeering || fc.Spec.ClusterIdentity.ClusterID != consumer {
		return nil, nil
	}
	sel := &brokerv1alpha1.Selection{ObjectMeta: metav1.ObjectMeta{Namespace: discoveryv1alpha1.TenantNamespace(consumer), Name: brokerv1alpha1.SelectionName}}
	if o.AggregateNew {
		sel.Spec.Aggregate = &brokerv1alpha1.Aggregate{}
	}
	switch err := o.Client.Create(ctx, sel); {
	case apierrors.IsNotFound(err):
		return nil, nil // no tenant namespace yet: its creation is not watched, the peering's status is
	case apierrors.IsAlreadyExists(err):
		return o.selection(ctx, consumer)
	case err != nil:
		return nil, fmt.Errorf("giving %s its selection: %w", consumer, err)
	}
	return sel, nil
}

// ensureLogin lets the consumer's users call the broker's API about its
// selection: a service account of its tenant namespace bound to the
// ClusterRole liqo-broker-consumer, whose tokens the consumer's own
// identity in the broker (liqo-consumer-<id>, which only the consumer
// cluster holds) may request; liqoctl broker login does, from the
// consumer's kubeconfig.
func (o *Orchestrator) ensureLogin(ctx context.Context, consumer string) error {
	ns := discoveryv1alpha1.TenantNamespace(consumer)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: brokerv1alpha1.ConsumerServiceAccount}}
	if err := o.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("the consumer's service account: %w", err)
	}
	labels := map[string]string{discoveryv1alpha1.ClusterIDLabel: consumer, discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue}
	for _, b := range []rbacv1.RoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: brokerv1alpha1.ConsumerServiceAccount, Labels: labels},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: brokerv1alpha1.ConsumerServiceAccount},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: brokerv1alpha1.ConsumerServiceAccount}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: brokerv1alpha1.LoginClusterRole, Labels: labels},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: brokerv1alpha1.LoginClusterRole},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: identity.ConsumerUserPrefix + consumer}}},
	} {
		if err := o.ensureBinding(ctx, &b); err != nil {
			return err
		}
	}
	return nil
}

// revokeLogin undoes ensureLogin's bindings: an aggregated consumer reads
// nothing of its Selection, and its users call nothing of the broker's
// API (the service account's tokens, bound to nothing, grant nothing).
func (o *Orchestrator) revokeLogin(ctx context.Context, consumer string) error {
	ns := discoveryv1alpha1.TenantNamespace(consumer)
	for _, obj := range []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: brokerv1alpha1.LoginClusterRole}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: brokerv1alpha1.ConsumerServiceAccount}},
	} {
		if err := o.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return err
		}
		if err := o.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("revoking the consumer's login (RoleBinding %s/%s): %w", ns, obj.GetName(), err)
		}
	}
	return nil
}

// ensureView gives the consumer its ConsumerView, empty, for its
// controller manager to write what it sees of its providers (the
// consumer may update it, not create it: RBAC cannot bound a create by
// name).
func (o *Orchestrator) ensureView(ctx context.Context, consumer string) error {
	key := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer), Name: brokerv1alpha1.ConsumerViewName}
	var v brokerv1alpha1.ConsumerView
	switch err := o.Client.Get(ctx, key, &v); {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return err
	}
	v = brokerv1alpha1.ConsumerView{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: consumer, discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue}}}
	if err := o.Client.Create(ctx, &v); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("the consumer's view: %w", err)
	}
	return nil
}

// ensureBinding creates want, or makes the binding of its name bind what
// want binds (a role reference cannot change: the binding is made anew).
func (o *Orchestrator) ensureBinding(ctx context.Context, want *rbacv1.RoleBinding) error {
	var got rbacv1.RoleBinding
	err := o.Client.Get(ctx, client.ObjectKeyFromObject(want), &got)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case got.RoleRef == want.RoleRef && equality.Semantic.DeepEqual(got.Subjects, want.Subjects):
		return nil
	default:
		if err := o.Client.Delete(ctx, &got); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("RoleBinding %s/%s: %w", want.Namespace, want.Name, err)
		}
	}
	if err := o.Client.Create(ctx, want.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("RoleBinding %s/%s: %w", want.Namespace, want.Name, err)
	}
	return nil
}

// tally counts the consumer's pods, by provider, as the orchestrator
// finds them.
type tally struct {
	pods     map[string]int32 // provider -> pods of the consumer there
	draining map[string]int32 // disabled provider -> pods still there
	held     map[string]int32 // disabled provider -> pods a budget keeps there
	// paced: provider no longer in use -> pods kept there for now, as
	// the policy's maxMovesPerMinute has moved as many this minute.
	paced map[string]int32
	// stranded: failed provider -> pods kept there, as no provider in
	// use answers to run them instead.
	stranded map[string]int32
	// stayed: provider not chosen -> pods left there, as the policy
	// chose none to run them instead.
	stayed map[string]int32
}

func newTally() *tally {
	return &tally{pods: map[string]int32{}, draining: map[string]int32{}, held: map[string]int32{}, paced: map[string]int32{}, stranded: map[string]int32{}, stayed: map[string]int32{}}
}

// orchestrate keeps one namespace of the consumer: its labels, its
// NamespaceOffloading, and the drain of disabled providers (at most
// maxMoves a minute for the consumer, when more than 0, but for those of
// failed providers).
func (o *Orchestrator) orchestrate(ctx context.Context, ns *corev1.Namespace, marks nsMarks, enabled, serving []string, providerOf map[string]string,
	failed map[string]bool, stay bool, maxMoves int32, count *tally) (ctrl.Result, error) {
	aggregated := marks.aggregated
	want := strings.Join(serving, ",")
	if ns.Labels[brokerv1alpha1.OrchestratedLabel] != brokerv1alpha1.OrchestratedValue || ns.Annotations[brokerv1alpha1.ProvidersAnnotation] != want ||
		!metav1.HasAnnotation(ns.ObjectMeta, brokerv1alpha1.ProvidersAnnotation) || aggregatedMark(ns.Labels) != aggregated ||
		ns.Annotations[brokerv1alpha1.PackOrderAnnotation] != marks.packOrder {
		patch := client.MergeFrom(ns.DeepCopy())
		metav1.SetMetaDataLabel(&ns.ObjectMeta, brokerv1alpha1.OrchestratedLabel, brokerv1alpha1.OrchestratedValue)
		setAggregatedMark(&ns.ObjectMeta, aggregated)
		if marks.packOrder != "" {
			metav1.SetMetaDataAnnotation(&ns.ObjectMeta, brokerv1alpha1.PackOrderAnnotation, marks.packOrder)
		} else {
			delete(ns.Annotations, brokerv1alpha1.PackOrderAnnotation)
		}
		metav1.SetMetaDataAnnotation(&ns.ObjectMeta, brokerv1alpha1.ProvidersAnnotation, want)
		if err := o.Client.Patch(ctx, ns, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("marking namespace %s orchestrated: %w", ns.Name, err)
		}
	}
	// The consumer's PodDisruptionBudgets, which its virtual kubelet
	// copies here, bound the evictions below; here alone may it write
	// them (a budget in another provider could hold up that provider's
	// node drains).
	consumer := ns.Labels[offloadingv1alpha1.OriginClusterLabel]
	if err := o.ensureBinding(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: brokerv1alpha1.BudgetsClusterRole,
			Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: consumer, discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: brokerv1alpha1.BudgetsClusterRole},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: identity.VirtualKubeletUserPrefix + consumer}},
	}); err != nil {
		return ctrl.Result{}, err
	}

	var list corev1.PodList
	if err := o.Client.List(ctx, &list, client.InNamespace(ns.Name)); err != nil {
		return ctrl.Result{}, err
	}
	// The providers this namespace is offloaded to: the enabled ones,
	// and the disabled ones until their pods are gone.
	keep := slices.Clone(enabled)
	var evict []*corev1.Pod
	for i := range list.Items {
		pod := &list.Items[i]
		p, ok := providerOf[pod.Spec.NodeName]
		if !ok {
			continue
		}
		count.pods[p]++
		if slices.Contains(enabled, p) {
			continue
		}
		count.draining[p]++
		if !slices.Contains(keep, p) {
			keep = append(keep, p)
		}
		if pod.DeletionTimestamp.IsZero() {
			evict = append(evict, pod)
		}
	}
	slices.Sort(keep)
	if err := o.ensureOffloading(ctx, ns.Name, aggregated, keep); err != nil {
		return ctrl.Result{}, err
	}
	var result ctrl.Result
	for _, pod := range evict {
		p := providerOf[pod.Spec.NodeName]
		if failed[p] && len(serving) == 0 {
			// No provider in use answers: evicted, the pod would wait
			// in this cluster with nowhere to run, while it may still
			// run there (a broker that lost its own network sees every
			// provider fail at once). It stays until one answers.
			count.stranded[p]++
			continue
		}
		if stay {
			count.stayed[p]++
			continue
		}
		if failed[p] {
			// Failed: no kubelet there confirms a graceful end, and the
			// pod serves nothing. It is evicted with no grace (gone at
			// once, as a lost node's pods), and the consumer's virtual
			// kubelet creates it again, to land on a provider in use; the
			// broker deletes what is left of it there once the provider
			// answers. A budget may still hold it (then tried again).
			ectx, cancel := context.WithTimeout(ctx, evictionTimeout)
			err := o.Client.SubResource("eviction").Create(ectx, pod, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
				DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}}})
			cancel()
			switch {
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			case apierrors.IsTooManyRequests(err) || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil):
				evictions.WithLabelValues(p, "held").Inc()
				count.held[p]++
				retryIn(&result, drainRetry)
			case err != nil:
				return ctrl.Result{}, fmt.Errorf("evicting %s/%s from failed provider %s: %w", pod.Namespace, pod.Name, p, err)
			default:
				evictions.WithLabelValues(p, "failed-over").Inc()
				ctrl.LoggerFrom(ctx).Info("Pod recreated off a failed provider", "pod", pod.Namespace+"/"+pod.Name, "provider", p)
			}
			continue
		}
		if err := o.move(ctx, pod, p, consumer, maxMoves, count, &result, "moving off a disabled provider"); err != nil {
			return ctrl.Result{}, err
		}
	}
	// An aggregated consumer reads its pods here whole: one made before
	// it was aggregated names its providers in its affinity, which cannot
	// change. It is made again (evicted: the consumer's virtual kubelet
	// creates it anew, and the pod webhook names no provider in it), as
	// any move: paced, within its budgets, not while no provider serves;
	// a few at a time, so that the consumer's status is not held up.
	if aggregated && !stay {
		tried := 0
		for i := range list.Items {
			pod := &list.Items[i]
			if !pod.DeletionTimestamp.IsZero() || !namesProviders(pod) || slices.Contains(evict, pod) {
				continue
			}
			if tried == remakeBatch {
				retryIn(&result, time.Second)
				break
			}
			tried++
			p := providerOf[pod.Spec.NodeName]
			if err := o.move(ctx, pod, p, consumer, maxMoves, count, &result, "made again without its providers' names, its consumer aggregated"); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	return result, nil
}

// remakeBatch bounds the pods made again without their providers' names
// in one pass over a namespace.
const remakeBatch = 10

// namesProviders says whether pod's node selection names providers: a
// node selector on the provider label, or a node affinity on it with
// values (as the pod webhook gives the pods of a namespace not
// aggregated).
func namesProviders(pod *corev1.Pod) bool {
	if _, ok := pod.Spec.NodeSelector[offloadingv1alpha1.RemoteClusterLabel]; ok {
		return true
	}
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil {
		return false
	}
	na := pod.Spec.Affinity.NodeAffinity
	var terms []corev1.NodeSelectorTerm
	if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	for _, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		terms = append(terms, p.Preference)
	}
	for _, t := range terms {
		if slices.ContainsFunc(t.MatchExpressions, func(e corev1.NodeSelectorRequirement) bool {
			return e.Key == offloadingv1alpha1.RemoteClusterLabel && (e.Operator == corev1.NodeSelectorOpIn || e.Operator == corev1.NodeSelectorOpNotIn) && len(e.Values) > 0
		}) {
			return true
		}
	}
	return false
}

// move evicts pod, of consumer's at provider p, unless maxMoves were made
// this minute or a budget holds it (then counted, and tried again).
func (o *Orchestrator) move(ctx context.Context, pod *corev1.Pod, p, consumer string, maxMoves int32, count *tally, result *ctrl.Result, why string) error {
	if wait := o.pace.wait(consumer, maxMoves, o.now()); wait > 0 {
		evictions.WithLabelValues(p, "paced").Inc()
		count.paced[p]++
		retryIn(result, wait)
		return nil
	}
	// The API server waits up to 10 s for a budget its disruption
	// controller has not observed yet: the others are not held up.
	ectx, cancel := context.WithTimeout(ctx, evictionTimeout)
	err := o.Client.SubResource("eviction").Create(ectx, pod, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}})
	cancel()
	switch {
	case apierrors.IsTooManyRequests(err) || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil):
		// A PodDisruptionBudget holds it for now.
		evictions.WithLabelValues(p, "held").Inc()
		count.held[p]++
		retryIn(result, drainRetry)
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("evicting %s/%s (%s): %w", pod.Namespace, pod.Name, why, err)
	default:
		o.pace.moved(consumer, o.now())
		evictions.WithLabelValues(p, "evicted").Inc()
		ctrl.LoggerFrom(ctx).Info("Pod "+why, "pod", pod.Namespace+"/"+pod.Name, "provider", p)
	}
	return nil
}

// retryIn makes r come again within d.
func retryIn(r *ctrl.Result, d time.Duration) {
	if r.RequeueAfter == 0 || d < r.RequeueAfter {
		r.RequeueAfter = d
	}
}

// ensureOffloading keeps the namespace's NamespaceOffloading towards
// providers, and towards none when there is none.
func (o *Orchestrator) ensureOffloading(ctx context.Context, ns string, aggregated bool, providers []string) error {
	req := corev1.NodeSelectorRequirement{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: providers}
	if len(providers) == 0 {
		req = corev1.NodeSelectorRequirement{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpDoesNotExist}
	}
	spec := offloadingv1alpha1.NamespaceOffloadingSpec{
		NamespaceMappingStrategy: offloadingv1alpha1.DefaultNameMapping,
		PodOffloadingStrategy:    offloadingv1alpha1.PodOffloadingRemote,
		ClusterSelector:          &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}}},
		SecretReflection:         offloadingv1alpha1.ReflectReferencedSecrets,
	}
	var no offloadingv1alpha1.NamespaceOffloading
	err := o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no)
	if apierrors.IsNotFound(err) {
		no = offloadingv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, Spec: spec}
		setAggregatedMark(&no.ObjectMeta, aggregated)
		if err := o.Client.Create(ctx, &no); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("offloading namespace %s: %w", ns, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(no.Spec.ClusterSelector, spec.ClusterSelector) && no.Spec.PodOffloadingStrategy == spec.PodOffloadingStrategy &&
		aggregatedMark(no.Labels) == aggregated {
		return nil
	}
	patch := client.MergeFrom(no.DeepCopy())
	no.Spec.ClusterSelector, no.Spec.PodOffloadingStrategy = spec.ClusterSelector, spec.PodOffloadingStrategy
	setAggregatedMark(&no.ObjectMeta, aggregated)
	if err := o.Client.Patch(ctx, &no, patch); err != nil {
		return fmt.Errorf("offloading namespace %s to %v: %w", ns, providers, err)
	}
	return nil
}

// nsMarks are what a consumer's namespaces are marked with besides their
// providers.
type nsMarks struct {
	// aggregated: the broker's aggregator serves the consumer.
	aggregated bool
	// packOrder: its pods are bin-packed, over these providers (comma-
	// separated, fullest first).
	packOrder string
}

// packOrder orders the providers serving a bin-packed consumer fullest
// first: by the share of their virtual node's CPU and memory that the
// pods bound there (every consumer's) request, the mean of the two. The
// pod webhook prefers them in that order, so that a new pod goes to the
// fullest that holds it and the emptiest stay whole for larger pods.
func (o *Orchestrator) packOrder(ctx context.Context, vnodes []corev1.Node, serving []string) (string, error) {
	used := map[string]float64{}
	for i := range vnodes {
		n := &vnodes[i]
		p := n.Labels[offloadingv1alpha1.RemoteClusterLabel]
		if !slices.Contains(serving, p) {
			continue
		}
		var pods corev1.PodList
		if err := o.Client.List(ctx, &pods, client.MatchingFields{node.PodsByNodeField: n.Name}); err != nil {
			return "", err
		}
		requested := corev1.ResourceList{}
		for j := range pods.Items {
			if ph := pods.Items[j].Status.Phase; ph != corev1.PodSucceeded && ph != corev1.PodFailed {
				addAll(requested, sharing.PodRequests(&pods.Items[j]))
			}
		}
		share, terms := 0.0, 0
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			alloc, req := n.Status.Allocatable[name], requested[name]
			if alloc.Sign() > 0 {
				share += float64(req.MilliValue()) / float64(alloc.MilliValue())
				terms++
			}
		}
		if terms > 0 {
			used[p] = max(used[p], share/float64(terms))
		}
	}
	order := slices.Clone(serving)
	slices.SortStableFunc(order, func(a, b string) int {
		switch {
		case used[a] > used[b]:
			return -1
		case used[a] < used[b]:
			return 1
		}
		return strings.Compare(a, b)
	})
	return strings.Join(order, ","), nil
}

// aggregatedMark says whether labels mark what they are on aggregated.
func aggregatedMark(labels map[string]string) bool {
	return labels[brokerv1alpha1.AggregatedLabel] == "true"
}

// setAggregatedMark marks m aggregated, or not.
func setAggregatedMark(m *metav1.ObjectMeta, aggregated bool) {
	if aggregated {
		metav1.SetMetaDataLabel(m, brokerv1alpha1.AggregatedLabel, "true")
		return
	}
	delete(m.Labels, brokerv1alpha1.AggregatedLabel)
}

// report writes what the orchestrator does for the consumer into its
// Selection's status.
func (o *Orchestrator) report(ctx context.Context, sel *brokerv1alpha1.Selection, enabled []string, decision *brokerv1alpha1.Decision, invalid string,
	ready map[string]bool, count *tally) error {
	st := brokerv1alpha1.SelectionStatus{ObservedGeneration: sel.Generation, Conditions: slices.Clone(sel.Status.Conditions),
		Introductions: sel.Status.Introductions, // the Introducer's
		Decision:      decision}
	var unavailable, drains []string
	for _, p := range enabled {
		state := brokerv1alpha1.ProviderServing
		if !ready[p] {
			state = brokerv1alpha1.ProviderUnavailable
			unavailable = append(unavailable, p)
		}
		st.Providers = append(st.Providers, brokerv1alpha1.SelectedProvider{ClusterID: p, State: state, Pods: count.pods[p]})
	}
	var holds, paces, strands, stays []string
	for p, n := range count.draining {
		st.Providers = append(st.Providers, brokerv1alpha1.SelectedProvider{ClusterID: p, State: brokerv1alpha1.ProviderDraining, Pods: n, Held: count.held[p] + count.paced[p]})
		drains = append(drains, p)
		if count.held[p] > 0 {
			holds = append(holds, fmt.Sprintf("%d on %s", count.held[p], p))
		}
		if count.paced[p] > 0 {
			paces = append(paces, fmt.Sprintf("%d on %s", count.paced[p], p))
		}
		if count.stranded[p] > 0 {
			strands = append(strands, fmt.Sprintf("%d on %s", count.stranded[p], p))
		}
		if count.stayed[p] > 0 {
			stays = append(stays, fmt.Sprintf("%d on %s", count.stayed[p], p))
		}
	}
	slices.Sort(holds)
	slices.Sort(paces)
	slices.Sort(strands)
	slices.Sort(stays)
	slices.SortFunc(st.Providers, func(a, b brokerv1alpha1.SelectedProvider) int { return strings.Compare(a.ClusterID, b.ClusterID) })
	slices.Sort(drains)
	cond := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonServing, ObservedGeneration: sel.Generation,
		Message: fmt.Sprintf("the consumer's pods go to %s", strings.Join(enabled, ", "))}
	switch {
	case invalid != "":
		cond = policyCondition(sel, invalid)
	case len(strands) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonStranded
		cond.Message = fmt.Sprintf("no provider in use answers: the consumer's pods stay where they were (%s), unreachable, until one does", strings.Join(strands, ", "))
		if decision != nil {
			cond.Message += "; " + decision.Message
		}
	case len(stays) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonNoProvider
		cond.Message = fmt.Sprintf("the policy chose no provider: the consumer's pods stay where they run (%s) until it chooses one", strings.Join(stays, ", "))
		if decision != nil {
			cond.Message += "; " + decision.Message
		}
	case len(drains) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonDraining
		cond.Message = fmt.Sprintf("the consumer's pods are moving off %s, disabled", strings.Join(drains, ", "))
		if len(holds) > 0 {
			cond.Message += fmt.Sprintf("; its PodDisruptionBudgets hold %s for now", strings.Join(holds, ", "))
		}
		if len(paces) > 0 {
			cond.Message += fmt.Sprintf("; the policy's maxMovesPerMinute (%d) holds %s for now", sel.Policy().MaxMovesPerMinute, strings.Join(paces, ", "))
		}
	case len(unavailable) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonUnavailable
		cond.Message = fmt.Sprintf("the broker has no Ready virtual node for %s: not peered, or unreachable", strings.Join(unavailable, ", "))
	case len(enabled) == 0 && sel.Policy() != nil:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonNoProvider
		cond.Message = "the policy chose no provider: its pods wait; " + decision.Message
	case len(enabled) == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonNoProvider
		cond.Message = "the consumer enabled no provider: its pods wait (liqoctl broker enable)"
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	if equality.Semantic.DeepEqual(st, sel.Status) {
		return nil
	}
	patch := client.MergeFrom(sel.DeepCopy())
	sel.Status = st
	if err := o.Client.Status().Patch(ctx, sel, patch); err != nil {
		return fmt.Errorf("reporting on the selection of %s: %w", sel.Namespace, err)
	}
	return nil
}

// SetupWithManager registers the orchestrator.
func (o *Orchestrator) SetupWithManager(mgr ctrl.Manager) error {
	consumerOfLabel := func(_ context.Context, obj client.Object) []reconcile.Request {
		if c := obj.GetLabels()[offloadingv1alpha1.OriginClusterLabel]; c != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: c}}}
		}
		return nil
	}
	consumerOfSelection := func(_ context.Context, obj client.Object) []reconcile.Request {
		if c, ok := strings.CutPrefix(obj.GetNamespace(), discoveryv1alpha1.TenantNamespace("")); ok && c != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: c}}}
		}
		return nil
	}
	// consumers maps an event to the consumers whose Selection passes
	// concerned.
	consumers := func(concerned func(*brokerv1alpha1.Selection) bool) handler.MapFunc {
		return func(ctx context.Context, _ client.Object) []reconcile.Request {
			var sels brokerv1alpha1.SelectionList
			if err := mgr.GetClient().List(ctx, &sels); err != nil {
				return nil
			}
			var out []reconcile.Request
			for i := range sels.Items {
				if concerned(&sels.Items[i]) {
					out = append(out, consumerOfSelection(ctx, &sels.Items[i])...)
				}
			}
			return out
		}
	}
	// A virtual node coming, going or changing readiness concerns every
	// consumer with a selection; what only a policy decides on, only the
	// consumers with one.
	saw := func(ctx context.Context, obj client.Object) {
		if out := consumerOfSelection(ctx, obj); len(out) == 1 && obj.GetName() == brokerv1alpha1.ConsumerViewName {
			o.sawView(out[0].Name, obj.GetResourceVersion(), o.now())
		}
	}
	everyConsumer := consumers(func(*brokerv1alpha1.Selection) bool { return true })
	policyConsumers := consumers(func(s *brokerv1alpha1.Selection) bool { return s.Policy() != nil })
	virtual := predicate.NewPredicateFuncs(func(obj client.Object) bool { return offloadingv1alpha1.IsVirtualNode(obj.GetLabels()) })
	peer := func(_ context.Context, obj client.Object) []reconcile.Request {
		if fc, ok := obj.(*discoveryv1alpha1.ForeignCluster); ok && fc.Status.IncomingPeering && fc.Spec.ClusterIdentity.ClusterID != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: fc.Spec.ClusterIdentity.ClusterID}}}
		}
		return nil
	}
	return ctrl.NewControllerManagedBy(mgr).Named("broker-orchestrator").
		Watches(&brokerv1alpha1.Selection{}, handler.EnqueueRequestsFromMapFunc(consumerOfSelection)).
		Watches(&discoveryv1alpha1.ForeignCluster{}, handler.EnqueueRequestsFromMapFunc(peer)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(consumerOfLabel)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(consumerOfLabel)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(everyConsumer), builder.WithPredicates(virtual, nodeReadiness())).
		// What policies decide on: the providers' measurements and offers.
		Watches(&brokerv1alpha1.Measurement{}, handler.EnqueueRequestsFromMapFunc(policyConsumers)).
		// A consumer's view, timed as it is seen written. It wakes no
		// decision: those that hang on it are made again every few
		// seconds anyway, and a consumer writing its view in a loop
		// would otherwise have the orchestrator decide for it in one.
		// A view deleted (its consumer gone) is forgotten.
		Watches(&brokerv1alpha1.ConsumerView{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				saw(ctx, e.Object)
			},
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				saw(ctx, e.ObjectNew)
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if out := consumerOfSelection(ctx, e.Object); len(out) == 1 && e.Object.GetName() == brokerv1alpha1.ConsumerViewName {
					o.forgetView(out[0].Name)
				}
			},
		}).
		Watches(&sharingv1alpha1.Advertisement{}, handler.EnqueueRequestsFromMapFunc(policyConsumers)).
		// A ledger's holders too: a consumer gone while the broker was
		// away (no Selection left to wake it) is found in the ledgers
		// listed at start, and its holdings released.
		Watches(&brokerv1alpha1.Reservation{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
			out := policyConsumers(ctx, obj)
			if r, ok := obj.(*brokerv1alpha1.Reservation); ok {
				for _, e := range r.Status.Consumers {
					if e.Consumer != "" {
						out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: e.Consumer}})
					}
				}
			}
			return out
		})).
		Complete(o)
}

// nodeReadiness passes node events that change what the orchestrator
// sees of a node: its coming and going, and its readiness.
func nodeReadiness() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*corev1.Node)
		after, ok2 := e.ObjectNew.(*corev1.Node)
		return !ok1 || !ok2 || node.Ready(before) != node.Ready(after)
	}}
}
