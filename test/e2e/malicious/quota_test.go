// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/offloading"
	"github.com/liqo-go/liqo/internal/virtualkubelet/pods"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestConsumerRunsNoMoreThanOffered: what a provider offered a consumer
// bounds what the consumer uses across all the namespaces the provider
// made for it, not in each: the quotas of its namespaces together never
// hold more than the offer (pods, CPU and memory as requests and limits)
// and the ClusterConfig's consumerQuota (claims, storage, object
// counts). With its virtual kubelet's identity, the consumer cannot run a
// pod asking for more CPU than offered, nor one whose limits exceed it; a
// pod naming nothing gets small requests and limits, which the quota
// counts; no claim (a generic ephemeral volume's included) is made while
// none is allowed; Secrets beyond the count allowed are refused, whatever
// namespace they go to. The other provider serves throughout.
func TestConsumerRunsNoMoreThanOffered(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	const secrets = 4
	framework.SetClusterConfig(t, b, func(spec *configv1alpha1.ClusterConfigSpec) {
		spec.SharingConfig.ConsumerQuota.Secrets = ptr.To[int64](secrets)
	})
	t.Cleanup(func() {
		framework.SetClusterConfig(t, b, func(spec *configv1alpha1.ClusterConfigSpec) { spec.SharingConfig.ConsumerQuota.Secrets = nil })
	})
	first := remoteNamespaceOf(t, offload(t, "bounded-1", offloadingv1alpha1.NamespaceOffloadingSpec{}, 2), b.ClusterID)
	second := remoteNamespaceOf(t, offload(t, "bounded-2", offloadingv1alpha1.NamespaceOffloadingSpec{}, 2), b.ClusterID)
	inB := framework.Client(t, b)
	vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))

	// Every quota of the consumer counted, and together no more than
	// the offer.
	var offered, total corev1.ResourceList
	framework.Eventually(t, time.Minute, func() error {
		var pr discoveryv1alpha1.PeeringRequest
		if err := inB.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &pr); err != nil {
			return err
		}
		offered = pr.Status.OfferedResources
		if offered.Cpu().IsZero() {
			return fmt.Errorf("nothing offered yet: %v", offered)
		}
		total = offloading.QuotaOf(offered, configv1alpha1.ConsumerQuota{Secrets: ptr.To[int64](secrets)})
		var quotas corev1.ResourceQuotaList
		if err := inB.List(ctx, &quotas, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: a.ClusterID}); err != nil {
			return err
		}
		held := corev1.ResourceList{}
		seen := map[string]bool{}
		for _, q := range quotas.Items {
			seen[q.Namespace] = true
			for name, want := range q.Spec.Hard {
				if have, ok := q.Status.Hard[name]; !ok || have.Cmp(want) != 0 {
					return fmt.Errorf("quota of %s not enforced yet: %s asks %s, enforces %s", q.Namespace, name, want.String(), have.String())
				}
				h := held[name]
				h.Add(want)
				held[name] = h
			}
		}
		if !seen[first] || !seen[second] {
			return fmt.Errorf("quotas in %v, want %s and %s", seen, first, second)
		}
		for name, limit := range total {
			if h, ok := held[name]; !ok || h.Cmp(limit) > 0 {
				return fmt.Errorf("the consumer's quotas hold %s of %s together, its limit is %s", h.String(), name, limit.String())
			}
		}
		return nil
	})

	t.Run("a pod asking for more CPU than offered", func(t *testing.T) {
		greedy := labelled(pausePod(first, "direct-greedy"), a)
		more := offered.Cpu().DeepCopy()
		more.Add(resource.MustParse("1"))
		greedy.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: more}
		greedy.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: more}
		if err := vk.Create(ctx, greedy); err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
			t.Fatalf("a pod requesting %s CPU, %s offered: %v, want refused for the quota", more.String(), offered.Cpu().String(), err)
		}
	})
	t.Run("a pod whose limits exceed the offer", func(t *testing.T) {
		greedy := labelled(pausePod(first, "direct-unlimited"), a)
		more := offered.Memory().DeepCopy()
		more.Add(resource.MustParse("1Gi"))
		greedy.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}
		greedy.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: more}
		if err := vk.Create(ctx, greedy); err == nil || !strings.Contains(err.Error(), "limits.memory") {
			t.Fatalf("a pod limited to %s memory, %s offered: %v, want refused for the quota on limits", more.String(), offered.Memory().String(), err)
		}
	})
	t.Run("a pod naming nothing is small and bounded", func(t *testing.T) {
		modest := labelled(pausePod(first, "direct-modest"), a)
		framework.Allowed(t, "a pod requesting nothing (dry run)", vk.Create(ctx, modest, client.DryRunAll))
		res := modest.Spec.Containers[0].Resources
		for name, want := range offloading.DefaultRequests {
			if q, ok := res.Requests[name]; !ok || q.Cmp(want) != 0 {
				t.Errorf("a pod requesting nothing got requests %v, want the defaults %v", res.Requests, offloading.DefaultRequests)
			}
			if q, ok := res.Limits[name]; !ok || q.Cmp(want) != 0 {
				t.Errorf("a pod naming no limit got limits %v, want the defaults %v", res.Limits, offloading.DefaultRequests)
			}
		}
	})
	t.Run("no claim while none is allowed", func(t *testing.T) {
		// Whoever makes it: the ephemeral volume controller makes a
		// generic ephemeral volume's claim in the pod's namespace.
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: first, Name: "scratch"}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")}},
		}}
		if err := inB.Create(ctx, pvc, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "exceeded quota") {
			t.Fatalf("a claim in a consumer's namespace: %v, want refused for the quota", err)
		}
	})
	t.Run("Secrets beyond the count, whatever the namespace", func(t *testing.T) {
		// A hostile consumer keeps what it stores: its controller manager
		// is stopped, so that no reflector removes the Secrets as orphans.
		framework.StopControllerManager(t, a)
		made := 0
		var refusal error
		for i := range 2 * secrets {
			ns := []string{first, second}[i%2]
			s := labelled(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("hoard-%d", i)}, StringData: map[string]string{"k": "v"}}, a)
			err := vk.Create(ctx, s)
			if err == nil {
				made++
				framework.Cleanup(t, func(ctx context.Context) { _ = inB.Delete(ctx, s) })
				continue
			}
			if !strings.Contains(err.Error(), "exceeded quota") {
				t.Fatalf("Secret %s/%s: %v", ns, s.Name, err)
			}
			refusal = err
		}
		if made > secrets || refusal == nil {
			var quotas corev1.ResourceQuotaList
			_ = inB.List(ctx, &quotas, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: a.ClusterID})
			var held []string
			for _, q := range quotas.Items {
				held = append(held, fmt.Sprintf("%s: %s of %s (enforcing %s)", q.Namespace, q.Status.Used.Name(corev1.ResourceSecrets, resource.DecimalSI),
					q.Spec.Hard.Name(corev1.ResourceSecrets, resource.DecimalSI), q.Status.Hard.Name(corev1.ResourceSecrets, resource.DecimalSI)))
			}
			t.Fatalf("the consumer made %d Secrets across its namespaces, %d allowed (last refusal: %v); the quotas' Secrets: %s",
				made, secrets, refusal, strings.Join(held, "; "))
		}
		t.Logf("%d Secrets made of %d tried; refused with: %v", made, 2*secrets, refusal)
	})
	requireReady(t, waitHeartbeats(t, a, c.ClusterID, 1))
}

