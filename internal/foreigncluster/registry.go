// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package foreigncluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
)

// Sighting is what a discovery mechanism learnt of a cluster: who it says
// it is and where its auth service answers. Nothing in it is trusted until
// the auth service proves it.
type Sighting struct {
	// ClusterID is the cluster's stable identity (a DNS label).
	ClusterID string
	// ClusterName is the human-readable name; optional.
	ClusterName string
	// AuthURL is the https URL of the cluster's auth service.
	AuthURL string
	// Namespace is the Liqo namespace of the cluster; optional.
	Namespace string
}

// Why the registry refuses a well-formed sighting: the Reason of a
// RefusedError, and the reason label of the discovery sources'
// dropped-input metrics.
const (
	// RefusedUnverifiedAddress: a new auth URL that does not present the
	// pinned key.
	RefusedUnverifiedAddress = "unverified-address"
	// RefusedNotDiscovered: a LAN sighting of a cluster added by hand or
	// known from its peering.
	RefusedNotDiscovered = "not-discovered"
	// RefusedTooManyClusters: over the ClusterConfig's
	// maxDiscoveredClusters.
	RefusedTooManyClusters = "too-many-clusters"
)

// RefusedError is a sighting the registry refused; the source counts it.
type RefusedError struct {
	// Reason is one of the Refused* constants.
	Reason string
	// Detail explains it to a human.
	Detail string
}

func (e *RefusedError) Error() string { return e.Reason + ": " + e.Detail }

// RefusedInvalid is the reason of a sighting that breaks the registry's own rules (every
// source checks its input first; the registry does not rely on it).
const RefusedInvalid = "invalid"

// Validate checks what the registry relies on: a ClusterID usable in
// object names, an https auth URL with a host and no credentials, and a
// namespace name if any.
func (s *Sighting) Validate() error {
	invalid := func(format string, args ...any) error {
		return &RefusedError{Reason: RefusedInvalid, Detail: fmt.Sprintf(format, args...)}
	}
	if errs := validation.IsDNS1123Label(s.ClusterID); len(errs) > 0 {
		return invalid("cluster ID %q: %s", s.ClusterID, strings.Join(errs, "; "))
	}
	if s.Namespace != "" {
		if errs := validation.IsDNS1123Label(s.Namespace); len(errs) > 0 {
			return invalid("namespace %q: %s", s.Namespace, strings.Join(errs, "; "))
		}
	}
	if len(s.ClusterName) > maxClusterName {
		return invalid("cluster name is %d bytes, over %d", len(s.ClusterName), maxClusterName)
	}
	u, err := url.Parse(s.AuthURL)
	if err != nil || len(s.AuthURL) > maxAuthURL || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return invalid("auth URL %q is not an https URL with a host, at most %d bytes", s.AuthURL, maxAuthURL)
	}
	return nil
}

// maxAuthURL bounds a Sighting's auth URL.
const maxAuthURL = 2048

// Discovery is one sighting of a cluster by a discovery mechanism.
type Discovery struct {
	// Sighting is what was seen.
	Sighting Sighting
	// Source names the mechanism: "mdns", or "searchdomain/<name>".
	Source string
	// Type is LAN or WAN.
	Type discoveryv1alpha1.DiscoveryType
	// AutoJoin overrides the ClusterConfig default for a new
	// ForeignCluster; nil keeps the default.
	AutoJoin *bool
	// At is when the cluster was seen; zero means now.
	At time.Time
}

