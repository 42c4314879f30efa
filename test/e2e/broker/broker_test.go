// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package broker_test runs the broker's catalog and orchestrator on real
// clusters: cluster-1 consumes through the broker, cluster-2 and
// cluster-3 provide to it (cluster-2 also consumes it, the second
// consumer), and the playground's broker cluster runs Liqo and
// liqo-broker as the chart installs them.
package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/broker"
	ctlbroker "github.com/liqo-go/liqo/internal/ctl/broker"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/peering"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/internal/sharing"
	virtualnode "github.com/liqo-go/liqo/internal/virtualkubelet/node"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

var suite *framework.Suite

// ns is the consumer's namespace the test offloads to the broker.
const ns = "orchestrated"

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, framework.Options{
		Clusters: 3,
		// Room for the 100 pods of the test on either provider, through
		// the broker: every cluster offers all it has.
		NodesPerCluster: 2,
		Broker:          []string{"catalog", "orchestrator"},
		ClusterConfig: func(_ string, spec *configv1alpha1.ClusterConfigSpec) {
			spec.SharingConfig.SharePercentage = 100
			spec.DiscoveryConfig.EnableDiscovery = ptr.To(false)
			spec.DiscoveryConfig.EnableAdvertisement = ptr.To(false)
			spec.PeeringConfig.ReconcilePeriodSeconds = 3
		},
	}, &suite))
}

