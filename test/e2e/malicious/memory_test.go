// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/offloading"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// chartMemoryLimitMiB is the controller manager's memory limit in the
// chart (values.yaml, resources.limits.memory).
const chartMemoryLimitMiB = 512

// TestPeerCannotGrowOurMemory: a consumer storing large Secrets in the
// namespaces a provider made for it (with its virtual kubelet's identity,
// as far as the quota lets it), and a provider labelling large Secrets
// for its consumer in its own cluster, grow neither side's controller
// manager: the provider caches nothing of what the consumer stores, the
// consumer keeps of what stands for nothing of its own the name alone.
// LIQO_E2E_MEMORY_SECRETS sets how many Secrets of 1 MiB each side makes
// (200 by default; docs/security.md gives the figure for 1000).
func TestPeerCannotGrowOurMemory(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	n := 200
	if v := os.Getenv("LIQO_E2E_MEMORY_SECRETS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("LIQO_E2E_MEMORY_SECRETS=%q is not a count", v)
		}
	}
	// Room for them, whatever share of it the other namespaces of the
	// consumer hold.
	framework.SetClusterConfig(t, b, func(spec *configv1alpha1.ClusterConfigSpec) {
		spec.SharingConfig.ConsumerQuota.Secrets = ptr.To(int64(20 * n))
	})
	t.Cleanup(func() {
		framework.SetClusterConfig(t, b, func(spec *configv1alpha1.ClusterConfigSpec) { spec.SharingConfig.ConsumerQuota.Secrets = nil })
	})
	remoteNS := remoteNamespaceOf(t, offload(t, "hoarder", offloadingv1alpha1.NamespaceOffloadingSpec{}, 2), b.ClusterID)
	payload := bytes.Repeat([]byte("x"), 1<<20-1024)

	// hoard writes n Secrets of 1 MiB into remoteNS, labelled for a, as
	// cl, each kept until the test ends (a finalizer, when keep), waits
	// until settled says what was written was seen, and measures m's
	// controller manager before and after.
	hoard := func(t *testing.T, cl client.Client, prefix string, keep bool, m *playground.Member, settled func()) (before, after float64) {
		t.Helper()
		before = controllerManagerMiB(t, m)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		sem := make(chan struct{}, 8)
		for i := range n {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				s := labelled(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: fmt.Sprintf("%s-%d", prefix, i)},
					Data: map[string][]byte{"blob": payload}}, a)
				if keep {
					s.Finalizers = []string{"liqo.test/keep"}
				}
				// Writers by the hundred conflict on the namespace's quota.
				if err := retry.OnError(retry.DefaultBackoff, apierrors.IsConflict, func() error { return cl.Create(ctx, s.DeepCopy()) }); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("storing a Secret of 1 MiB: %v", err)
		}
		// Removed by 8 writers, each error reported: one by one, 200
		// patches outlasted the cleanup's bound in CI, and a finalizer
		// left held the namespace Terminating.
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			inB := framework.Client(t, b)
			var wg sync.WaitGroup
			sem := make(chan struct{}, 8)
			for i := range n {
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: fmt.Sprintf("%s-%d", prefix, i)}}
					err := retry.OnError(retry.DefaultBackoff, func(err error) bool { return !apierrors.IsNotFound(err) }, func() error {
						if keep {
							if err := inB.Patch(ctx, s, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
								return err
							}
						}
						return inB.Delete(ctx, s)
					})
					if client.IgnoreNotFound(err) != nil {
						t.Errorf("cleanup: removing Secret %s/%s: %v", s.Namespace, s.Name, err)
					}
				})
			}
			wg.Wait()
		})
		settled()
		after = controllerManagerMiB(t, m)
		t.Logf("%s's controller manager: %.0f MiB before %d Secrets of 1 MiB, %.0f MiB after", m.Name, before, n, after)
		return before, after
	}
	check := func(t *testing.T, m *playground.Member, before, after float64) {
		t.Helper()
		if grew := after - before; grew > float64(n)/4 || after > chartMemoryLimitMiB {
			t.Errorf("%s's controller manager grew by %.0f MiB to %.0f MiB with %d MiB stored by a peer (the chart's limit is %d MiB)",
				m.Name, grew, after, n, chartMemoryLimitMiB)
		}
	}
	t.Run("what a consumer stores in the provider", func(t *testing.T) {
		// A hostile consumer keeps what it stores: its controller manager
		// is stopped, so that no reflector removes the Secrets as orphans.
		framework.StopControllerManager(t, a)
		vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))
		before, after := hoard(t, vk, "consumer-hoard", false, b, func() {
			// Counted by b's quota: b's own watches have them too, if
			// they were watched. The quota controller may recount from a
			// cache a Secret behind and write one fewer than admission
			// counted (seen under load in CI); it recounts again at its
			// full resync, every 5 minutes by default.
			framework.Eventually(t, 6*time.Minute, func() error {
				var q corev1.ResourceQuota
				if err := framework.Client(t, b).Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: offloading.OfferQuotaName}, &q); err != nil {
					return err
				}
				if used := q.Status.Used[corev1.ResourceSecrets]; used.Value() < int64(n) {
					return fmt.Errorf("%s Secrets counted in %s, want %d", used.String(), remoteNS, n)
				}
				return nil
			})
		})
		check(t, b, before, after)
	})
	t.Run("what a provider labels for its consumer", func(t *testing.T) {
		// The provider keeps them, whatever the consumer removes.
		before, after := hoard(t, framework.Client(t, b), "provider-hoard", true, a, func() {
			requireReady(t, waitHeartbeats(t, a, b.ClusterID, 2))
		})
		check(t, a, before, after)
	})
	requireReady(t, waitHeartbeats(t, a, c.ClusterID, 1))
}

// controllerManagerMiB is the resident memory of m's controller manager.
func controllerManagerMiB(t *testing.T, m *playground.Member) float64 {
	t.Helper()
	for _, p := range m.Processes() {
		if p.Name == playground.ControllerManager {
			return framework.ResidentMiB(t, p.PID)
		}
	}
	t.Fatalf("no controller manager process in %s", m.Name)
	return 0
}