// Registry turns sightings into ForeignClusters. It is safe for concurrent
// use.
type Registry struct {
	// Client reads and writes ForeignClusters.
	Client client.Client
	// APIReader reads from the API server itself, after a conflict showed
	// that the client's cache is behind; nil means Client.
	APIReader client.Reader
	// LocalClusterID is this cluster's ID: a cluster never records itself.
	LocalClusterID string
	// Choices holds the operators' remembered join decisions.
	Choices *Choices
	// AutoJoin returns the ClusterConfig's autojoin default.
	AutoJoin func() bool
	// Clock is injectable for tests; defaults to the real clock.
	Clock clock.PassiveClock
	// RefreshEvery bounds how often a sighting that changes nothing but the
	// time is written, to spare the API server; nil means 2 seconds.
	RefreshEvery func() time.Duration
	// MaxDiscovered returns how many ForeignClusters discovery alone may
	// know of (the ClusterConfig's maxDiscoveredClusters); nil or 0 means
	// DefaultMaxDiscovered.
	MaxDiscovered func() int
	// Verify asks the auth service at an announced new address for its
	// identity; nil means auth.GetIdentity. Injectable for tests.
	Verify func(ctx context.Context, url string, o auth.ClientOptions) (*auth.Response, error)

	mu       sync.Mutex
	written  map[string]time.Time // clusterID/source -> last write
	verdicts map[string]verdict   // clusterID + " " + auth URL -> the last check of a move there
	checking map[string]bool      // clusterID -> a move of it is being checked

	createMu  sync.Mutex
	fullUntil time.Time // checkRoom found no room: refuse until then without counting again
}

// DefaultMaxDiscovered is the default bound on clusters only discovery
// knows of.
const DefaultMaxDiscovered = 256

// maxVerdicts bounds the checks of moves remembered, and maxChecks those
// running at once.
const (
	maxVerdicts = 4096
	maxChecks   = 4
)

// verdict is the outcome of checking a cluster's new address.
type verdict struct {
	at  time.Time
	err error // nil: it is the cluster
}

func (r *Registry) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// typeRank orders discovery types: the most explicit way a cluster was
// found names it.
var typeRank = map[discoveryv1alpha1.DiscoveryType]int{
	discoveryv1alpha1.LanDiscovery:             1,
	discoveryv1alpha1.WanDiscovery:             2,
	discoveryv1alpha1.IncomingPeeringDiscovery: 3,
	discoveryv1alpha1.ManualDiscovery:          4,
}

