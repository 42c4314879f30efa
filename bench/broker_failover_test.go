// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// BenchmarkBrokerFailover times the broker's failover on real clusters:
// a consumer runs a Deployment through the broker, whose policy uses two
// of three providers; the API server of the chosen provider running most
// of the pods stops, and the time is taken until all the consumer's pods
// are Running again, as the consumer sees them, none of them on the
// stopped provider. The provider then starts again, and the broker's
// leftovers there must go before the next run, which stops another
// provider in use. LIQO_BENCH_FAILOVER_RUNS runs (5 by default) give the
// p50 and the worst. The physical baseline, in the same run: the
// failover time the operator sets (--failover-after, 20 s), which the
// broker must wait by design, plus the time the same pods take to start
// through the broker on healthy providers; the ratio is p50 against it.
// The goal of the issue: Running elsewhere within 60 s. b.N is not
// used: each call makes LIQO_BENCH_FAILOVER_RUNS runs.
func BenchmarkBrokerFailover(b *testing.B) {
	runs := failoverRuns(b)
	const pods = 6
	p := startBrokerPlayground(b, 4, 1, func(spec *configv1alpha1.ClusterConfigSpec) { spec.PeeringConfig.ReconcilePeriodSeconds = 3 })
	consumer, providers, brk := p.Members[0], p.Members[1:], p.Broker
	for _, pr := range providers {
		framework.AddWithToken(b, brk, pr)
	}
	framework.WaitVirtualNodesReady(b, brk, providers...)
	framework.AddWithToken(b, consumer, brk)
	framework.WaitVirtualNodesReady(b, consumer, brk)
	ctx := context.Background()
	bc, cc := framework.Client(b, brk), framework.Client(b, consumer)

	// Two providers, by latency; one in use stays in use for an hour, so
	// that a provider back does not move the pods again.
	key := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer.ClusterID), Name: brokerv1alpha1.SelectionName}
	framework.Eventually(b, time.Minute, func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var sel brokerv1alpha1.Selection
			if err := bc.Get(ctx, key, &sel); err != nil {
				return err
			}
			sel.Spec.Policy = &brokerv1alpha1.Policy{Count: 2, Weights: brokerv1alpha1.Weights{Latency: 10}, StableFor: &metav1.Duration{Duration: time.Hour}}
			return bc.Update(ctx, &sel)
		})
	})
	chosen := func() ([]string, error) {
		var sel brokerv1alpha1.Selection
		if err := bc.Get(ctx, key, &sel); err != nil {
			return nil, err
		}
		d := sel.Status.Decision
		if d == nil || sel.Status.ObservedGeneration != sel.Generation || len(d.Chosen) != 2 {
			return nil, fmt.Errorf("no decision for two providers yet (%+v)", d)
		}
		return d.Chosen, nil
	}
	framework.Eventually(b, time.Minute, func() error { _, err := chosen(); return err })

	vnodes := map[string]string{} // provider -> its virtual node in the broker
	byID := map[string]*playground.Member{}
	clients := map[string]client.Client{} // made once: the polls below must not load the clusters they time
	for _, pr := range providers {
		clients[pr.ClusterID] = framework.Client(b, pr)
		n, err := framework.VirtualNode(bc, pr.ClusterID)
		if err != nil {
			b.Fatal(err)
		}
		vnodes[pr.ClusterID], byID[pr.ClusterID] = n.Name, pr
	}
	// where counts the consumer's pods Running in the broker, by
	// provider, and those not Running.
	where := func() (map[string]int, int, error) {
		var list corev1.PodList
		if err := bc.List(ctx, &list, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}); err != nil {
			return nil, 0, err
		}
		running, other := map[string]int{}, 0
		for _, pod := range list.Items {
			if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
				other++
				continue
			}
			for id, n := range vnodes {
				if n == pod.Spec.NodeName {
					running[id]++
				}
			}
		}
		return running, other, nil
	}
	// consumerRunning: the consumer sees all its pods Running, no more.
	const ns = "failover"
	consumerRunning := func() error { return framework.AllRunning(ctx, cc, ns, pods) }

	if err := cc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	offloadNamespace(b, cc, ns, offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote,
		ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{brk.ClusterID}},
		}}}}})
	labels := map[string]string{"app": "failover"}
	created := time.Now()
	if err := cc.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](pods), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}},
	}}); err != nil {
		b.Fatal(err)
	}
	framework.Eventually(b, 2*time.Minute, consumerRunning)
	fresh := time.Since(created)
	baseline := broker.DefaultFailoverAfter + fresh

	var took, leftovers []time.Duration
	for run := range runs {
		in, err := chosen()
		if err != nil {
			b.Fatal(err)
		}
		before, _, err := where()
		if err != nil {
			b.Fatal(err)
		}
		victim := in[0]
		if before[in[1]] > before[victim] {
			victim = in[1]
		}
		stopped := time.Now()
		restart := framework.StopAPIServer(b, byID[victim])
		// The phases, each as first seen: the decision without the
		// victim; none of the consumer's pods left on its virtual node;
		// all bound to another; all Running in the broker; then all
		// Running as the consumer sees them, none twice.
		var decided, evicted, bound, brokerRunning time.Duration
		since := func(d *time.Duration) {
			if *d == 0 {
				*d = time.Since(stopped)
			}
		}
		framework.Eventually(b, 3*time.Minute, func() error {
			if in, err := chosen(); err == nil && !slices.Contains(in, victim) {
				since(&decided)
			}
			var list corev1.PodList
			if err := bc.List(ctx, &list, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}); err != nil {
				return err
			}
			onVictim, elsewhere, running := 0, 0, 0
			for _, pod := range list.Items {
				switch {
				case pod.Spec.NodeName == vnodes[victim]:
					onVictim++
				case pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil:
					elsewhere++
					if pod.Status.Phase == corev1.PodRunning {
						running++
					}
				}
			}
			if onVictim != 0 {
				return fmt.Errorf("%d of the consumer's pods still on %s's virtual node", onVictim, byID[victim].Name)
			}
			since(&evicted)
			if elsewhere != pods || len(list.Items) != pods {
				return fmt.Errorf("%d of the consumer's pods in the broker, %d bound to a provider answering, want %d", len(list.Items), elsewhere, pods)
			}
			since(&bound)
			if running != pods {
				return fmt.Errorf("%d of the consumer's pods Running in the broker, want %d", running, pods)
			}
			since(&brokerRunning)
			if err := consumerRunning(); err != nil {
				return err
			}
			// None twice: the providers that answer run each once.
			total := 0
			for _, pr := range providers {
				if pr.ClusterID == victim {
					continue
				}
				n, err := framework.PodsFor(ctx, clients[pr.ClusterID], brk.ClusterID)
				if err != nil {
					return err
				}
				total += n
			}
			if total != pods {
				return fmt.Errorf("the providers that answer run %d of the broker's pods, want %d", total, pods)
			}
			return nil
		})
		took = append(took, time.Since(stopped))
		restarted := time.Now()
		restart()
		framework.Eventually(b, 3*time.Minute, func() error {
			n, err := framework.PodsFor(ctx, clients[victim], brk.ClusterID)
			if err != nil {
				return err
			}
			if n != 0 {
				return fmt.Errorf("%s still runs %d of the broker's pods", byID[victim].Name, n)
			}
			_, err = chosen()
			return err
		})
		leftovers = append(leftovers, time.Since(restarted))
		r := func(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
		b.Logf("run %d: %d pods off %s Running elsewhere %s after its API server stopped (decided at %s, off its virtual node at %s, all bound elsewhere at %s, Running in the broker at %s); the broker's leftovers there gone %s after it started again",
			run+1, before[victim], byID[victim].Name, r(took[run]), r(decided), r(evicted), r(bound), r(brokerRunning), r(leftovers[run]))
	}
	slices.Sort(took)
	p50, worst := took[len(took)/2], took[len(took)-1]
	ratio := p50.Seconds() / baseline.Seconds()
	b.ReportMetric(p50.Seconds(), "s-failover-p50")
	b.ReportMetric(worst.Seconds(), "s-failover-worst")
	b.ReportMetric(ratio, "ratio")
	b.Logf("failover over %d runs: p50 %s, worst %s (goal 60 s); baseline %s (failover after %s, then %d pods started afresh through the broker in %s): ratio %.2f",
		runs, p50.Round(100*time.Millisecond), worst.Round(100*time.Millisecond), baseline.Round(100*time.Millisecond),
		broker.DefaultFailoverAfter, pods, fresh.Round(100*time.Millisecond), ratio)
}

// failoverRuns reads LIQO_BENCH_FAILOVER_RUNS: 5 by default.
func failoverRuns(b *testing.B) int {
	b.Helper()
	env := os.Getenv("LIQO_BENCH_FAILOVER_RUNS")
	if env == "" {
		return 5
	}
	n, err := strconv.Atoi(env)
	if err != nil || n < 1 {
		b.Fatalf("LIQO_BENCH_FAILOVER_RUNS=%q: not a number of runs of 1 or more", env)
	}
	return n
}