// get asks the broker's API, with token when set; in a cleanup too (the
// test's context is canceled then).
func get(t *testing.T, method, path, token string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, suite.Broker.BrokerURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// catalog returns the v1 catalog, by ClusterID.
func catalog(t *testing.T) map[string]broker.Cluster {
	t.Helper()
	code, body := get(t, http.MethodGet, "/api/v1/clusters", "")
	var list broker.ClusterList
	if code != http.StatusOK || json.Unmarshal(body, &list) != nil {
		t.Fatalf("GET /api/v1/clusters: %d %s", code, body)
	}
	out := map[string]broker.Cluster{}
	for _, c := range list.Items {
		out[c.ClusterID] = c
	}
	return out
}

// accepted says whether m's peering towards id is accepted.
func accepted(t *testing.T, m *playground.Member, id string) bool {
	t.Helper()
	var fc discoveryv1alpha1.ForeignCluster
	if err := framework.Client(t, m).Get(t.Context(), client.ObjectKey{Name: id}, &fc); err != nil {
		return false
	}
	c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == discoveryv1alpha1.ReasonAccepted
}

// followCatalog watches, every 50 ms for at most a minute, when the
// broker's peering towards p becomes want and when the catalog shows p
// as a provider (or not): it returns how long the catalog lagged.
func followCatalog(t *testing.T, p *playground.Member, want bool) time.Duration {
	t.Helper()
	var peered, listed time.Time
	deadline := time.Now().Add(time.Minute)
	for (peered.IsZero() || listed.IsZero()) && time.Now().Before(deadline) {
		now := time.Now()
		if peered.IsZero() && accepted(t, suite.Broker, p.ClusterID) == want {
			peered = now
		}
		if c, ok := catalog(t)[p.ClusterID]; listed.IsZero() && (ok && c.Provider) == want {
			listed = now
		}
		time.Sleep(50 * time.Millisecond)
	}
	if peered.IsZero() || listed.IsZero() {
		t.Fatalf("%s: peering accepted %v at %v, in the catalog as a provider %v at %v", p.Name, want, peered, want, listed)
	}
	return max(listed.Sub(peered), 0)
}

// consumerToken is what `liqoctl broker login` prints on the consumer:
// a token of the service account the broker keeps for it in its tenant
// namespace, requested with the consumer cluster's own identity.
func consumerToken(t *testing.T, consumer *playground.Member) string {
	t.Helper()
	o := &ctlbroker.Options{Kubeconfig: consumer.Kubeconfig, Namespace: install.DefaultNamespace, Broker: suite.Broker.ClusterID,
		TTL: time.Hour, Timeout: 10 * time.Second}
	var token string
	framework.Eventually(t, 30*time.Second, func() error {
		var err error
		token, err = o.Login(t.Context())
		return err
	})
	return token
}

// toggle enables or disables provider for the token's consumer.
func toggle(t *testing.T, token string, provider *playground.Member, enable bool) {
	t.Helper()
	code, body := get(t, http.MethodPost, fmt.Sprintf("/api/toggle?id=%s&enable=%v", provider.ClusterID, enable), token)
	if code != http.StatusOK {
		t.Fatalf("toggling %s to %v: %d %s", provider.Name, enable, code, body)
	}
}

// placement is where the broker runs the pods of the namespace it made
// for the consumer's ns: by virtual node, and how many run on its own
// nodes.
func placement(t *testing.T, consumer *playground.Member) (byNode map[string]int, names []string) {
	t.Helper()
	var list corev1.PodList
	if err := framework.Client(t, suite.Broker).List(t.Context(), &list, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}); err != nil {
		t.Fatal(err)
	}
	byNode = map[string]int{}
	for _, p := range list.Items {
		if !strings.HasPrefix(p.Namespace, ns+"-") || p.DeletionTimestamp != nil {
			continue
		}
		byNode[p.Spec.NodeName]++
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return byNode, names
}

// providerPods counts the pods a provider runs for the broker.
func providerPods(t *testing.T, p *playground.Member) int {
	t.Helper()
	var list corev1.PodList
	if err := framework.Client(t, p).List(t.Context(), &list, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: suite.Broker.ClusterID}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, pod := range list.Items {
		if pod.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// consumerPods returns the names and UIDs of the consumer's Running pods
// of ns.
func consumerPods(t *testing.T, consumer *playground.Member) map[string]string {
	t.Helper()
	var list corev1.PodList
	if err := framework.Client(t, consumer).List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out[p.Name] = string(p.UID)
		}
	}
	return out
}

// TestBroker runs, in order: providers peering with the broker and
// leaving its catalog; consumers offloading to the broker; a 100-pod
// Deployment orchestrated over the consumer's enabled provider only;
// kubectl logs and exec, and the consumer's objects, through both hops;
// a toggle moving every pod to the other provider, none lost, none
// duplicated; the selection and the placement surviving a restart of
// liqo-broker; the consumer's PodDisruptionBudget holding, then bounding,
// a toggle's moves; a consumer peering with a provider from the catalog. The
// attacks by consumers and providers are in test/e2e/malicious/broker.
func TestBroker(t *testing.T) {
	consumer, p1, p2 := suite.Members[0], suite.Members[1], suite.Members[2]
	b := suite.Broker
	framework.LogOnFailure(t, consumer, p1, p2, b)
	ctx := t.Context()

	t.Run("a provider appears in the catalog within 5 s of peering", func(t *testing.T) {
		for _, p := range []*playground.Member{p1, p2} {
			done := make(chan time.Duration, 1)
			go func() { done <- followCatalog(t, p, true) }()
			framework.AddWithToken(t, b, p)
			if lag := <-done; lag > 5*time.Second {
				t.Errorf("%s listed %s after its peering was accepted, want within 5 s", p.Name, lag)
			} else {
				t.Logf("%s listed %s after its peering was accepted", p.Name, lag.Round(time.Millisecond))
			}
		}
		framework.WaitVirtualNodesReady(t, b, p1, p2)
	})

	if t.Failed() {
		return
	}
	// The consumer offloads a namespace to the broker alone; cleanup
	// removes it when the whole test ends.
	const replicas = 100
	framework.AddWithToken(t, consumer, b)
	framework.AddWithToken(t, p1, b) // the second consumer
	framework.WaitVirtualNodesReady(t, consumer, b)
	one := consumerToken(t, consumer)
	toggle(t, one, p1, true)
	framework.Offload(t, consumer, []*playground.Member{b}, ns, offloadingv1alpha1.NamespaceOffloadingSpec{
		PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote,
		ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{b.ClusterID}},
		}}}},
	}, 1)

	t.Run("the consumer's pods run only on its enabled provider", func(t *testing.T) {
		labels := map[string]string{"app": "web"}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "web", Image: "pause", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
			}}}},
		}}
		if err := framework.Client(t, consumer).Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		vnode1, err := framework.VirtualNode(framework.Client(t, b), p1.ClusterID)
		if err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 3*time.Minute, func() error {
			if got := len(consumerPods(t, consumer)); got != replicas {
				return fmt.Errorf("%d of the consumer's pods Running, want %d", got, replicas)
			}
			byNode, _ := placement(t, consumer)
			if byNode[vnode1.Name] != replicas || len(byNode) != 1 {
				return fmt.Errorf("the broker runs the consumer's pods on %v, want all %d on %s", byNode, replicas, vnode1.Name)
			}
			if n1, n2 := providerPods(t, p1), providerPods(t, p2); n1 != replicas || n2 != 0 {
				return fmt.Errorf("%s runs %d pods for the broker and %s %d, want %d and 0", p1.Name, n1, p2.Name, n2, replicas)
			}
			return nil
		})
	})

	t.Run("kubectl logs, exec, attach and port-forward on the consumer reach the pod in its provider, through both hops", func(t *testing.T) {
		var pod string
		for name := range consumerPods(t, consumer) {
			pod = name
			break
		}
		out, err := framework.Kubectl(t, consumer, "", "--namespace", ns, "logs", pod)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) != localcluster.KwokLogLine(p1.Name) {
			t.Errorf("kubectl logs %s printed %q, want %q", pod, out, localcluster.KwokLogLine(p1.Name))
		}
		out, err = framework.Kubectl(t, consumer, "", "--namespace", ns, "exec", pod, "--", "printenv", localcluster.KwokExecClusterEnv)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) != p1.Name {
			t.Errorf("kubectl exec %s -- printenv %s printed %q, want %q", pod, localcluster.KwokExecClusterEnv, out, p1.Name)
		}
		framework.CheckAttach(t, consumer, ns, pod, p1)
		framework.CheckPortForward(t, consumer, ns, pod, 10<<20)
	})

	t.Run("the consumer's objects reach its provider through the broker", func(t *testing.T) {
		// The broker's cache leaves out what its consumers store there:
		// it reads their objects live to reflect them in turn.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: map[string]string{"mode": "brokered"}}
		if err := framework.Client(t, consumer).Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, func() error {
			var list corev1.ConfigMapList
			if err := framework.Client(t, p1).List(ctx, &list, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: b.ClusterID}); err != nil {
				return err
			}
			for _, c := range list.Items {
				if c.Name == cm.Name && strings.HasPrefix(c.Namespace, ns+"-") && c.Data["mode"] == "brokered" {
					return nil
				}
			}
			return fmt.Errorf("%s has no copy of the consumer's ConfigMap %s/%s from the broker", p1.Name, ns, cm.Name)
		})
	})

	t.Run("a toggle moves every pod, none lost, none duplicated", func(t *testing.T) {
		before := consumerPods(t, consumer)
		vnode2, err := framework.VirtualNode(framework.Client(t, b), p2.ClusterID)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		toggle(t, one, p2, true)
		toggle(t, one, p1, false)
		framework.Eventually(t, 3*time.Minute, func() error {
			byNode, names := placement(t, consumer)
			if byNode[vnode2.Name] != replicas || len(byNode) != 1 || len(names) != replicas || len(slices.Compact(names)) != replicas {
				return fmt.Errorf("the broker runs the consumer's pods on %v, want all %d on %s", byNode, replicas, vnode2.Name)
			}
			if n1, n2 := providerPods(t, p1), providerPods(t, p2); n1 != 0 || n2 != replicas {
				return fmt.Errorf("%s runs %d pods for the broker and %s %d, want 0 and %d", p1.Name, n1, p2.Name, n2, replicas)
			}
			if after := consumerPods(t, consumer); len(after) != replicas {
				return fmt.Errorf("%d of the consumer's pods Running, want %d", len(after), replicas)
			}
			return nil
		})
		t.Logf("toggle: %d pods moved in %s", replicas, time.Since(start).Round(100*time.Millisecond))
		if after := consumerPods(t, consumer); !equalMaps(before, after) {
			t.Errorf("the consumer's pods changed while moving: %d before, %d after, same names and UIDs: %v", len(before), len(after), equalMaps(before, after))
		}
	})

	t.Run("the selection survives a restart of the broker", func(t *testing.T) {
		if err := suite.RestartBroker(ctx); err != nil {
			t.Fatal(err)
		}
		code, body := get(t, http.MethodGet, "/api/v1/selection", one)
		var v broker.SelectionView
		if code != http.StatusOK || json.Unmarshal(body, &v) != nil || !slices.Equal(v.Providers, []string{p2.ClusterID}) {
			t.Fatalf("after a restart, the consumer's selection: %d %s", code, body)
		}
		framework.Eventually(t, 30*time.Second, func() error {
			var sel brokerv1alpha1.Selection
			if err := framework.Client(t, b).Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer.ClusterID), Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
				return err
			}
			if c := meta.FindStatusCondition(sel.Status.Conditions, broker.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("the selection's Ready: %+v", c)
			}
			if n := providerPods(t, p2); n != replicas {
				return fmt.Errorf("%s runs %d pods for the broker, want %d", p2.Name, n, replicas)
			}
			return nil
		})
	})

	t.Run("the consumer's PodDisruptionBudget bounds the moves of its pods", func(t *testing.T) {
		c := framework.Client(t, consumer)
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, MaxUnavailable: ptr.To(intstr.FromInt32(0)),
		}}
		if err := c.Create(ctx, pdb); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), pdb) })
		vnode1, err := framework.VirtualNode(framework.Client(t, b), p1.ClusterID)
		if err != nil {
			t.Fatal(err)
		}
		vnode2, err := framework.VirtualNode(framework.Client(t, b), p2.ClusterID)
		if err != nil {
			t.Fatal(err)
		}
		// The consumer's virtual kubelet copies it to the broker, as the
		// number of pods there that must stay healthy.
		copyKeeps := func(want int32) {
			t.Helper()
			framework.Eventually(t, time.Minute, func() error {
				got, err := brokerBudget(t, consumer)
				if err != nil {
					return err
				}
				if got.Spec.MinAvailable == nil || got.Spec.MinAvailable.IntVal != want || got.Status.ObservedGeneration != got.Generation {
					return fmt.Errorf("the broker's copy keeps %v (observed generation %d of %d), want %d", got.Spec.MinAvailable, got.Status.ObservedGeneration, got.Generation, want)
				}
				return nil
			})
		}
		copyKeeps(replicas)

		// No pod may go: the toggle's drain is held, and said so.
		toggle(t, one, p1, true)
		toggle(t, one, p2, false)
		framework.Eventually(t, time.Minute, func() error {
			code, body := get(t, http.MethodGet, "/api/v1/selection", one)
			var v broker.SelectionView
			if code != http.StatusOK || json.Unmarshal(body, &v) != nil {
				return fmt.Errorf("GET /api/v1/selection: %d %s", code, body)
			}
			for _, p := range v.Status.Providers {
				if p.ClusterID == p2.ClusterID && p.State == brokerv1alpha1.ProviderDraining && p.Held == replicas {
					return nil
				}
			}
			return fmt.Errorf("the selection's providers %+v, want %s draining with all %d pods held", v.Status.Providers, p2.Name, replicas)
		})
		if byNode, _ := placement(t, consumer); byNode[vnode2.Name] != replicas || len(byNode) != 1 || providerPods(t, p1) != 0 {
			t.Fatalf("pods moved while the budget allowed none: %v on the broker's virtual nodes, %d on %s", byNode, providerPods(t, p1), p1.Name)
		}

		// Ten at a time: they all move, and never fewer than 90 are
		// healthy in the broker.
		patch := client.MergeFrom(pdb.DeepCopy())
		pdb.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(10))
		if err := c.Patch(ctx, pdb, patch); err != nil {
			t.Fatal(err)
		}
		// Every change to the broker's pods is looked at, not a sample.
		least := followHealthy(t, consumer)
		framework.Eventually(t, 3*time.Minute, func() error {
			byNode, _ := placement(t, consumer)
			if byNode[vnode1.Name] != replicas || len(byNode) != 1 || providerPods(t, p1) != replicas {
				return fmt.Errorf("the broker runs the consumer's pods on %v, want all %d on %s", byNode, replicas, vnode1.Name)
			}
			if n := len(consumerPods(t, consumer)); n != replicas {
				return fmt.Errorf("%d of the consumer's pods Running, want %d", n, replicas)
			}
			return nil
		})
		lowest := least()
		t.Logf("with maxUnavailable 10, at least %d of the %d pods were healthy in the broker while they moved", lowest, replicas)
		if lowest < replicas-10 {
			t.Errorf("%d pods healthy in the broker at one point while they moved, want at least %d", lowest, replicas-10)
		}

		// Back to p2, without the budget, for the tests that follow.
		if err := c.Delete(ctx, pdb); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, func() error {
			if got, err := brokerBudget(t, consumer); err == nil {
				return fmt.Errorf("the broker's copy %s outlived the budget", got.Name)
			}
			return nil
		})
		toggle(t, one, p2, true)
		toggle(t, one, p1, false)
		framework.Eventually(t, 3*time.Minute, func() error {
			byNode, _ := placement(t, consumer)
			if byNode[vnode2.Name] != replicas || len(byNode) != 1 || providerPods(t, p2) != replicas {
				return fmt.Errorf("the broker runs the consumer's pods on %v, want all %d on %s", byNode, replicas, vnode2.Name)
			}
			return nil
		})
	})

	t.Run("a pod no one provider can take waits at the consumer, told the largest it can, while smaller pods run", func(t *testing.T) {
		largerThanAnyProvider(t, consumer)
	})

	t.Run("a consumer peers with a provider using only the catalog and the provider's policy", func(t *testing.T) {
		o := &ctlbroker.Options{Kubeconfig: consumer.Kubeconfig, Namespace: install.DefaultNamespace, Broker: b.ClusterID, URL: b.BrokerURL,
			TTL: time.Hour, Timeout: 30 * time.Second}
		var out strings.Builder
		// p2 accepts no introductions yet: its own policy refuses.
		if err := o.Peer(ctx, p2.ClusterID, time.Minute, &out); err == nil || !strings.Contains(err.Error(), "refused the introduction") {
			t.Fatalf("liqoctl broker peer before %s accepts the broker's introductions: %v, want refused\n%s", p2.Name, err, out.String())
		}
		framework.SetClusterConfig(t, p2, func(spec *configv1alpha1.ClusterConfigSpec) { spec.PeeringConfig.Introducers = []string{b.ClusterID} })
		t.Cleanup(func() {
			framework.SetJoin(t, consumer, p2.ClusterID, false)
			framework.SetClusterConfig(t, p2, func(spec *configv1alpha1.ClusterConfigSpec) { spec.PeeringConfig.Introducers = nil })
		})
		// The provider's answer reaches the broker at its next check.
		framework.Eventually(t, time.Minute, func() error {
			out.Reset()
			return o.Peer(ctx, p2.ClusterID, time.Minute, &out)
		})
		t.Logf("liqoctl broker peer %s:\n%s", p2.ClusterID, out.String())
		framework.Eventually(t, time.Minute, func() error {
			if !accepted(t, consumer, p2.ClusterID) {
				return fmt.Errorf("%s's peering with %s is not accepted yet", consumer.Name, p2.Name)
			}
			var secret corev1.Secret
			if err := framework.Client(t, p2).Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: peering.PeerSecretName(consumer.ClusterID)}, &secret); err != nil {
				return err
			}
			if by := secret.Annotations[discoveryv1alpha1.AuthenticatedByAnnotation]; by != auth.SignedByIntroduction {
				return fmt.Errorf("%s authenticated %s by %q, want %q", p2.Name, consumer.Name, by, auth.SignedByIntroduction)
			}
			return nil
		})

		// The introduction's token, in another consumer's hands (p1 is
		// the broker's second consumer), is worth nothing, and p1 cannot
		// read the first consumer's introduction from the broker.
		intro, err := o.Introduction(ctx, p2.ClusterID, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		exchange := func(clusterID string) error {
			_, err := auth.RequestIdentity(ctx, intro.AuthURL, intro.Token, &auth.IdentityRequest{ClusterID: clusterID, Namespace: install.DefaultNamespace, CACert: "x", CSR: "x"},
				auth.ClientOptions{InsecureSkipVerify: true, Timeout: 10 * time.Second})
			return err
		}
		if err := exchange(p1.ClusterID); err == nil || !strings.Contains(err.Error(), auth.ReasonWrongToken) {
			t.Errorf("%s exchanging the token introduced for %s: %v, want %s", p1.Name, consumer.Name, err, auth.ReasonWrongToken)
		}
		two := consumerToken(t, p1)
		path := "/api/v1/clusters/" + p2.ClusterID + "/introduction?consumer=" + consumer.ClusterID
		if code, body := get(t, http.MethodGet, path, two); code != http.StatusForbidden {
			t.Errorf("GET %s with the other consumer's token: %d %s, want 403", path, code, body)
		}
		if code, body := get(t, http.MethodPost, "/api/v1/clusters/"+p2.ClusterID+"/introduction", ""); code != http.StatusUnauthorized {
			t.Errorf("an anonymous introduction: %d %s, want 401", code, body)
		}

		// p2 stops accepting the broker's introductions: the token no
		// longer works, even for the consumer it was made for (its
		// request is refused at the MAC check, before any other one).
		framework.SetClusterConfig(t, p2, func(spec *configv1alpha1.ClusterConfigSpec) { spec.PeeringConfig.Introducers = nil })
		framework.Eventually(t, 30*time.Second, func() error {
			if err := exchange(consumer.ClusterID); err == nil || !strings.Contains(err.Error(), auth.ReasonWrongToken) {
				return fmt.Errorf("the consumer's token after %s revoked the broker: %w, want %s", p2.Name, err, auth.ReasonWrongToken)
			}
			return nil
		})
	})

	t.Run("a provider leaves the catalog within 5 s of unpeering", func(t *testing.T) {
		// p1 serves no consumer now; the broker stops consuming it.
		done := make(chan time.Duration, 1)
		go func() { done <- followCatalog(t, p1, false) }()
		framework.SetJoin(t, b, p1.ClusterID, false)
		if lag := <-done; lag > 5*time.Second {
			t.Errorf("%s left the catalog %s after its peering ended, want within 5 s", p1.Name, lag)
		} else {
			t.Logf("%s left the catalog %s after its peering ended", p1.Name, lag.Round(time.Millisecond))
		}
	})

	t.Run("the broker's operator aggregates the consumer: it no longer reads its selection, and its pods name no provider", func(t *testing.T) {
		aggregated(t, consumer, p2, one, replicas)
	})
	if t.Failed() {
		return
	}
	t.Run("aggregated over two providers: the offer sums them, 100 pods run across both, kubectl reaches each, a provider stopped has its pods Running on the other, scaling to 0 leaves nothing", func(t *testing.T) {
		aggregatedOverTwo(t, consumer, p1, p2, replicas)
	})
}