// Find returns the ForeignCluster of clusterID, or nil.
func Find(ctx context.Context, c client.Reader, clusterID string) (*discoveryv1alpha1.ForeignCluster, error) {
	var list discoveryv1alpha1.ForeignClusterList
	if err := c.List(ctx, &list, client.MatchingLabels{discoveryv1alpha1.ClusterIDLabel: clusterID}); err != nil {
		return nil, fmt.Errorf("listing ForeignClusters of %s: %w", clusterID, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	// Several can exist only briefly (a manual insertion being merged);
	// the oldest is the one that stays.
	oldest := &list.Items[0]
	for i := range list.Items {
		if list.Items[i].CreationTimestamp.Before(&oldest.CreationTimestamp) {
			oldest = &list.Items[i]
		}
	}
	return oldest, nil
}

// Lookup returns the ForeignCluster an operator names on a command line:
// by its name, or by its ClusterID.
func Lookup(ctx context.Context, c client.Reader, name string) (*discoveryv1alpha1.ForeignCluster, error) {
	var fc discoveryv1alpha1.ForeignCluster
	err := c.Get(ctx, client.ObjectKey{Name: name}, &fc)
	if err == nil {
		return &fc, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	found, err := Find(ctx, c, name)
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, fmt.Errorf("no ForeignCluster is named %s or has ClusterID %s: see liqoctl status", name, name)
	}
	return found, nil
}

// Seen records a sighting: it creates the ForeignCluster, or updates the
// existing one in place (a changed address never tears anything down).
func (r *Registry) Seen(ctx context.Context, d Discovery) error {
	a := d.Sighting
	if err := a.Validate(); err != nil {
		return err
	}
	if a.ClusterID == r.LocalClusterID {
		return nil
	}
	now := r.now()
	if !d.At.IsZero() {
		now = d.At
	}
	if r.recent(a.ClusterID, d.Source, now) {
		return nil
	}
	// The client reads from a cache that may briefly lag behind a write:
	// a conflict is retried with a fresher copy. A ForeignCluster deleted
	// meanwhile is not recreated from this (possibly stale) sighting; the
	// next one recreates it if the cluster still announces itself.
	var reader client.Reader = r.Client
	err := retry.OnError(cacheLagBackoff, apierrors.IsConflict, func() error {
		fc, err := Find(ctx, reader, a.ClusterID)
		if r.APIReader != nil {
			reader = r.APIReader // any retry reads what the server has
		}
		if err != nil {
			return err
		}
		switch {
		case fc == nil:
			// One creation at a time, counted against the API server, so
			// that parallel sightings cannot overshoot the bound.
			r.createMu.Lock()
			err := r.checkRoom(ctx, now)
			if err == nil {
				fc, err = r.create(ctx, d)
			}
			r.createMu.Unlock()
			if err != nil {
				return err
			}
		case d.Type == discoveryv1alpha1.LanDiscovery && !discoveredType(fc):
			// Anyone on the LAN can announce a known ClusterID: a cluster
			// added by hand or known from its peering gets no LAN source,
			// which would keep it alive and look like a LAN sighting.
			return &RefusedError{Reason: RefusedNotDiscovered, Detail: fmt.Sprintf(
				"cluster %s is known as %s, not by discovery: its LAN announcements are ignored",
				a.ClusterID, fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel])}
		default:
			if err := r.updateSpec(ctx, fc, d); err != nil {
				// A DNS zone listing the cluster at an address not (yet)
				// proved still lists it: the source saw it, or the cluster
				// would age out and be trusted anew at that address.
				var refused *RefusedError
				if d.Type == discoveryv1alpha1.WanDiscovery && errors.As(err, &refused) && refused.Reason == RefusedUnverifiedAddress {
					if err := r.markSeen(ctx, fc, d, now); err != nil {
						return err
					}
				}
				return err
			}
		}
		return r.markSeen(ctx, fc, d, now)
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("recording %s found by %s: %w", a.ClusterID, d.Source, err)
	}
	r.mu.Lock()
	if r.written == nil {
		r.written = map[string]time.Time{}
	}
	r.written[a.ClusterID+"/"+d.Source] = now
	r.mu.Unlock()
	return nil
}

// cacheLagBackoff retries conflicts with other writers of the same status.
var cacheLagBackoff = wait.Backoff{Steps: 6, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.5}

func (r *Registry) refreshEvery() time.Duration {
	if r.RefreshEvery != nil {
		return r.RefreshEvery()
	}
	return 2 * time.Second
}

func (r *Registry) recent(clusterID, source string, now time.Time) bool {
	every := r.refreshEvery()
	r.mu.Lock()
	defer r.mu.Unlock()
	last, ok := r.written[clusterID+"/"+source]
	return ok && now.Sub(last) < every
}

// checkRoom refuses a new discovered cluster when discovery alone already
// knows of as many as allowed.
// Called with createMu held.
func (r *Registry) checkRoom(ctx context.Context, now time.Time) error {
	limit := DefaultMaxDiscovered
	if r.MaxDiscovered != nil && r.MaxDiscovered() > 0 {
		limit = r.MaxDiscovered()
	}
	full := func(n int) error {
		return &RefusedError{Reason: RefusedTooManyClusters, Detail: fmt.Sprintf(
			"discovery already knows of %d clusters, the ClusterConfig's maxDiscoveredClusters (%d)", n, limit)}
	}
	if now.Before(r.fullUntil) {
		return full(limit)
	}
	var reader client.Reader = r.Client
	if r.APIReader != nil {
		reader = r.APIReader // the cache may not show the last creations yet
	}
	var list discoveryv1alpha1.ForeignClusterList
	sel, err := labels.Parse(discoveryv1alpha1.DiscoveryTypeLabel + " in (" + string(discoveryv1alpha1.LanDiscovery) + "," + string(discoveryv1alpha1.WanDiscovery) + ")")
	if err != nil {
		return err
	}
	if err := reader.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return fmt.Errorf("counting discovered clusters: %w", err)
	}
	n := 0
	for i := range list.Items {
		if discoveredOnly(&list.Items[i]) {
			n++
		}
	}
	if n >= limit {
		r.fullUntil = now.Add(time.Second)
		return full(n)
	}
	return nil
}

// verifyMove accepts a new auth URL for fc only when the auth service there
// presents the key pinned at first contact and answers for the same
// cluster: anyone on the LAN, or able to add a DNS record, can announce a
// known ClusterID with an address of their own.
//
// The check runs in the background, one per cluster and a few at a time,
// so that addresses that do not answer never hold back the sightings of
// any cluster at the address it has: the sighting that started it is
// dropped, and one arriving after a successful check moves the cluster. A
// verdict is remembered for a refresh interval, so that repeated
// announcements are not dialled each time.
func (r *Registry) verifyMove(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster, a Sighting) error {
	pinned := fc.Status.AuthServiceKeyFingerprint
	if pinned == "" {
		return nil // not contacted yet: trust on first use
	}
	key, now := a.ClusterID+" "+a.AuthURL, r.now()
	drop := func(why string) error {
		return &RefusedError{Reason: RefusedUnverifiedAddress, Detail: fmt.Sprintf(
			"cluster %s was announced at %s, which %s; it stays at %s", a.ClusterID, a.AuthURL, why, fc.Spec.ForeignAuthURL)}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.verdicts[key]; ok && now.Sub(v.at) < r.refreshEvery() {
		if v.err == nil {
			return nil
		}
		return drop(fmt.Sprintf("does not prove to be it (%v)", v.err))
	}
	if r.checking[a.ClusterID] {
		return drop("waits: another address of this cluster is being checked")
	}
	if len(r.checking) >= maxChecks {
		return drop("waits: too many addresses are being checked")
	}
	if r.checking == nil {
		r.checking = map[string]bool{}
	}
	r.checking[a.ClusterID] = true
	opts := auth.ClientOptions{
		InsecureSkipVerify: fc.Spec.InsecureSkipTLSVerify != nil && *fc.Spec.InsecureSkipTLSVerify,
		PinnedKey:          pinned, Timeout: 2 * time.Second,
	}
	go r.check(context.WithoutCancel(ctx), key, a, opts)
	return drop("is being checked")
}

// check asks the auth service at a new address whether it is the cluster,
// and remembers the verdict.
func (r *Registry) check(ctx context.Context, key string, a Sighting, opts auth.ClientOptions) {
	verify := r.Verify
	if verify == nil {
		verify = auth.GetIdentity
	}
	resp, err := verify(ctx, a.AuthURL, opts)
	if err == nil && resp.Identity.ClusterID != a.ClusterID {
		err = fmt.Errorf("the auth service there answers for cluster %s", resp.Identity.ClusterID)
	}
	if err == nil {
		// Proved: move the cluster now, rather than wait for a sighting
		// that may come after the verdict is forgotten.
		err = r.move(ctx, a, opts.PinnedKey)
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.checking, a.ClusterID)
	if r.verdicts == nil {
		r.verdicts = map[string]verdict{}
	}
	if len(r.verdicts) >= maxVerdicts {
		for k, v := range r.verdicts {
			if now.Sub(v.at) >= r.refreshEvery() {
				delete(r.verdicts, k)
			}
		}
		if len(r.verdicts) >= maxVerdicts {
			return // full of fresh verdicts: this one is found again next time
		}
	}
	r.verdicts[key] = verdict{at: now, err: err}
}

// move points the cluster's ForeignCluster at a's auth URL, if its pinned
// key is still pinnedKey and discovery may move it.
func (r *Registry) move(ctx context.Context, a Sighting, pinnedKey string) error {
	return retry.RetryOnConflict(cacheLagBackoff, func() error {
		var reader client.Reader = r.Client
		if r.APIReader != nil {
			reader = r.APIReader
		}
		fc, err := Find(ctx, reader, a.ClusterID)
		if err != nil || fc == nil {
			return err
		}
		if fc.Status.AuthServiceKeyFingerprint != pinnedKey || fc.Spec.ForeignAuthURL == a.AuthURL ||
			fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] == string(discoveryv1alpha1.ManualDiscovery) {
			return nil
		}
		patch := client.MergeFromWithOptions(fc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		fc.Spec.ForeignAuthURL = a.AuthURL
		return client.IgnoreNotFound(r.Client.Patch(ctx, fc, patch))
	})
}

// forget drops the write cache of a cluster, so that the next sighting is
// written at once (after the ForeignCluster was deleted, say).
func (r *Registry) forget(clusterID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.written {
		if strings.HasPrefix(k, clusterID+"/") {
			delete(r.written, k)
		}
	}
}

func (r *Registry) create(ctx context.Context, d Discovery) (*discoveryv1alpha1.ForeignCluster, error) {
	a := d.Sighting
	join := r.AutoJoin != nil && r.AutoJoin()
	if d.AutoJoin != nil {
		join = *d.AutoJoin
	}
	if r.Choices != nil {
		if remembered, ok, err := r.Choices.Get(ctx, a.ClusterID); err != nil {
			return nil, err
		} else if ok {
			join = remembered
		}
	}
	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{
			Name: a.ClusterID,
			Labels: map[string]string{
				discoveryv1alpha1.ClusterIDLabel:     a.ClusterID,
				discoveryv1alpha1.DiscoveryTypeLabel: string(d.Type),
			},
		},
		Spec: discoveryv1alpha1.ForeignClusterSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: a.ClusterID, ClusterName: a.ClusterName},
			Join:            join,
			ForeignAuthURL:  a.AuthURL,
			// The auth service's certificate is self-signed; what it hands
			// out (the cluster CA) is pinned on first use.
			InsecureSkipTLSVerify: ptr.To(true),
		},
	}
	if err := r.Client.Create(ctx, fc); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, apierrors.NewConflict(discoveryv1alpha1.GroupVersion.WithResource("foreignclusters").GroupResource(), fc.Name, err)
		}
		return nil, err
	}
	return fc, nil
}

