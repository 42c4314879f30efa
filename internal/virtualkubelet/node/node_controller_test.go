// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider/memory"
)

type nodeWorld struct {
	c       client.Client
	health  *memory.Providers
	mu      sync.Mutex
	removed []string
}

func (w *nodeWorld) removedProviders() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.removed...)
}

// startInstalled starts an API server with Liqo installed, and returns
// its configuration and a client with Liqo's scheme.
func startInstalled(t *testing.T) (*rest.Config, client.Client) {
	t.Helper()
	cfg := envtest.Start(t, "consumer")
	if err := install.Install(t.Context(), cfg, install.Options{}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c
}

// startNodes runs the virtual node reconciler alone against a real API
// server, with the in-memory provider's health.
func startNodes(t *testing.T) *nodeWorld {
	t.Helper()
	cfg, c := startInstalled(t)
	w := &nodeWorld{c: c, health: memory.New()}
	envtest.StartManager(t, cfg, func(mgr ctrl.Manager) error {
		if err := IndexPods(t.Context(), mgr); err != nil {
			return err
		}
		return (&Reconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Health: w.health,
			Removed: func(p string) { w.mu.Lock(); w.removed = append(w.removed, p); w.mu.Unlock() },
		}).SetupWithManager(mgr)
	})
	return w
}

// offer writes provider's Advertisement in its tenant namespace, with
// identity claimed as its cluster, accepted by the operator.
func (w *nodeWorld) offer(t *testing.T, provider, claimed string) *sharingv1alpha1.Advertisement {
	t.Helper()
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: discoveryv1alpha1.TenantNamespace(provider)}}
	if err := w.c.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	adv := &sharingv1alpha1.Advertisement{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: sharingv1alpha1.AdvertisementName(provider)},
		Spec: sharingv1alpha1.AdvertisementSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: claimed, ClusterName: claimed},
			Resources:       corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Timestamp:       metav1.Now(), TimeToLive: metav1.NewTime(time.Now().Add(time.Hour)),
		},
	}
	if err := w.c.Create(ctx, adv); err != nil {
		t.Fatal(err)
	}
	adv.Status.Phase = sharingv1alpha1.AdvertisementAccepted
	if err := w.c.Status().Update(ctx, adv); err != nil {
		t.Fatal(err)
	}
	return adv
}

func (w *nodeWorld) foreignCluster(t *testing.T, provider string) *discoveryv1alpha1.ForeignCluster {
	t.Helper()
	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: provider, Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: provider}},
		Spec:       discoveryv1alpha1.ForeignClusterSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: provider, ClusterName: provider}},
	}
	if err := w.c.Create(t.Context(), fc); err != nil {
		t.Fatal(err)
	}
	return fc
}

func (w *nodeWorld) virtualNodes(ctx context.Context, provider string) ([]corev1.Node, error) {
	var nodes corev1.NodeList
	err := w.c.List(ctx, &nodes, client.MatchingLabels{offloadingv1alpha1.RemoteClusterLabel: provider})
	return nodes.Items, err
}

func (w *nodeWorld) condition(ctx context.Context, provider string) (*metav1.Condition, error) {
	var fc discoveryv1alpha1.ForeignCluster
	if err := w.c.Get(ctx, client.ObjectKey{Name: provider}, &fc); err != nil {
		return nil, err
	}
	return meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionVirtualNodeReady), nil
}

