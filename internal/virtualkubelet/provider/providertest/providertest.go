// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package providertest is the provider contract (package provider) as a
// test suite that every Providers implementation runs: the in-memory one,
// the remote cluster, and the broker's. What the reflectors' tests show
// against the in-memory provider holds against the others because they
// all pass this suite.
package providertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
)

// Harness is a provider under test and what the suite needs around it.
type Harness struct {
	// Providers is the implementation under test.
	Providers provider.Providers
	// Provider is a provider ID it serves.
	Provider string
	// LocalClusterID labels what the suite writes, as the reflectors do.
	LocalClusterID string
	// Local is the local namespace the suite offloads, and Remote its
	// namespace in the provider, which exists.
	Local, Remote string
	// Node is where the suite's pods are placed in the provider: a pod
	// deleted with grace stays there, terminating, until Remove.
	Node string
	// Stands, if set, makes the local object that the provider copy of
	// kind named name stands for, as the reflectors would have it.
	Stands func(ctx context.Context, kind provider.Kind, name string) error
	// Remove deletes the provider copy of kind named name at once, as
	// the provider's side (a kubelet confirming a pod's end) would.
	Remove func(ctx context.Context, kind provider.Kind, name string) error
	// Measure makes the provider's metrics say that its pod named pod
	// uses usage (the first call sets its metrics up), as metrics-server
	// would; nil for a provider that is no provider.Usage.
	Measure func(ctx context.Context, pod string, at time.Time, usage map[string]corev1.ResourceList) error
}

// podName is the suite's pod, in the local namespace and the provider's.
const podName = "a"

// Timeout bounds each wait of the suite for the provider's cache.
const Timeout = 30 * time.Second