// aggregatedOverTwo: the aggregated consumer's second provider comes back
// (the broker consumes it again): the broker's one offer to the consumer
// becomes the sum of what both offer it, within the resale policy, and
// follows a change of that policy; the consumer's 100 pods, scaled to 0
// and back, run across both providers, each backed by exactly one
// provider pod; kubectl logs, exec and port-forward on the consumer reach
// a pod at each; the API server of one provider stops: its pods run on
// the other, none lost or duplicated; scaled to 0, nothing is left in the
// broker or either provider.
func aggregatedOverTwo(t *testing.T, consumer, p1, p2 *playground.Member, replicas int32) {
	t.Helper()
	ctx := t.Context()
	b := suite.Broker
	bc, cc := framework.Client(t, b), framework.Client(t, consumer)
	selKey := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer.ClusterID), Name: brokerv1alpha1.SelectionName}
	// offered is the CPU of the broker's offer as the consumer reads it,
	// and what it should be: the allocatable CPU of the broker's
	// virtual nodes of both providers, less what other consumers' pods
	// ask there, at the resale percent.
	offered := func(ctx context.Context) (got, want resource.Quantity, err error) {
		var adv sharingv1alpha1.Advertisement
		if err := cc.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(b.ClusterID), Name: sharingv1alpha1.AdvertisementName(b.ClusterID)}, &adv); err != nil {
			return got, want, err
		}
		var sel brokerv1alpha1.Selection
		if err := bc.Get(ctx, selKey, &sel); err != nil {
			return got, want, err
		}
		free := int64(0)
		for _, p := range []*playground.Member{p1, p2} {
			n, err := framework.VirtualNode(bc, p.ClusterID)
			if err != nil {
				return got, want, err
			}
			free += n.Status.Allocatable.Cpu().MilliValue()
			var pods corev1.PodList
			if err := bc.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
				return got, want, err
			}
			for _, pod := range pods.Items {
				if pod.Labels[offloadingv1alpha1.OriginClusterLabel] != consumer.ClusterID && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
					reqs := sharing.PodRequests(&pod)
					free -= reqs.Cpu().MilliValue()
				}
			}
		}
		return *adv.Spec.Resources.Cpu(), *resource.NewMilliQuantity(free*int64(sel.Spec.Aggregate.Resale())/100, resource.DecimalSI), nil
	}
	// followed waits until the consumer reads the offer it should (within
	// the broadcaster's 5% threshold), and says how long after since.
	followed := func(what string, since time.Time) {
		t.Helper()
		framework.Eventually(t, time.Minute, func() error {
			got, want, err := offered(ctx)
			if err != nil {
				return err
			}
			if d := got.MilliValue() - want.MilliValue(); want.IsZero() || d*100 > want.MilliValue()*sharing.ChangeThreshold || -d*100 > want.MilliValue()*sharing.ChangeThreshold {
				return fmt.Errorf("the consumer reads an offer of %s CPU from the broker, want %s (both providers)", got.String(), want.String())
			}
			return nil
		})
		if lag := time.Since(since); lag > 10*time.Second {
			t.Errorf("the broker's offer to the consumer followed %s after %s, want within 10 s", what, lag.Round(100*time.Millisecond))
		} else {
			t.Logf("the broker's offer to the consumer followed %s after %s", what, lag.Round(100*time.Millisecond))
		}
	}

	// The broker consumes p1 again: once its virtual node is Ready, the
	// offer sums both.
	framework.SetJoin(t, b, p1.ClusterID, true)
	framework.WaitVirtualNodesReady(t, b, p1)
	followed(p1.Name+"'s virtual node Ready", time.Now())
	setResale := func(pct int32) {
		t.Helper()
		var sel brokerv1alpha1.Selection
		if err := bc.Get(ctx, selKey, &sel); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(sel.DeepCopy())
		sel.Spec.Aggregate.ResalePercent = pct
		if err := bc.Patch(ctx, &sel, patch); err != nil {
			t.Fatal(err)
		}
	}
	setResale(50)
	followed("a resale of 50%", time.Now())
	setResale(100)
	followed("a resale of 100%", time.Now())

	var d appsv1.Deployment
	scale := func(n int32) {
		t.Helper()
		if err := cc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &d); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To(n)
		if err := cc.Patch(ctx, &d, patch); err != nil {
			t.Fatal(err)
		}
	}
	// providerPodNames are the names of the pods p runs for the broker.
	providerPodNames := func(ctx context.Context, c client.Client) ([]string, error) {
		var list corev1.PodList
		if err := c.List(ctx, &list, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: b.ClusterID}); err != nil {
			return nil, err
		}
		var out []string
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				out = append(out, p.Name)
			}
		}
		return out, nil
	}
	// nothingLeft waits until the consumer, the broker and the providers
	// that answer hold none of the consumer's pods of ns.
	nothingLeft := func(providers ...*playground.Member) {
		t.Helper()
		framework.Eventually(t, 2*time.Minute, func() error {
			if err := framework.AllRunning(ctx, cc, ns, 0); err != nil {
				return err
			}
			if byNode, names := placement(t, consumer); len(names) != 0 {
				return fmt.Errorf("the broker still holds %d of the consumer's pods: %v", len(names), byNode)
			}
			for _, p := range providers {
				if names, err := providerPodNames(ctx, framework.Client(t, p)); err != nil {
					return err
				} else if len(names) != 0 {
					return fmt.Errorf("%s still runs %d of the broker's pods", p.Name, len(names))
				}
			}
			return nil
		})
	}
	scale(0)
	nothingLeft(p1, p2)

	// Spread over both, each consumer pod backed by one provider pod of
	// its name.
	vnode1, err := framework.VirtualNode(bc, p1.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	vnode2, err := framework.VirtualNode(bc, p2.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	// Placement Spread (the default) spreads the pods evenly: the
	// scheduler's resource scoring alone put all 100 small pods on the
	// larger provider in a CI run, before the broker's pod webhook gave
	// them a spread over its nodes.
	start := time.Now()
	scale(replicas)
	backed := func(ctx context.Context, clients ...client.Client) (map[string]int, error) {
		if err := framework.AllRunning(ctx, cc, ns, int(replicas)); err != nil {
			return nil, err
		}
		var list corev1.PodList
		if err := cc.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		want := map[string]bool{}
		for _, p := range list.Items {
			want[p.Name] = true
		}
		seen := map[string]bool{}
		counts := map[string]int{}
		for i, c := range clients {
			names, err := providerPodNames(ctx, c)
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				if seen[n] || !want[n] {
					return nil, fmt.Errorf("provider pod %s: a duplicate, or of no pod of the consumer", n)
				}
				seen[n] = true
			}
			counts[fmt.Sprint(i)] = len(names)
		}
		if len(seen) != int(replicas) {
			return nil, fmt.Errorf("the providers run %d of the consumer's %d pods", len(seen), replicas)
		}
		return counts, nil
	}
	c1, c2 := framework.Client(t, p1), framework.Client(t, p2)
	framework.Eventually(t, 3*time.Minute, func() error {
		counts, err := backed(ctx, c1, c2)
		if err != nil {
			return err
		}
		if lo := replicas * 2 / 5; counts["0"] < int(lo) || counts["1"] < int(lo) {
			return fmt.Errorf("%s runs %d, %s %d: want at least %d each (placement Spread)", p1.Name, counts["0"], p2.Name, counts["1"], lo)
		}
		return nil
	})
	byNode, _ := placement(t, consumer)
	t.Logf("%d pods Running across both providers %s after scaling up: %d at %s, %d at %s", replicas, time.Since(start).Round(100*time.Millisecond),
		byNode[vnode1.Name], p1.Name, byNode[vnode2.Name], p2.Name)

	// kubectl on the consumer reaches a pod at each provider, through
	// both hops (kwok's simulated logs and shell name their cluster).
	var brokerPods corev1.PodList
	if err := bc.List(ctx, &brokerPods, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}); err != nil {
		t.Fatal(err)
	}
	for _, pair := range []struct {
		p     *playground.Member
		vnode string
	}{{p1, vnode1.Name}, {p2, vnode2.Name}} {
		i := slices.IndexFunc(brokerPods.Items, func(p corev1.Pod) bool { return p.Spec.NodeName == pair.vnode && p.DeletionTimestamp == nil })
		if i < 0 {
			t.Fatalf("no pod of the consumer on the broker's virtual node of %s", pair.p.Name)
		}
		pod := brokerPods.Items[i].Name
		out, err := framework.Kubectl(t, consumer, "", "--namespace", ns, "logs", pod)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) != localcluster.KwokLogLine(pair.p.Name) {
			t.Errorf("kubectl logs %s printed %q, want %q", pod, out, localcluster.KwokLogLine(pair.p.Name))
		}
		out, err = framework.Kubectl(t, consumer, "", "--namespace", ns, "exec", pod, "--", "printenv", localcluster.KwokExecClusterEnv)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) != pair.p.Name {
			t.Errorf("kubectl exec %s -- printenv %s printed %q, want %q", pod, localcluster.KwokExecClusterEnv, out, pair.p.Name)
		}
		framework.CheckPortForward(t, consumer, ns, pod, 1<<20)
	}

	// p1's API server stops: after the failover time, its pods run on
	// p2, none lost, none duplicated.
	moved := byNode[vnode1.Name]
	stopped := time.Now()
	restart := framework.StopAPIServer(t, p1) // and at cleanup, if not before
	framework.Eventually(t, 3*time.Minute, func() error {
		counts, err := backed(ctx, c2)
		if err != nil {
			return err
		}
		if counts["0"] != int(replicas) {
			return fmt.Errorf("%s runs %d of the consumer's pods, want all %d", p2.Name, counts["0"], replicas)
		}
		return nil
	})
	// A figure, not an assertion: speed is the benchmarks' to judge.
	t.Logf("failover: %d pods of the stopped provider Running at the other %s after its API server stopped (goal 60 s, failover after 20 s)",
		moved, time.Since(stopped).Round(100*time.Millisecond))
	restart()
	scale(0)
	nothingLeft(p1, p2)
	framework.WaitVirtualNodesReady(t, b, p1)
	pooled(t, consumer, p1, p2)
}