// TestVirtualNodeLifecycle: an accepted offer gets one virtual node with
// the offer as its capacity, the virtual-node label and taint, and a
// Lease; the ForeignCluster says VirtualNodeReady. A provider that stops
// answering makes the node NotReady; the offer withdrawn removes the node
// and tells whoever ends the provider's sessions.
func TestVirtualNodeLifecycle(t *testing.T) {
	w := startNodes(t)
	const provider = "provider-1"
	w.foreignCluster(t, provider)
	adv := w.offer(t, provider, provider)

	var node corev1.Node
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		nodes, err := w.virtualNodes(ctx, provider)
		if err != nil {
			return err
		}
		if len(nodes) != 1 {
			return fmt.Errorf("%d virtual nodes for %s, want 1", len(nodes), provider)
		}
		node = nodes[0]
		if Ready(&node) != corev1.ConditionTrue {
			return fmt.Errorf("node %s Ready=%s", node.Name, Ready(&node))
		}
		return nil
	})
	if q := node.Status.Capacity[corev1.ResourceCPU]; q.Cmp(resource.MustParse("4")) != 0 {
		t.Errorf("node cpu capacity %s, want the offer's 4", q.String())
	}
	if !offloadingv1alpha1.IsVirtualNode(node.Labels) {
		t.Errorf("node labels %v lack the virtual-node label", node.Labels)
	}
	tainted := false
	for _, taint := range node.Spec.Taints {
		tainted = tainted || taint.Key == offloadingv1alpha1.VirtualNodeTaint
	}
	if !tainted {
		t.Errorf("node taints %v lack %s", node.Spec.Taints, offloadingv1alpha1.VirtualNodeTaint)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		var lease coordinationv1.Lease
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node.Name}, &lease); err != nil {
			return fmt.Errorf("the node's Lease: %w", err)
		}
		if lease.Spec.RenewTime == nil {
			return errors.New("the node's Lease was never renewed")
		}
		c, err := w.condition(ctx, provider)
		if err != nil {
			return err
		}
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("VirtualNodeReady %+v, want True", c)
		}
		return nil
	})

	// The provider stops answering: the next look (a change to the offer
	// here, the lease renewal otherwise) finds the node NotReady.
	w.health.Down(provider, errors.New("connection refused"))
	patch := client.MergeFrom(adv.DeepCopy())
	metav1.SetMetaDataAnnotation(&adv.ObjectMeta, "test/touch", "1")
	if err := w.c.Patch(t.Context(), adv, patch); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 15*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(&node), &node); err != nil {
			return err
		}
		if Ready(&node) != corev1.ConditionFalse {
			return fmt.Errorf("node Ready=%s with the provider down, want False", Ready(&node))
		}
		c, err := w.condition(ctx, provider)
		if err != nil {
			return err
		}
		if c == nil || c.Reason != discoveryv1alpha1.ReasonProviderUnreachable {
			return fmt.Errorf("VirtualNodeReady %+v, want reason %s", c, discoveryv1alpha1.ReasonProviderUnreachable)
		}
		return nil
	})
	w.health.Down(provider, nil)

	if err := w.c.Delete(t.Context(), adv); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		err := w.c.Get(ctx, client.ObjectKeyFromObject(&node), &corev1.Node{})
		if err == nil {
			return fmt.Errorf("node %s still there after the offer went", node.Name)
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		if got := w.removedProviders(); len(got) == 0 || got[len(got)-1] != provider {
			return fmt.Errorf("removed providers %v, want %s told", got, provider)
		}
		c, err := w.condition(ctx, provider)
		if err != nil {
			return err
		}
		if c != nil {
			return fmt.Errorf("VirtualNodeReady %+v after the node went, want none", c)
		}
		return nil
	})
}

// TestOfferNamingAnotherClusterGetsNoNode: a provider writes, in its own
// tenant namespace, an accepted-looking offer that claims to be another
// cluster: it gets no node, and the other cluster's node is not touched.
func TestOfferNamingAnotherClusterGetsNoNode(t *testing.T) {
	w := startNodes(t)
	w.offer(t, "victim", "victim")
	var victim []corev1.Node
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) (err error) {
		if victim, err = w.virtualNodes(ctx, "victim"); err == nil && len(victim) != 1 {
			err = fmt.Errorf("%d nodes for victim, want 1", len(victim))
		}
		return err
	})
	w.offer(t, "mallory", "victim")
	envtest.Consistently(t, 2*time.Second, func(ctx context.Context) error {
		nodes, err := w.virtualNodes(ctx, "mallory")
		if err != nil {
			return err
		}
		if len(nodes) != 0 {
			return fmt.Errorf("%d nodes for mallory's offer naming victim, want none", len(nodes))
		}
		now, err := w.virtualNodes(ctx, "victim")
		if err != nil {
			return err
		}
		if len(now) != 1 || now[0].UID != victim[0].UID {
			return fmt.Errorf("victim's node changed: %d nodes", len(now))
		}
		return nil
	})
}