// TestDemandMovesOnlyTheConsumersOwnShare: a provider shares its offer
// between a consumer's namespaces by what the consumer states their pods
// ask for (NamespaceMap spec.demands), so that a pod asking for more than
// an even share of the offer runs in one of several namespaces. What the
// consumer states is its word, not a fact: stating, with its virtual
// kubelet's identity, far more than the offer for another namespace moves
// nothing past the offer, and takes nothing from what a namespace uses.
func TestDemandMovesOnlyTheConsumersOwnShare(t *testing.T) {
	peered(t)
	a, b, _ := members()
	ctx := t.Context()
	spec := offloadingv1alpha1.NamespaceOffloadingSpec{ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{b.ClusterID}}},
	}}}}
	var remote []string
	for i := range 4 {
		remote = append(remote, remoteNamespaceOf(t, offload(t, fmt.Sprintf("demand-%d", i), spec, 1), b.ClusterID))
	}
	inB := framework.Client(t, b)
	var pr discoveryv1alpha1.PeeringRequest
	if err := inB.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &pr); err != nil {
		t.Fatal(err)
	}
	offered := pr.Status.OfferedResources.Cpu().DeepCopy()
	// Three fifths of the offer: more than an even share between four
	// namespaces (and the others this suite offloads).
	big := *resource.NewMilliQuantity(offered.MilliValue()*3/5, resource.DecimalSI)
	pod := pausePod("demand-0", "big")
	pod.Spec.NodeSelector = map[string]string{offloadingv1alpha1.RemoteClusterLabel: b.ClusterID}
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: big}, Limits: corev1.ResourceList{corev1.ResourceCPU: big},
	}
	if err := framework.Client(t, a).Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		var p corev1.Pod
		if err := inB.Get(ctx, client.ObjectKey{Namespace: remote[0], Name: "big"}, &p); err != nil {
			var q corev1.ResourceQuota
			_ = inB.Get(ctx, client.ObjectKey{Namespace: remote[0], Name: offloading.OfferQuotaName}, &q)
			return fmt.Errorf("the pod asking for %s CPU of %s offered, in the provider: %w (its namespace's quota of CPU limits: %s)", big.String(), offered.String(), err, q.Spec.Hard.Name(corev1.ResourceLimitsCPU, resource.DecimalSI))
		}
		return nil
	})

	// The consumer states a demand beyond the offer for another namespace.
	vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))
	nm := &offloadingv1alpha1.NamespaceMap{ObjectMeta: metav1.ObjectMeta{Namespace: discoveryv1alpha1.TenantNamespace(a.ClusterID), Name: offloadingv1alpha1.NamespaceMapName}}
	lie := `{"spec":{"demands":{"demand-1":{"requests.cpu":"100000","limits.cpu":"100000","pods":"100000"}}}}`
	if err := vk.Patch(ctx, nm, client.RawPatch(types.MergePatchType, []byte(lie))); err != nil {
		t.Fatalf("the consumer stating a demand in its NamespaceMap: %v", err)
	}
	// Until the provider has acted on it (its quota for demand-1 grows out
	// of what the others leave), and at every look: the quotas together
	// within the offer, demand-0's at least what its pod uses.
	framework.Eventually(t, time.Minute, func() error {
		var quotas corev1.ResourceQuotaList
		if err := inB.List(ctx, &quotas, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: a.ClusterID}); err != nil {
			return err
		}
		var held int64
		got := map[string]int64{}
		for _, q := range quotas.Items {
			c := q.Spec.Hard[corev1.ResourceLimitsCPU]
			held += c.MilliValue()
			got[q.Namespace] = c.MilliValue()
		}
		if held > offered.MilliValue() {
			t.Fatalf("the consumer's quotas hold %dm of CPU limits together, %s offered: %v", held, offered.String(), got)
		}
		if got[remote[0]] < big.MilliValue() {
			t.Fatalf("demand-0's quota fell to %dm of CPU limits under its pod's %s: %v", got[remote[0]], big.String(), got)
		}
		if free := offered.MilliValue() - big.MilliValue(); got[remote[1]] < free*9/10 {
			return fmt.Errorf("demand-1's quota: %dm, want most of the %dm nobody uses: %v", got[remote[1]], free, got)
		}
		return nil
	})
	var p corev1.Pod
	if err := inB.Get(ctx, client.ObjectKey{Namespace: remote[0], Name: "big"}, &p); err != nil {
		t.Fatalf("the pod of demand-0 after the lie: %v", err)
	}
}