// pooled: the providers' nodes are in two regions, and the broker's
// operator lets the consumer choose its pods' providers by region
// (spec.aggregate.poolLabels): the consumer reads one virtual node of the
// broker for each region, with its label, what the provider there offers
// and nothing that names it; a Deployment that selects a region by node
// selector runs there alone, through the broker; without pool labels the
// consumer reads one node again.
func pooled(t *testing.T, consumer, p1, p2 *playground.Member) {
	t.Helper()
	const region = "topology.kubernetes.io/region"
	ctx := t.Context()
	b := suite.Broker
	bc, cc := framework.Client(t, b), framework.Client(t, consumer)
	// Both are undone at the end, also when the test fails midway: the
	// suite's other tests expect one virtual node of the broker.
	label := func(m *playground.Member, value string) {
		t.Helper()
		ctx := context.Background()
		c := framework.Client(t, m)
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes); err != nil {
			t.Fatal(err)
		}
		for i := range nodes.Items {
			n := &nodes.Items[i]
			if sharing.IsVirtual(n) {
				continue
			}
			patch := client.MergeFrom(n.DeepCopy())
			if value == "" {
				delete(n.Labels, region)
			} else {
				n.Labels[region] = value
			}
			if err := c.Patch(ctx, n, patch); err != nil {
				t.Fatal(err)
			}
		}
	}
	setPoolLabels := func(keys ...string) {
		t.Helper()
		ctx := context.Background()
		var sel brokerv1alpha1.Selection
		if err := bc.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer.ClusterID), Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(sel.DeepCopy())
		sel.Spec.Aggregate.PoolLabels = keys
		if err := bc.Patch(ctx, &sel, patch); err != nil {
			t.Fatal(err)
		}
	}
	// brokerNodes are the consumer's virtual nodes of the broker, by
	// region, once each is Ready.
	brokerNodes := func(ctx context.Context) (map[string]corev1.Node, error) {
		var nodes corev1.NodeList
		if err := cc.List(ctx, &nodes, client.MatchingLabels{offloadingv1alpha1.RemoteClusterLabel: b.ClusterID}); err != nil {
			return nil, err
		}
		out := map[string]corev1.Node{}
		for _, n := range nodes.Items {
			if n.DeletionTimestamp != nil || virtualnode.Ready(&n) != corev1.ConditionTrue {
				return nil, fmt.Errorf("the broker's virtual node %s going or not Ready", n.Name)
			}
			out[n.Labels[region]] = n
		}
		if len(out) != len(nodes.Items) {
			return nil, fmt.Errorf("%d virtual nodes of the broker for %d regions", len(nodes.Items), len(out))
		}
		return out, nil
	}
	// Both providers offered again (one was stopped before): what
	// follows times the pools alone.
	framework.Eventually(t, 2*time.Minute, func() error {
		var sel brokerv1alpha1.Selection
		if err := bc.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer.ClusterID), Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
			return err
		}
		if got := sel.Offered(); !slices.Contains(got, p1.ClusterID) || !slices.Contains(got, p2.ClusterID) {
			return fmt.Errorf("the consumer is offered %v, want both providers", got)
		}
		return nil
	})
	start := time.Now()
	t.Cleanup(func() {
		setPoolLabels()
		label(p1, "")
		label(p2, "")
	})
	label(p1, "eu-west")
	label(p2, "us-east")
	setPoolLabels(region)
	var pools map[string]corev1.Node
	framework.Eventually(t, time.Minute, func() error {
		var err error
		if pools, err = brokerNodes(ctx); err != nil {
			return err
		}
		for _, r := range []string{"eu-west", "us-east"} {
			if n, ok := pools[r]; !ok || n.Labels[offloadingv1alpha1.PoolLabel] == "" || n.Status.Allocatable.Cpu().IsZero() {
				return fmt.Errorf("the consumer's nodes of the broker by region: %v, want a pool's node with CPU for %s", slices.Collect(maps.Keys(pools)), r)
			}
		}
		if len(pools) != 2 {
			return fmt.Errorf("the consumer's nodes of the broker by region: %v, want eu-west and us-east alone", slices.Collect(maps.Keys(pools)))
		}
		return nil
	})
	t.Logf("the consumer read a node for each region %s after the pool labels were set", time.Since(start).Round(100*time.Millisecond))
	for _, n := range pools {
		for _, p := range []*playground.Member{p1, p2} {
			text := n.Name + fmt.Sprint(n.Labels) + fmt.Sprint(n.Annotations)
			if strings.Contains(text, p.ClusterID) || strings.Contains(text, p.Name) {
				t.Errorf("the consumer's node %s of the broker names provider %s: %s", n.Name, p.Name, text)
			}
		}
	}

	// Ten pods that ask for eu-west run at p1 alone.
	labels := map[string]string{"app": "eu"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eu"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](10), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{region: "eu-west"},
			Containers: []corev1.Container{{
				Name: "web", Image: "pause", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
			}},
		}},
	}}
	if err := cc.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	c1, c2 := framework.Client(t, p1), framework.Client(t, p2)
	framework.Eventually(t, 2*time.Minute, func() error {
		var list corev1.PodList
		if err := cc.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return err
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
			if p.Spec.NodeName != "" && p.Spec.NodeName != pools["eu-west"].Name {
				return fmt.Errorf("pod %s on %s, want the eu-west pool's node %s", p.Name, p.Spec.NodeName, pools["eu-west"].Name)
			}
		}
		if running != 10 {
			return fmt.Errorf("%d of the 10 eu-west pods Running", running)
		}
		for i, c := range []client.Client{c1, c2} {
			var at corev1.PodList
			if err := c.List(ctx, &at, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: b.ClusterID}); err != nil {
				return err
			}
			n := 0
			for _, p := range at.Items {
				if p.Labels["app"] == "eu" && p.DeletionTimestamp == nil {
					n++
				}
			}
			if want := map[int]int{0: 10, 1: 0}[i]; n != want {
				return fmt.Errorf("provider %d runs %d of the eu-west pods, want %d", i+1, n, want)
			}
		}
		return nil
	})
	if err := cc.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}

	// No pool labels: one node again, with no region (the providers
	// differ in it).
	setPoolLabels()
	framework.Eventually(t, time.Minute, func() error {
		nodes, err := brokerNodes(ctx)
		if err != nil {
			return err
		}
		if n, ok := nodes[""]; len(nodes) != 1 || !ok || n.Labels[offloadingv1alpha1.PoolLabel] != "" {
			return fmt.Errorf("the consumer's nodes of the broker by region: %v, want one, of no region and no pool", slices.Collect(maps.Keys(nodes)))
		}
		return nil
	})
}