type fixedKubelet struct{ port int32 }

func (k fixedKubelet) Endpoint(context.Context, string) (int32, error) { return k.port, nil }
func (fixedKubelet) Release(string)                                    {}

// TestStaleNodeStatusIsNotPatched: a status written from a stale copy of
// a virtual node (the cache's, of a node removed and made again) is
// refused, not merged into the new node as a difference that leaves out
// what the stale copy already had (seen in CI: a node made again had no
// address, and kubectl logs found none).
func TestStaleNodeStatusIsNotPatched(t *testing.T) {
	cfg := envtest.Start(t, "consumer")
	ctx := t.Context()
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c, KubeletAddress: "127.0.0.1", Kubelet: fixedKubelet{port: 10250}}
	adv := &sharingv1alpha1.Advertisement{Spec: sharingv1alpha1.AdvertisementSpec{
		ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: "provider-1"},
		Resources:       corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")},
	}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "liqo-provider-1"}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := r.updateStatus(ctx, node, PeerOffer(adv), true, "ready"); err != nil {
		t.Fatal(err)
	}
	stale := node.DeepCopy()
	if err := c.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name}}); err != nil {
		t.Fatal(err)
	}
	// Something to write: the provider's state changed meanwhile.
	err = r.updateStatus(ctx, stale, PeerOffer(adv), false, "unreachable")
	var fresh corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: node.Name}, &fresh); err != nil {
		t.Fatal(err)
	}
	if err == nil && len(fresh.Status.Addresses) == 0 {
		t.Fatalf("a status patch from a stale copy was merged into the new node, which has no address: %+v", fresh.Status)
	}
	if err != nil && !apierrors.IsConflict(err) {
		t.Fatalf("the status patch from a stale copy: %v, want a conflict", err)
	}
}