func (r *Registry) updateSpec(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster, d Discovery) error {
	a := d.Sighting
	orig := fc.DeepCopy()
	// The URL follows the most explicit way the cluster was found: a LAN
	// sighting cannot move a cluster found through DNS, and a cluster
	// inserted by hand keeps the URL the operator gave it.
	recorded := discoveryv1alpha1.DiscoveryType(fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel])
	if recorded == discoveryv1alpha1.WanDiscovery && d.Type == discoveryv1alpha1.LanDiscovery && unlistedByDNS(fc) {
		// Found through DNS once, but no domain lists it any more: only
		// the LAN knows of it now, and the label says so (a LAN sighting
		// may move it again, once the new address proves to be it).
		recorded = discoveryv1alpha1.LanDiscovery
		fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] = string(recorded)
	}
	if recorded != discoveryv1alpha1.ManualDiscovery && typeRank[d.Type] >= typeRank[recorded] && fc.Spec.ForeignAuthURL != a.AuthURL {
		if err := r.verifyMove(ctx, fc, a); err != nil {
			return err
		}
		fc.Spec.ForeignAuthURL = a.AuthURL
	}
	// Once the auth service's key is pinned, the name comes from its answer
	// (the reconciler): anyone can announce a known ClusterID at its
	// address under another name.
	if a.ClusterName != "" && fc.Spec.ClusterIdentity.ClusterName != a.ClusterName && fc.Status.AuthServiceKeyFingerprint == "" {
		fc.Spec.ClusterIdentity.ClusterName = a.ClusterName
	}
	if typeRank[d.Type] > typeRank[discoveryv1alpha1.DiscoveryType(fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel])] {
		if fc.Labels == nil {
			fc.Labels = map[string]string{}
		}
		fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] = string(d.Type)
	}
	if equalForeignCluster(orig, fc) {
		return nil
	}
	return r.Client.Patch(ctx, fc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// unlistedByDNS reports whether fc has sources and none of them is a DNS
// domain (each SearchDomain withdraws itself when it stops listing the
// cluster). Without sources it was just created, before its first source
// was recorded.
func unlistedByDNS(fc *discoveryv1alpha1.ForeignCluster) bool {
	for _, s := range fc.Status.Sources {
		if s.Type == discoveryv1alpha1.WanDiscovery {
			return false
		}
	}
	return len(fc.Status.Sources) > 0
}

func equalForeignCluster(a, b *discoveryv1alpha1.ForeignCluster) bool {
	return a.Spec.ForeignAuthURL == b.Spec.ForeignAuthURL &&
		a.Spec.ClusterIdentity == b.Spec.ClusterIdentity &&
		a.Labels[discoveryv1alpha1.DiscoveryTypeLabel] == b.Labels[discoveryv1alpha1.DiscoveryTypeLabel]
}

func (r *Registry) markSeen(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster, d Discovery, now time.Time) error {
	orig := fc.DeepCopy()
	seen := metav1.NewTime(now)
	found := false
	for i := range fc.Status.Sources {
		if fc.Status.Sources[i].Name == d.Source {
			fc.Status.Sources[i].LastSeen, fc.Status.Sources[i].MissedChecks, fc.Status.Sources[i].Type = seen, 0, d.Type
			found = true
		}
	}
	if !found {
		fc.Status.Sources = append(fc.Status.Sources, discoveryv1alpha1.DiscoverySource{Name: d.Source, Type: d.Type, LastSeen: seen})
	}
	fc.Status.LastSeen = &seen
	meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{
		Type: discoveryv1alpha1.ConditionDiscovered, Status: metav1.ConditionTrue, Reason: "Announced",
		Message: fmt.Sprintf("Announced through %s", d.Source), ObservedGeneration: fc.Generation,
	})
	if c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionReachable); c != nil && c.Reason == reasonNoLongerAnnounced {
		meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{
			Type: discoveryv1alpha1.ConditionReachable, Status: metav1.ConditionTrue, Reason: "Announced",
			Message: fmt.Sprintf("Announced again through %s", d.Source), ObservedGeneration: fc.Generation,
		})
	}
	return r.Client.Status().Patch(ctx, fc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// Withdrawn records that a source no longer lists a cluster (a DNS record
// removed): the source is dropped at once, and a discovered cluster nobody
// lists any more and that is not joined is deleted.
func (r *Registry) Withdrawn(ctx context.Context, clusterID, source string) error {
	r.forget(clusterID)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fc, err := Find(ctx, r.Client, clusterID)
		if err != nil || fc == nil {
			return err
		}
		orig := fc.DeepCopy()
		kept := fc.Status.Sources[:0]
		for _, s := range fc.Status.Sources {
			if s.Name != source {
				kept = append(kept, s)
			}
		}
		if len(kept) == len(orig.Status.Sources) {
			return nil
		}
		fc.Status.Sources = kept
		if err := r.Client.Status().Patch(ctx, fc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		return deleteIfForgotten(ctx, r.Client, fc)
	})
}