// aggregated has the broker's operator aggregate the consumer (its
// Selection's spec.aggregate): the token the consumer's user had works
// no more (403), its provider is chosen by the aggregator's policy (every
// provider that answers), its 100 pods run on, and their status at the
// consumer, like the broker's offer, names no provider.
func aggregated(t *testing.T, consumer, provider *playground.Member, token string, replicas int) {
	t.Helper()
	ctx := t.Context()
	b := suite.Broker
	inBroker := framework.Client(t, b)
	key := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer.ClusterID), Name: brokerv1alpha1.SelectionName}
	var sel brokerv1alpha1.Selection
	if err := inBroker.Get(ctx, key, &sel); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(sel.DeepCopy())
	sel.Spec.Aggregate = &brokerv1alpha1.Aggregate{}
	if err := inBroker.Patch(ctx, &sel, patch); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		for _, name := range []string{brokerv1alpha1.LoginClusterRole, brokerv1alpha1.ConsumerServiceAccount} {
			if err := inBroker.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, &rbacv1.RoleBinding{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("RoleBinding %s/%s still there (%w)", key.Namespace, name, err)
			}
		}
		if err := inBroker.Get(ctx, key, &sel); err != nil {
			return err
		}
		if d := sel.Status.Decision; d == nil || !slices.Equal(d.Chosen, []string{provider.ClusterID}) {
			return fmt.Errorf("the aggregated consumer's decision %+v, want %s chosen", d, provider.Name)
		}
		return nil
	})
	// The broker's API keeps an allowed verdict a minute, as an API
	// server's authorization webhook cache does.
	framework.Eventually(t, 90*time.Second, func() error {
		if code, body := get(t, http.MethodGet, "/api/v1/selection", token); code != http.StatusForbidden {
			return fmt.Errorf("the consumer's token reads its selection: %d %.200s, want 403", code, body)
		}
		return nil
	})
	names := []string{provider.ClusterID, provider.Name}
	framework.Eventually(t, time.Minute, func() error {
		var pods corev1.PodList
		if err := framework.Client(t, consumer).List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		running := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
			raw, err := json.Marshal(p.Status)
			if err != nil {
				return err
			}
			for _, name := range names {
				if strings.Contains(string(raw), name) {
					return fmt.Errorf("pod %s's status names its provider (%q): %s", p.Name, name, raw)
				}
			}
		}
		if running < replicas {
			return fmt.Errorf("%d of the consumer's pods Running, want %d", running, replicas)
		}
		var adv sharingv1alpha1.Advertisement
		if err := framework.Client(t, consumer).Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(b.ClusterID),
			Name: sharingv1alpha1.AdvertisementName(b.ClusterID)}, &adv); err != nil {
			return err
		}
		raw, err := json.Marshal(adv.Spec)
		if err != nil {
			return err
		}
		for _, name := range names {
			if strings.Contains(string(raw), name) {
				return fmt.Errorf("the broker's offer names its provider (%q): %s", name, raw)
			}
		}
		if len(adv.Spec.LargestPods) == 0 || adv.Spec.Resources.Cpu().IsZero() {
			return fmt.Errorf("the broker's offer %s, largest pods %v: want the provider's resold", sharing.Describe(adv.Spec.Resources), adv.Spec.LargestPods)
		}
		return nil
	})
}