// TestOfferOfNoPeerKeepsANode: an offer that is no peer's (no
// Advertisement, no ForeignCluster behind it, as the broker's aggregator
// would make) gets its virtual node through Keep as a peer's does: named
// after it, labelled and tainted, its capacity and Lease, NotReady while
// its provider cannot be reached; Remove drains and deletes it.
func TestOfferOfNoPeerKeepsANode(t *testing.T) {
	_, c := startInstalled(t)
	ctx := t.Context()
	health := memory.New()
	r := &Reconciler{Client: c, APIReader: c, Health: health}
	offer := &provider.Offer{
		Provider: "aggregate-1", Name: "aggregate",
		Resources:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("100")},
		Labels:      map[string]string{"topology.kubernetes.io/region": "eu-west"},
		LargestPods: []corev1.ResourceList{{corev1.ResourceCPU: resource.MustParse("2")}},
	}
	node, ready, _, err := r.Keep(ctx, offer)
	if err != nil {
		t.Fatal(err)
	}
	if node.Name != "liqo-aggregate" || node.Labels[offloadingv1alpha1.RemoteClusterLabel] != offer.Provider ||
		node.Labels["topology.kubernetes.io/region"] != "eu-west" || !offloadingv1alpha1.IsVirtualNode(node.Labels) || !ready {
		t.Fatalf("node %s labels %v ready %v, want liqo-aggregate, virtual, of aggregate-1 in eu-west, ready", node.Name, node.Labels, ready)
	}
	var got corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: node.Name}, &got); err != nil {
		t.Fatal(err)
	}
	tainted := slices.ContainsFunc(got.Spec.Taints, func(t corev1.Taint) bool { return t.Key == offloadingv1alpha1.VirtualNodeTaint })
	if got.Status.Allocatable.Pods().Value() != 100 || Ready(&got) != corev1.ConditionTrue || !tainted {
		t.Errorf("node status %+v taints %v, want 100 pods allocatable, Ready, the virtual nodes' taint", got.Status.Allocatable, got.Spec.Taints)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node.Name}, &coordinationv1.Lease{}); err != nil {
		t.Errorf("the node's Lease: %v", err)
	}
	if v, want := got.Annotations[offloadingv1alpha1.LargestPodsAnnotation], `[{"cpu":"2"}]`; v != want {
		t.Errorf("largest pods annotation %q, want %q", v, want)
	}
	// The offer's largest pods change, then go: the annotation follows,
	// and an operator's stays.
	patch := client.MergeFrom(got.DeepCopy())
	metav1.SetMetaDataAnnotation(&got.ObjectMeta, "example.com/owner", "ops")
	if err := c.Patch(ctx, &got, patch); err != nil {
		t.Fatal(err)
	}
	offer.LargestPods = []corev1.ResourceList{{corev1.ResourceCPU: resource.MustParse("3")}}
	if _, _, _, err := r.Keep(ctx, offer); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: node.Name}, &got); err != nil || got.Annotations[offloadingv1alpha1.LargestPodsAnnotation] != `[{"cpu":"3"}]` {
		t.Errorf("largest pods annotation %q (%v) after the offer changed, want the new one", got.Annotations[offloadingv1alpha1.LargestPodsAnnotation], err)
	}
	offer.LargestPods = nil
	if _, _, _, err := r.Keep(ctx, offer); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: node.Name}, &got); err != nil || metav1.HasAnnotation(got.ObjectMeta, offloadingv1alpha1.LargestPodsAnnotation) ||
		got.Annotations["example.com/owner"] != "ops" {
		t.Errorf("annotations %v (%v) after the offer's bound went, want the operator's alone", got.Annotations, err)
	}

	health.Down(offer.Provider, errors.New("no answer"))
	if _, ready, msg, err := r.Keep(ctx, offer); err != nil || ready || !strings.Contains(msg, "no answer") {
		t.Errorf("Keep with the provider down: ready %v %q %v, want not ready, saying why", ready, msg, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: node.Name}, &got); err != nil || Ready(&got) != corev1.ConditionFalse {
		t.Errorf("node Ready %v (%v) with its provider down, want False", Ready(&got), err)
	}

	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "default"}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "web"},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "web", Image: "pause"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := r.Remove(ctx, offer.Provider); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKey{Name: node.Name}, &corev1.Node{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the node is still there (%w)", err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("its pod is still there (%w)", err)
		}
		return nil
	})
}