// Run runs the contract against h.
func Run(t *testing.T, h Harness) {
	t.Helper()
	ctx := t.Context()
	events := watch(t, h)
	ns := open(t, h)
	if ns.Provider() != h.Provider || ns.Name() != h.Remote {
		t.Fatalf("the view is of %s/%s, want %s/%s", ns.Provider(), ns.Name(), h.Provider, h.Remote)
	}

	if h.Stands != nil {
		if err := h.Stands(ctx, provider.Pods, podName); err != nil {
			t.Fatal(err)
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.Remote, Name: podName, Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: h.LocalClusterID}},
		Spec: corev1.PodSpec{NodeName: h.Node, Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		}}}},
	}

	t.Log("a create is seen in the cache and announced")
	seen := events.count()
	if err := ns.Create(ctx, pod.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	created := until(t, "the created pod in the cache", func() (*corev1.Pod, bool) {
		p, ok := ns.Get(provider.Pods, podName).(*corev1.Pod)
		return p, ok && p != nil
	})
	if created.UID == "" || created.ResourceVersion == "" {
		t.Fatalf("the cached pod has no UID or resourceVersion: %+v", created.ObjectMeta)
	}
	events.after(t, seen)
	if err := ns.Create(ctx, pod.DeepCopy()); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: %v, want AlreadyExists", err)
	}

	t.Log("an update with the current resourceVersion passes, a stale one conflicts")
	stale := created.DeepCopy()
	fresh := created.DeepCopy()
	fresh.Labels["x"] = "1"
	seen = events.count()
	if err := ns.Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if err := ns.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Errorf("update with a stale resourceVersion: %v, want Conflict", err)
	}
	updated := until(t, "the update in the cache", func() (*corev1.Pod, bool) {
		p, ok := ns.Get(provider.Pods, podName).(*corev1.Pod)
		return p, ok && p != nil && p.Labels["x"] == "1"
	})
	events.after(t, seen)

	t.Log("ephemeral containers are added through their subresource, never by an update")
	withDebugger := updated.DeepCopy()
	withDebugger.Spec.EphemeralContainers = []corev1.EphemeralContainer{{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent},
	}}
	if err := ns.Update(ctx, withDebugger.DeepCopy()); !apierrors.IsInvalid(err) {
		t.Errorf("an update adding an ephemeral container: %v, want Invalid", err)
	}
	seen = events.count()
	if err := ns.UpdateSubresource(ctx, withDebugger.DeepCopy(), provider.SubresourceEphemeralContainers); err != nil {
		t.Fatal(err)
	}
	updated = until(t, "the ephemeral container in the cache", func() (*corev1.Pod, bool) {
		p, ok := ns.Get(provider.Pods, podName).(*corev1.Pod)
		return p, ok && p != nil && len(p.Spec.EphemeralContainers) == 1 && p.Spec.EphemeralContainers[0].Name == "debugger" && p.Labels["x"] == "1"
	})
	events.after(t, seen)

	t.Log("resources change through the resize subresource, never by an update")
	resized := updated.DeepCopy()
	for _, list := range []corev1.ResourceList{resized.Spec.Containers[0].Resources.Requests, resized.Spec.Containers[0].Resources.Limits} {
		list[corev1.ResourceCPU] = resource.MustParse("200m")
	}
	if err := ns.Update(ctx, resized.DeepCopy()); !apierrors.IsInvalid(err) {
		t.Errorf("an update changing a container's resources: %v, want Invalid", err)
	}
	seen = events.count()
	if err := ns.UpdateSubresource(ctx, resized.DeepCopy(), provider.SubresourceResize); err != nil {
		t.Fatal(err)
	}
	if err := ns.UpdateSubresource(ctx, resized.DeepCopy(), provider.SubresourceResize); !apierrors.IsConflict(err) {
		t.Errorf("a resize with a stale resourceVersion: %v, want Conflict", err)
	}
	updated = until(t, "the resized pod in the cache", func() (*corev1.Pod, bool) {
		p, ok := ns.Get(provider.Pods, podName).(*corev1.Pod)
		if !ok || p == nil {
			return nil, false
		}
		r := p.Spec.Containers[0].Resources
		return p, r.Requests.Cpu().MilliValue() == 200 && r.Limits.Cpu().MilliValue() == 200 && r.Requests.Memory().Value() == 64<<20 &&
			len(p.Spec.EphemeralContainers) == 1 && p.Labels["x"] == "1"
	})
	events.after(t, seen)

	t.Log("a delete names its copy by UID")
	if err := ns.Delete(ctx, provider.Pods, podName, "another-uid", nil); err != nil {
		t.Errorf("delete with another UID: %v, want nil", err)
	}
	if err := ns.Delete(ctx, provider.Pods, "never-there", "some-uid", nil); err != nil {
		t.Errorf("delete of a copy that is not there: %v, want nil", err)
	}
	seen = events.count()
	if err := ns.Delete(ctx, provider.Pods, podName, updated.UID, ptr.To[int64](5)); err != nil {
		t.Fatal(err)
	}
	terminating := until(t, "the pod terminating in the cache", func() (*corev1.Pod, bool) {
		p, ok := ns.Get(provider.Pods, podName).(*corev1.Pod)
		return p, ok && p != nil && p.DeletionTimestamp != nil
	})
	if g := ptr.Deref(terminating.DeletionGracePeriodSeconds, 0); g != 5 {
		t.Errorf("a pod deleted with 5 s of grace terminates with %d s", g)
	}
	if terminating.UID != updated.UID {
		t.Errorf("the terminating pod has UID %s, want %s: the other-UID delete removed it", terminating.UID, updated.UID)
	}
	events.after(t, seen)

	t.Log("its end leaves the cache and is announced")
	seen = events.count()
	if err := h.Remove(ctx, provider.Pods, podName); err != nil {
		t.Fatal(err)
	}
	until(t, "the pod gone from the cache", func() (struct{}, bool) {
		return struct{}{}, ns.Get(provider.Pods, podName) == nil
	})
	events.after(t, seen)

	t.Log("of EndpointSlices, the view holds only those the reflectors write")
	for _, es := range []struct{ name, manager string }{{"theirs", "endpointslice-controller.k8s.io"}, {"ours", provider.EndpointSliceManager}} {
		// The provider's controller gives the slices it makes for a
		// Service's copy the copy's labels, the origin among them.
		if err := ns.Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.Remote, Name: es.name, Labels: map[string]string{
				offloadingv1alpha1.OriginClusterLabel: h.LocalClusterID, discoveryv1.LabelServiceName: "svc", discoveryv1.LabelManagedBy: es.manager,
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
		}); err != nil {
			t.Fatal(err)
		}
	}
	until(t, "the reflectors' EndpointSlice in the cache", func() (struct{}, bool) {
		return struct{}{}, ns.Get(provider.EndpointSlices, "ours") != nil
	})
	if ns.Get(provider.EndpointSlices, "theirs") != nil {
		t.Error("the view holds an EndpointSlice the provider's own controller manages")
	}

	t.Log("a kind watched on demand is listed once asked for, and follows its copies")
	until(t, "the view listing PodDisruptionBudgets", func() (struct{}, bool) { return struct{}{}, ns.Watch(provider.PodDisruptionBudgets) })
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.Remote, Name: "budget", Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: h.LocalClusterID}},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{}, MinAvailable: ptr.To(intstr.FromInt32(1))},
	}
	if err := ns.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	budget := until(t, "the created budget in the cache", func() (client.Object, bool) {
		o := ns.Get(provider.PodDisruptionBudgets, pdb.Name)
		return o, o != nil && o.GetUID() != ""
	})
	if err := ns.Delete(ctx, provider.PodDisruptionBudgets, pdb.Name, budget.GetUID(), nil); err != nil {
		t.Fatal(err)
	}
	until(t, "the budget gone from the cache", func() (struct{}, bool) {
		return struct{}{}, ns.Get(provider.PodDisruptionBudgets, pdb.Name) == nil
	})

	if u, ok := h.Providers.(provider.Usage); ok {
		t.Log("usage: none where nothing is measured, then what the provider measured")
		if h.Measure == nil {
			t.Fatal("the provider is a provider.Usage: the harness needs Measure")
		}
		if got, err := u.PodUsage(ctx, h.Provider, h.Remote); !errors.Is(err, provider.ErrNoUsage) {
			t.Errorf("usage with nothing measured: %v, %v; want ErrNoUsage", got, err)
		}
		at := time.Now().Add(-time.Minute).Truncate(time.Second)
		if err := h.Measure(ctx, "measured", at, map[string]corev1.ResourceList{
			"app": {corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("40Mi")},
		}); err != nil {
			t.Fatal(err)
		}
		got := until(t, "the pod's usage", func() (map[string]provider.PodUsage, bool) {
			got, err := u.PodUsage(ctx, h.Provider, h.Remote)
			return got, err == nil && len(got) == 1
		})
		m, ok := got["measured"]
		if !ok || !m.Timestamp.Equal(at) || m.Window != 10*time.Second {
			t.Fatalf("usage %+v, want the pod measured at %s over 10 s", got, at)
		}
		app := m.Containers["app"]
		if app.Cpu().MilliValue() != 250 || app.Memory().Value() != 40<<20 {
			t.Errorf("the container's usage: %v, want 250m and 40Mi", app)
		}
	}

	t.Log("a released view is no longer open")
	if !contains(h.Providers.Open(h.Local), h.Provider) {
		t.Errorf("the view of %s in %s is not open", h.Local, h.Provider)
	}
	h.Providers.Release(h.Local, nil)
	if contains(h.Providers.Open(h.Local), h.Provider) {
		t.Errorf("the view of %s in %s is still open once released", h.Local, h.Provider)
	}
}