// TestWholeDemandsServedInTurn: two namespaces whose pods each ask for
// more than half of the offer (as limits; their requests are small, so
// the consumer's scheduler binds both to the virtual node) are served one
// after the other, not each half of the offer that fits neither. Both
// pods wait behind a third that holds most of the offer until the
// consumer has stated both wants; once that one is gone, one of the two
// reaches the provider while the other waits, its namespace's quota short
// of it; once the first is gone, the second follows. Throughout, the
// consumer's quotas together hold no more than the offer.
func TestWholeDemandsServedInTurn(t *testing.T) {
	peered(t)
	a, b, _ := members()
	ctx := t.Context()
	spec := offloadingv1alpha1.NamespaceOffloadingSpec{ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{b.ClusterID}}},
	}}}}
	const blocker = "turn-blocker"
	names := []string{"turn-0", "turn-1"}
	remote := map[string]string{}
	for _, ns := range append([]string{blocker}, names...) {
		remote[ns] = remoteNamespaceOf(t, offload(t, ns, spec, 1), b.ClusterID)
	}
	inA, inB := framework.Client(t, a), framework.Client(t, b)
	var pr discoveryv1alpha1.PeeringRequest
	if err := inB.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &pr); err != nil {
		t.Fatal(err)
	}
	offered := pr.Status.OfferedResources.Cpu().DeepCopy()
	request := *resource.NewMilliQuantity(offered.MilliValue()/10, resource.DecimalSI)
	create := func(ns string, limit resource.Quantity) {
		t.Helper()
		pod := pausePod(ns, "big")
		pod.Spec.NodeSelector = map[string]string{offloadingv1alpha1.RemoteClusterLabel: b.ClusterID}
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: request}, Limits: corev1.ResourceList{corev1.ResourceCPU: limit},
		}
		if err := inA.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	quotas := func() map[string]int64 {
		t.Helper()
		var list corev1.ResourceQuotaList
		if err := inB.List(ctx, &list, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: a.ClusterID}); err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		var held int64
		for _, q := range list.Items {
			c := q.Spec.Hard[corev1.ResourceLimitsCPU]
			got[q.Namespace] = c.MilliValue()
			held += c.MilliValue()
		}
		if held > offered.MilliValue() {
			t.Fatalf("the consumer's quotas hold %dm of CPU limits together, %s offered: %v", held, offered.String(), got)
		}
		return got
	}
	inProvider := func(ns string) bool {
		t.Helper()
		var p corev1.Pod
		err := inB.Get(ctx, client.ObjectKey{Namespace: remote[ns], Name: "big"}, &p)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	create(blocker, *resource.NewMilliQuantity(offered.MilliValue()*9/10, resource.DecimalSI))
	framework.Eventually(t, 2*time.Minute, func() error {
		if !inProvider(blocker) {
			return fmt.Errorf("the pod holding nine tenths of the offer is not in the provider; quotas of CPU limits: %v", quotas())
		}
		return nil
	})
	limit := *resource.NewMilliQuantity(offered.MilliValue()*3/5, resource.DecimalSI)
	for _, ns := range names {
		create(ns, limit)
	}
	// Both wants stated, as the provider reads them.
	framework.Eventually(t, time.Minute, func() error {
		var nm offloadingv1alpha1.NamespaceMap
		if err := inB.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(a.ClusterID), Name: offloadingv1alpha1.NamespaceMapName}, &nm); err != nil {
			return err
		}
		for _, ns := range names {
			if d := nm.Spec.Demands[ns][corev1.ResourceLimitsCPU]; d.Cmp(limit) < 0 {
				return fmt.Errorf("the consumer states %s of CPU limits for %s, want %s", d.String(), ns, limit.String())
			}
		}
		return nil
	})
	if inProvider(names[0]) || inProvider(names[1]) {
		t.Fatalf("a pod asking for %s CPU limits is in the provider beside one holding nine tenths of %s offered: quotas %v", limit.String(), offered.String(), quotas())
	}
	if err := inA.Delete(ctx, pausePod(blocker, "big")); err != nil {
		t.Fatal(err)
	}

	var first, second string
	framework.Eventually(t, 2*time.Minute, func() error {
		got := quotas()
		switch in0, in1 := inProvider(names[0]), inProvider(names[1]); {
		case in0 && in1:
			t.Fatalf("both pods asking for %s CPU limits of %s offered are in the provider", limit.String(), offered.String())
		case in0:
			first, second = names[0], names[1]
		case in1:
			first, second = names[1], names[0]
		default:
			return fmt.Errorf("neither pod asking for %s CPU limits of %s offered is in the provider; quotas of CPU limits: %v", limit.String(), offered.String(), got)
		}
		return nil
	})
	if got := quotas(); got[remote[second]] >= limit.MilliValue() {
		t.Fatalf("%s waits, yet its quota holds %dm of CPU limits, its pod's %s: %v", second, got[remote[second]], limit.String(), got)
	}
	// The waiting pod says why, in the consumer.
	framework.Eventually(t, time.Minute, func() error {
		var evs eventsv1.EventList
		if err := inA.List(ctx, &evs, client.InNamespace(second)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "big" && e.Reason == pods.ReasonWaitingForProviderQuota && strings.Contains(e.Note, "exceeded quota") {
				return nil
			}
		}
		return fmt.Errorf("no %s event of %s/big", pods.ReasonWaitingForProviderQuota, second)
	})
	t.Logf("%s served first; %s waits", first, second)
	if err := inA.Delete(ctx, pausePod(first, "big")); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		got := quotas()
		if !inProvider(second) {
			return fmt.Errorf("%s's pod is not in the provider once %s's is deleted; quotas of CPU limits: %v", second, first, got)
		}
		return nil
	})
}