// TestUntaintedNodes: a controller manager told to leave its virtual nodes
// untainted (--virtual-node-taint=false, for suites that take only
// untainted nodes as schedulable) takes its taint off a node that has it,
// keeps an operator's, and makes new nodes without it; told again to
// taint, it puts the taint back.
func TestUntaintedNodes(t *testing.T) {
	_, c := startInstalled(t)
	ctx := t.Context()
	r := &Reconciler{Client: c, APIReader: c, Health: memory.New()}
	offer := func(id string) *provider.Offer {
		return &provider.Offer{Provider: id, Name: id, Resources: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}
	}
	ours := func(n *corev1.Node) bool {
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == offloadingv1alpha1.VirtualNodeTaint })
	}
	operators := corev1.Taint{Key: "example.com/maintenance", Value: "soon", Effect: corev1.TaintEffectNoSchedule}
	node, _, _, err := r.Keep(ctx, offer("tainted"))
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: node.Name}, &got); err != nil || !ours(&got) {
		t.Fatalf("node %s taints %v (%v), want the virtual nodes' taint by default", node.Name, got.Spec.Taints, err)
	}
	got.Spec.Taints = append(got.Spec.Taints, operators)
	if err := c.Update(ctx, &got); err != nil {
		t.Fatal(err)
	}

	r.Untainted = true
	if _, _, _, err := r.Keep(ctx, offer("tainted")); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: node.Name}, &got); err != nil || ours(&got) || !slices.ContainsFunc(got.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&operators) }) {
		t.Errorf("node %s taints %v (%v), want the operator's alone", node.Name, got.Spec.Taints, err)
	}
	fresh, _, _, err := r.Keep(ctx, offer("fresh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: fresh.Name}, &got); err != nil || ours(&got) {
		t.Errorf("new node %s taints %v (%v), want not the virtual nodes'", fresh.Name, got.Spec.Taints, err)
	}

	r.Untainted = false
	if _, _, _, err := r.Keep(ctx, offer("fresh")); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: fresh.Name}, &got); err != nil || !ours(&got) {
		t.Errorf("node %s taints %v (%v), want the virtual nodes' taint back", fresh.Name, got.Spec.Taints, err)
	}
}

// TestOpaqueNodeNames: an aggregating broker names a new virtual node
// liqo-<random>, nothing of its provider's ClusterID or name in it, and
// gives it the same name when it is made again; a name remembered from
// before the names were opaque, which names the provider, is not taken
// again; two providers never share one.
func TestOpaqueNodeNames(t *testing.T) {
	_, c := startInstalled(t)
	ctx := t.Context()
	r := &Reconciler{Client: c, APIReader: c, Health: memory.New(), Opaque: true}
	w := &nodeWorld{c: c}
	offer := func(id string) *provider.Offer {
		return &provider.Offer{Provider: id, Name: "name-of-" + id, Resources: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}
	}
	for _, id := range []string{"provider-a", "provider-b"} {
		fc := w.foreignCluster(t, id)
		fc.Spec.ClusterIdentity.ClusterName = "name-of-" + id
		if err := c.Update(ctx, fc); err != nil {
			t.Fatal(err)
		}
	}
	// provider-b's node was named after it before.
	var fc discoveryv1alpha1.ForeignCluster
	if err := c.Get(ctx, client.ObjectKey{Name: "provider-b"}, &fc); err != nil {
		t.Fatal(err)
	}
	metav1.SetMetaDataAnnotation(&fc.ObjectMeta, offloadingv1alpha1.VirtualNodeNameAnnotation, "liqo-name-of-provider-b")
	if err := c.Update(ctx, &fc); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, id := range []string{"provider-a", "provider-b"} {
		n, _, _, err := r.Keep(ctx, offer(id))
		if err != nil {
			t.Fatal(err)
		}
		names[id] = n.Name
		if len(n.Name) != len("liqo-")+10 || !strings.HasPrefix(n.Name, "liqo-") || strings.Contains(n.Name, id) || strings.Contains(n.Name, "name-of") {
			t.Errorf("%s's virtual node is %s, want liqo- and ten random hexadecimal digits", id, n.Name)
		}
	}
	if names["provider-a"] == names["provider-b"] {
		t.Errorf("both providers' nodes are %s", names["provider-a"])
	}
	// Made again: the same name.
	if err := c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: names["provider-a"]}}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKey{Name: names["provider-a"]}, &corev1.Node{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s still there (%w)", names["provider-a"], err)
		}
		return nil
	})
	n, _, _, err := r.Keep(ctx, offer("provider-a"))
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != names["provider-a"] {
		t.Errorf("provider-a's node made again is %s, want %s", n.Name, names["provider-a"])
	}
}