// open opens the view, asking again while its cache fills.
func open(t *testing.T, h Harness) provider.Namespace {
	t.Helper()
	return until(t, "the provider namespace's view", func() (provider.Namespace, bool) {
		ns, err := h.Providers.Namespace(t.Context(), h.Provider, h.Local, h.Remote)
		if err != nil && !errors.Is(err, provider.ErrNotSynced) {
			t.Fatalf("opening %s in %s: %v", h.Remote, h.Provider, err)
		}
		return ns, err == nil
	})
}

func contains(views []provider.Namespace, id string) bool {
	for _, v := range views {
		if v.Provider() == id {
			return true
		}
	}
	return false
}

// until polls f every 10 ms until it says done, for at most Timeout.
func until[T any](t *testing.T, what string, f func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		v, done := f()
		if done {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, Timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// counter counts the pod events of the provider, by local object: each
// names the local pod its copy stands for.
type counter struct {
	local string
	mu    sync.Mutex
	n     map[string]int
}

// watch starts the provider's pod events into a counter.
func watch(t *testing.T, h Harness) *counter {
	t.Helper()
	c := &counter{local: h.Local, n: map[string]int{}}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	count := handler.Funcs{GenericFunc: func(_ context.Context, e event.GenericEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.n[e.Object.GetNamespace()+"/"+e.Object.GetName()]++
	}}
	if err := h.Providers.Source(provider.Pods, count).Start(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	return c
}

// count is how many events named the suite's local pod so far.
func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[c.local+"/"+podName]
}

// after waits for an event naming the suite's local pod beyond the first
// seen.
func (c *counter) after(t *testing.T, seen int) {
	t.Helper()
	until(t, "event for the local pod "+c.local+"/"+podName, func() (struct{}, bool) { return struct{}{}, c.count() > seen })
}