// brokerBudget returns the copy in the broker of the consumer's budget
// "web" of ns.
func brokerBudget(t *testing.T, consumer *playground.Member) (*policyv1.PodDisruptionBudget, error) {
	t.Helper()
	var list policyv1.PodDisruptionBudgetList
	if err := framework.Client(t, suite.Broker).List(t.Context(), &list, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if strings.HasPrefix(list.Items[i].Namespace, ns+"-") && list.Items[i].Name == "web" {
			return &list.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no copy of the budget in the broker")
}

// followHealthy watches the consumer's pods of ns in the broker until the
// test ends, and returns the least number of them healthy (ready, not
// being deleted) after any change seen so far.
func followHealthy(t *testing.T, consumer *playground.Member) func() int {
	t.Helper()
	cs, err := kubernetes.NewForConfig(suite.Broker.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = offloadingv1alpha1.OriginClusterLabel + "=" + consumer.ClusterID
	}))
	inf := factory.Core().V1().Pods().Informer()
	var mu sync.Mutex
	least := -1
	look := func(any) {
		n := 0
		for _, o := range inf.GetStore().List() {
			p := o.(*corev1.Pod)
			if strings.HasPrefix(p.Namespace, ns+"-") && p.DeletionTimestamp == nil && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			}) {
				n++
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if least < 0 || n < least {
			least = n
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: look, UpdateFunc: func(_, o any) { look(o) }, DeleteFunc: look,
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory.Start(stop)
	if !toolscache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("the broker's pods were not listed")
	}
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return least
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// largerThanAnyProvider: the consumer's virtual node sums what its
// provider's two nodes offer (32 CPUs each), more than the provider can
// run in one piece. A pod asking more than the largest piece, and less
// than the sum, is not bound to the virtual node: it waits at the
// consumer, its FailedScheduling event naming the largest pod it can
// take, while a small pod beside it runs.
func largerThanAnyProvider(t *testing.T, consumer *playground.Member) {
	t.Helper()
	ctx := t.Context()
	b := suite.Broker
	c := framework.Client(t, consumer)
	var request resource.Quantity
	var largest []corev1.ResourceList
	framework.Eventually(t, time.Minute, func() error {
		vnode, err := framework.VirtualNode(c, b.ClusterID)
		if err != nil {
			return err
		}
		// One a provider, less those another holds.
		if largest, err = sharing.ParseLargestPods(vnode.Annotations); err != nil || len(largest) == 0 {
			return fmt.Errorf("virtual node %s's largest pods %v (%w), want some", vnode.Name, largest, err)
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods); err != nil {
			return err
		}
		free := vnode.Status.Allocatable.Cpu().DeepCopy()
		for i := range pods.Items {
			if pods.Items[i].Spec.NodeName == vnode.Name {
				reqs := sharing.PodRequests(&pods.Items[i])
				free.Sub(*reqs.Cpu())
			}
		}
		request = largest[0].Cpu().DeepCopy() // sorted: the most cpu first
		request.Add(resource.MustParse("1"))
		if free.Cmp(request) < 0 {
			return fmt.Errorf("virtual node %s has cpu %s free, less than %s, one more than the largest pod %v: the offer sums no more than one piece",
				vnode.Name, free.String(), request.String(), largest)
		}
		return nil
	})
	pod := func(name string, cpu resource.Quantity) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "pause", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu}},
		}}}}
	}
	big, small := pod("too-big", request), pod("small", resource.MustParse("100m"))
	for _, p := range []*corev1.Pod{big, small} {
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	}
	want := "the largest pod it can take is " + sharing.Describe(largest[0])
	framework.Eventually(t, time.Minute, func() error {
		var got corev1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(small), &got); err != nil {
			return err
		}
		if got.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("the small pod is %s, want Running", got.Status.Phase)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(big), &got); err != nil {
			return err
		}
		if got.Spec.NodeName != "" {
			return fmt.Errorf("the pod asking cpu %s was bound to %s", request.String(), got.Spec.NodeName)
		}
		var events corev1.EventList
		if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == big.Name && e.Reason == "FailedScheduling" && strings.Contains(e.Message, want) {
				t.Logf("the pod asking cpu %s waits: %s", request.String(), e.Message)
				return nil
			}
		}
		return fmt.Errorf("no FailedScheduling event of %s says %q", big.Name, want)
	})
}