// TestVirtualNodesOfPools: an offer cut in pools gets one virtual node
// for each, named after the provider's node and the pool's key, with the
// pool's capacity (never more of a resource than the whole offer has),
// the offer's labels and the pool's (the exposed ones alone: a peer
// cannot label the consumer's node beyond them; none the pool lacks),
// and the pool as the node affinity of its pods at the provider; two
// pools of one selector make one node. A pool that goes takes its node
// and the pods bound to it; the others' nodes stay; pools gone, the
// whole offer gets its one node again, of the name it had.
func TestVirtualNodesOfPools(t *testing.T) {
	w := startNodes(t)
	const provider = "broker-1"
	const region, arch = "topology.kubernetes.io/region", "kubernetes.io/arch"
	w.foreignCluster(t, provider)
	adv := w.offer(t, provider, provider)
	ctx := t.Context()
	pool := func(r, cpu string, extra map[string]string) sharingv1alpha1.AdvertisementPool {
		labels := map[string]string{region: r}
		for k, v := range extra {
			labels[k] = v
		}
		return sharingv1alpha1.AdvertisementPool{Labels: labels, Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("10")}}
	}
	setPools := func(pools ...sharingv1alpha1.AdvertisementPool) {
		t.Helper()
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(adv), adv); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(adv.DeepCopy())
		adv.Spec.Pools = pools
		adv.Spec.Labels = map[string]string{arch: "arm64", region: "the offer's"}
		if err := w.c.Patch(ctx, adv, patch); err != nil {
			t.Fatal(err)
		}
	}
	// nodes waits for the provider's virtual nodes to be those of want
	// (pool key → cpu; "" the whole offer's node) and returns them by key.
	nodes := func(want map[string]string) map[string]corev1.Node {
		t.Helper()
		var got map[string]corev1.Node
		envtest.Eventually(t, 15*time.Second, func(ctx context.Context) error {
			all, err := w.virtualNodes(ctx, provider)
			if err != nil {
				return err
			}
			got = map[string]corev1.Node{}
			for _, n := range all {
				if n.DeletionTimestamp != nil {
					return fmt.Errorf("node %s going", n.Name)
				}
				got[n.Labels[offloadingv1alpha1.PoolLabel]] = n
			}
			if len(got) != len(all) || len(got) != len(want) {
				return fmt.Errorf("%d virtual nodes (pools %v), want %d", len(all), slices.Collect(maps.Keys(got)), len(want))
			}
			for key, cpu := range want {
				n, ok := got[key]
				if !ok {
					return fmt.Errorf("no node of pool %q", key)
				}
				if q := n.Status.Capacity[corev1.ResourceCPU]; q.Cmp(resource.MustParse(cpu)) != 0 || Ready(&n) != corev1.ConditionTrue {
					return fmt.Errorf("node %s: cpu %s, Ready %s; want %s, True", n.Name, q.String(), Ready(&n), cpu)
				}
			}
			return nil
		})
		return got
	}
	whole := nodes(map[string]string{"": "4"})[""]
	if PoolAffinity(&whole) != nil {
		t.Errorf("the whole offer's node gives its pods the node affinity %v, want none", PoolAffinity(&whole))
	}

	eu, us := pool("eu", "3", map[string]string{"example.com/secret": "provider-2", "kubernetes.io/hostname": "p2"}), pool("us", "1", nil)
	nowhere := sharingv1alpha1.AdvertisementPool{Absent: []string{region, "example.com/secret"}, Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")}}
	euKey, usKey, nowhereKey := PoolKey(region+"=eu"), PoolKey(region+"=us"), PoolKey("!"+region)
	setPools(eu, us, pool("eu", "5", nil), nowhere)
	got := nodes(map[string]string{euKey: "3", usKey: "1", nowhereKey: "4"})
	for key, r := range map[string]string{euKey: "eu", usKey: "us", nowhereKey: ""} {
		n := got[key]
		if want := whole.Name + "-" + key; n.Name != want {
			t.Errorf("pool %q's node %s, want %s", r, n.Name, want)
		}
		if n.Labels[region] != r || n.Labels[arch] != "arm64" || n.Labels["example.com/secret"] != "" || n.Labels["kubernetes.io/hostname"] != n.Name {
			t.Errorf("pool %q's node labels %v: want its region, the offer's arch, its own hostname and no label not exposed", r, n.Labels)
		}
		want := corev1.NodeSelectorRequirement{Key: region, Operator: corev1.NodeSelectorOpIn, Values: []string{r}}
		if r == "" {
			want = corev1.NodeSelectorRequirement{Key: region, Operator: corev1.NodeSelectorOpDoesNotExist}
		}
		if aff := PoolAffinity(&n); aff == nil || len(aff.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) != 1 ||
			!equality.Semantic.DeepEqual(aff.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions, []corev1.NodeSelectorRequirement{want}) {
			t.Errorf("pool %q's pods' node affinity %+v, want %+v alone", r, aff, want)
		}
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		c, err := w.condition(ctx, provider)
		if err != nil {
			return err
		}
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, got[euKey].Name) || !strings.Contains(c.Message, got[usKey].Name) {
			return fmt.Errorf("VirtualNodeReady %+v, want True, naming both nodes", c)
		}
		return nil
	})

	// A pod on us's node: the pool goes, and its node with the pod.
	bound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "in-us"}, Spec: corev1.PodSpec{
		NodeName: got[usKey].Name, Containers: []corev1.Container{{Name: "c", Image: "pause"}},
	}}
	// No controller manager makes the namespace's service account here.
	if err := w.c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "default"}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	if err := w.c.Create(ctx, bound); err != nil {
		t.Fatal(err)
	}
	setPools(eu)
	after := nodes(map[string]string{euKey: "3"})
	if after[euKey].UID != got[euKey].UID {
		t.Errorf("pool eu's node made again (uid %s, was %s) when another pool went", after[euKey].UID, got[euKey].UID)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(bound), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod %s of the node of the pool gone: %w, want it drained", bound.Name, err)
		}
		return nil
	})

	setPools()
	if back := nodes(map[string]string{"": "4"})[""]; back.Name != whole.Name {
		t.Errorf("the whole offer's node back as %s, want %s", back.Name, whole.Name)
	}
}