// deleteIfForgotten deletes a ForeignCluster that only discovery knew of,
// that no source sees any more, and that the operator did not join.
func deleteIfForgotten(ctx context.Context, c client.Client, fc *discoveryv1alpha1.ForeignCluster) error {
	if len(fc.Status.Sources) > 0 || fc.Spec.Join || !discoveredOnly(fc) {
		return nil
	}
	err := c.Delete(ctx, fc, client.Preconditions{UID: &fc.UID, ResourceVersion: &fc.ResourceVersion})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if apierrors.IsConflict(err) {
		return err // retried with a fresh copy
	}
	if err != nil {
		return fmt.Errorf("deleting ForeignCluster %s: %w", fc.Name, err)
	}
	return nil
}

// discoveredOnly reports whether only LAN or WAN discovery knows of fc.
func discoveredOnly(fc *discoveryv1alpha1.ForeignCluster) bool {
	return discoveredType(fc) && !fc.Status.IncomingPeering
}

// discoveredType reports whether LAN or WAN discovery found fc first.
func discoveredType(fc *discoveryv1alpha1.ForeignCluster) bool {
	t := discoveryv1alpha1.DiscoveryType(fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel])
	return t == discoveryv1alpha1.LanDiscovery || t == discoveryv1alpha1.WanDiscovery
}
