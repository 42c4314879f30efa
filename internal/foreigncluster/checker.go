// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package foreigncluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
)

// CheckPolicy is the liveness policy in force, read at every check.
type CheckPolicy struct {
	// Interval between checks.
	Interval time.Duration
	// MaxMissed consecutive misses make a source forget the cluster (and a
	// cluster with no source left go, unless joined or inserted by hand).
	MaxMissed int32
}

// Checker checks every ForeignCluster once per interval. A discovered
// cluster misses a check when none of its discovery sources saw it during
// the interval; one inserted by hand, or known from an incoming peering,
// misses when its auth service does not answer. It implements
// manager.Runnable.
type Checker struct {
	// Client reads and writes ForeignClusters.
	Client client.Client
	// APIReader, if set, reads a ForeignCluster again from the API server
	// when writing its status met another writer's change.
	APIReader client.Reader
	// Policy returns the policy in force (from the ClusterConfig).
	Policy func() CheckPolicy
	// GetIdentity asks a remote auth service; injectable for tests.
	GetIdentity func(ctx context.Context, url string, o auth.ClientOptions) (*auth.Response, error)
	// Clock is injectable for tests.
	Clock clock.WithTicker
}

// Start checks until ctx ends.
func (c *Checker) Start(ctx context.Context) error {
	if c.Client == nil || c.Policy == nil {
		return errors.New("foreigncluster.Checker needs Client and Policy")
	}
	if c.GetIdentity == nil {
		c.GetIdentity = auth.GetIdentity
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	log := ctrl.LoggerFrom(ctx).WithName("foreigncluster-checker")
	// Wake every second, so that a new interval takes effect at once.
	tick := c.Clock.NewTicker(time.Second)
	defer tick.Stop()
	last := c.Clock.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
		}
		p := c.Policy()
		if c.Clock.Since(last) < p.Interval {
			continue
		}
		last = c.Clock.Now()
		if err := c.CheckAll(ctx, p); err != nil {
			log.Error(err, "Health check round failed")
		}
	}
}

// CheckAll runs one round of checks.
func (c *Checker) CheckAll(ctx context.Context, p CheckPolicy) error {
	var list discoveryv1alpha1.ForeignClusterList
	if err := c.Client.List(ctx, &list); err != nil {
		return fmt.Errorf("listing ForeignClusters: %w", err)
	}
	var errs []error
	for i := range list.Items {
		if err := c.check(ctx, &list.Items[i], p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Checker) check(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster, p CheckPolicy) error {
	now := c.Clock.Now()
	if discoveredOnly(fc) || len(fc.Status.Sources) > 0 {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
				return client.IgnoreNotFound(err)
			}
			return c.checkSources(ctx, fc, p, now)
		})
	}
	if fc.Spec.ForeignAuthURL == "" {
		return nil
	}
	resp, err := c.GetIdentity(ctx, fc.Spec.ForeignAuthURL, auth.ClientOptions{
		InsecureSkipVerify: fc.Spec.InsecureSkipTLSVerify != nil && *fc.Spec.InsecureSkipTLSVerify,
		PinnedKey:          fc.Status.AuthServiceKeyFingerprint, // another key is no sign of life
		Timeout:            min(p.Interval, 5*time.Second),
	})
	if err == nil && fc.Spec.ClusterIdentity.ClusterID != "" && resp.Identity.ClusterID != fc.Spec.ClusterIdentity.ClusterID {
		// Someone answers, but not the cluster expected: the reconciler
		// reports the mismatch; this is no sign of life.
		err = fmt.Errorf("the auth service answers for cluster %s", resp.Identity.ClusterID)
	}
	orig := fc.DeepCopy()
	if err == nil {
		seen := metav1.NewTime(now)
		fc.Status.LastSeen, fc.Status.MissedHealthChecks = &seen, 0
		setCondition(fc, discoveryv1alpha1.ConditionReachable, metav1.ConditionTrue, "AuthServiceAnswered", "The auth service answered the last health check")
	} else {
		fc.Status.MissedHealthChecks++
		if fc.Status.MissedHealthChecks >= p.MaxMissed {
			setCondition(fc, discoveryv1alpha1.ConditionReachable, metav1.ConditionFalse, "HealthChecksMissed",
				fmt.Sprintf("%d consecutive health checks failed; last error: %v", fc.Status.MissedHealthChecks, err))
		}
	}
	return client.IgnoreNotFound(PatchStatus(ctx, c.Client, c.APIReader, orig, fc))
}

// checkSources ages the discovery sources of fc: a source that did not see
// the cluster for a whole interval misses a check, and is dropped after
// MaxMissed. A discovered cluster left with no source goes, unless joined.
func (c *Checker) checkSources(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster, p CheckPolicy, now time.Time) error {
	orig := fc.DeepCopy()
	kept := fc.Status.Sources[:0]
	for _, s := range fc.Status.Sources {
		// LastSeen is stored with one-second precision.
		if now.Sub(s.LastSeen.Time) > p.Interval+time.Second {
			s.MissedChecks++
		}
		if s.MissedChecks < p.MaxMissed {
			kept = append(kept, s)
		}
	}
	fc.Status.Sources = kept
	// A ForeignCluster just created by discovery has no source yet: its
	// first sighting is being written. Its creation counts as one.
	young := now.Sub(fc.CreationTimestamp.Time) <= time.Duration(p.MaxMissed)*p.Interval+time.Second
	if len(kept) == 0 && discoveredOnly(fc) && !young {
		if !fc.Spec.Join {
			return deleteIfForgotten(ctx, c.Client, fc)
		}
		setCondition(fc, discoveryv1alpha1.ConditionReachable, metav1.ConditionFalse, reasonNoLongerAnnounced,
			fmt.Sprintf("Not announced for %d health checks; kept because it is joined", p.MaxMissed))
	}
	if slices.Equal(orig.Status.Sources, fc.Status.Sources) && equalConditions(orig, fc) {
		return nil
	}
	return client.IgnoreNotFound(c.Client.Status().Patch(ctx, fc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}

func equalConditions(a, b *discoveryv1alpha1.ForeignCluster) bool {
	if len(a.Status.Conditions) != len(b.Status.Conditions) {
		return false
	}
	for i := range a.Status.Conditions {
		x, y := a.Status.Conditions[i], b.Status.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message {
			return false
		}
	}
	return true
}

// reasonNoLongerAnnounced marks a joined cluster that discovery lost.
const reasonNoLongerAnnounced = "NoLongerAnnounced"

// NeedLeaderElection is true: one replica checks.
func (c *Checker) NeedLeaderElection() bool { return true }