// TestPoolNamesAreClaimed: the name of another provider's node, or of a
// pool's node of it (the name, a dash, eight hexadecimal digits), is that
// provider's, remembered or (for a name not yet given) announced.
func TestPoolNamesAreClaimed(t *testing.T) {
	fc := func(id, name, remembered string) discoveryv1alpha1.ForeignCluster {
		f := discoveryv1alpha1.ForeignCluster{Spec: discoveryv1alpha1.ForeignClusterSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: id, ClusterName: name}}}
		if remembered != "" {
			f.Annotations = map[string]string{offloadingv1alpha1.VirtualNodeNameAnnotation: remembered}
		}
		return f
	}
	clusters := []discoveryv1alpha1.ForeignCluster{fc("b-id", "broker", "liqo-broker"), fc("c-id", "other", "")}
	key := PoolKey("topology.kubernetes.io/region=eu")
	for _, tc := range []struct {
		name, by  string
		announced bool
		want      bool
	}{
		{"liqo-broker", "x-id", false, true},
		{"liqo-broker-" + key, "x-id", false, true},
		{"liqo-broker-" + key, "b-id", false, false},
		{"liqo-broker-notakey0", "x-id", false, false},
		{"liqo-broker-" + strings.ToUpper(key), "x-id", false, false},
		{"liqo-other-" + key, "x-id", false, false},
		{"liqo-other-" + key, "x-id", true, true},
		{"liqo-other", "x-id", true, true},
	} {
		if got := claimed(clusters, tc.by, tc.name, tc.announced); got != tc.want {
			t.Errorf("%s, for %s (announced names counting: %v): claimed %v, want %v", tc.name, tc.by, tc.announced, got, tc.want)
		}
	}
}
