// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package virtualkubelet_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
	"github.com/liqo-go/liqo/internal/network/ipam"
	"github.com/liqo-go/liqo/internal/network/transit"
	"github.com/liqo-go/liqo/internal/network/translation"
	"github.com/liqo-go/liqo/internal/virtualkubelet/claims"
	"github.com/liqo-go/liqo/internal/virtualkubelet/node"
	"github.com/liqo-go/liqo/internal/virtualkubelet/objects"
	"github.com/liqo-go/liqo/internal/virtualkubelet/pods"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider/memory"
)

// The reflectors' world in these tests: one consumer API server with one
// virtual node for provider "provider-1", and the pod and object
// reflectors with the in-memory provider, shared by every test; each test
// offloads a namespace of its own to the provider's namespace
// consumer-<namespace>.
const (
	testConsumer = "consumer-1"
	testProvider = "provider-1"
	testNode     = "liqo-provider-1"
)

var shared struct {
	c   client.Client
	mgr ctrl.Manager
	mem *memory.Providers
	n   int
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if testing.Short() {
		return m.Run() // every test skips
	}
	cfg, stop, err := envtest.StartShared("consumer")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the API server:", err)
		}
	}()
	ctx := context.Background()
	if err := install.Install(ctx, cfg, install.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if shared.c, err = client.New(cfg, client.Options{Scheme: api.NewScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The admission policies for consumers' pods read this cluster's
	// ClusterConfig, which a controller manager always makes.
	if err := shared.c.Create(ctx, &configv1alpha1.ClusterConfig{ObjectMeta: metav1.ObjectMeta{Name: configv1alpha1.ClusterConfigName}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	shared.mem = memory.New()
	// The controller manager's cache: what consumers store here is not
	// in it.
	var stopManager func() error
	shared.mgr, stopManager, err = envtest.RunManager(cfg, func(mgr ctrl.Manager) error {
		if err := node.IndexPods(ctx, mgr); err != nil {
			return err
		}
		if err := objects.IndexPodsBySecret(ctx, mgr); err != nil {
			return err
		}
		alloc := &transit.Allocator{Client: mgr.GetClient(), Live: mgr.GetAPIReader()}
		if err := (&pods.Reflector{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Providers: shared.mem, LocalClusterID: testConsumer, Workers: 4,
			Translate: translation.FromPeers(mgr.GetClient()),
			Agreed:    translation.Agreed(mgr.GetClient()),
			Transit:   alloc,
		}).SetupWithManager(mgr); err != nil {
			return err
		}
		if err := (&claims.Reflector{Client: mgr.GetClient(), Providers: shared.mem, LocalClusterID: testConsumer}).SetupWithManager(mgr); err != nil {
			return err
		}
		consumers, err := objects.ConsumersCache(mgr.GetConfig(), mgr.GetScheme(), mgr.GetRESTMapper())
		if err != nil {
			return err
		}
		if err := mgr.Add(consumers); err != nil {
			return err
		}
		for _, r := range objects.NewReflectors(mgr.GetClient(), shared.mem, testConsumer, translation.ToPeers(mgr.GetClient())) {
			r.Consumers, r.Live = consumers, mgr.GetAPIReader()
			r.Orchestrator = objects.AdvertisedOrchestrator(mgr.GetClient())
			r.Transit = alloc
			if err := r.SetupWithManager(mgr); err != nil {
				return err
			}
		}
		return nil
	}, func(o *ctrl.Options) { o.Cache = withoutConsumersObjects() })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := stopManager(); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	vnode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: map[string]string{
		offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue, offloadingv1alpha1.RemoteClusterLabel: testProvider,
	}}}
	if err := shared.c.Create(ctx, vnode); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// aggregate makes the test's namespace a consumer's aggregated here,
// and agrees a network with the provider and with each of consumers:
// their pods are 10.91.0.0/16 as seen here, this cluster's external range
// is 10.70.0.0/16 (the provider sees it as 10.12.0.0/16).
func (w *reflectorWorld) aggregate(t *testing.T, consumer string, others ...string) {
	t.Helper()
	ctx := t.Context()
	ensureTunnel(t, w.c)
	for _, id := range append([]string{consumer}, others...) {
		tep := &netv1alpha1.TunnelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: netv1alpha1.TunnelEndpointSpec{
			ClusterID: id, PublicKey: "Ljk0kCqrl1KXUj2gN4wrxCu5ewcoPuVX3k0o6hMkRWg=",
			Remote:       netv1alpha1.Ranges{PodCIDR: "10.100.0.0/16", ExternalCIDR: "10.70.0.0/16"},
			RemoteSeenAs: netv1alpha1.Ranges{PodCIDR: "10.91.0.0/16", ExternalCIDR: "10.92.0.0/16"},
			Local:        &netv1alpha1.Ranges{PodCIDR: "10.100.0.0/14", ExternalCIDR: "10.70.0.0/16"},
			LocalSeenAs:  &netv1alpha1.Ranges{PodCIDR: "10.8.0.0/14", ExternalCIDR: "10.12.0.0/16"},
		}}
		if err := w.c.Create(ctx, tep); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	var ns corev1.Namespace
	if err := w.c.Get(ctx, client.ObjectKey{Name: w.localNS}, &ns); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ns.DeepCopy())
	metav1.SetMetaDataLabel(&ns.ObjectMeta, offloadingv1alpha1.OriginClusterLabel, consumer)
	if err := w.c.Patch(ctx, &ns, patch); err != nil {
		t.Fatal(err)
	}
	var no offloadingv1alpha1.NamespaceOffloading
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.localNS, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(no.DeepCopy())
	metav1.SetMetaDataLabel(&no.ObjectMeta, brokerv1alpha1.AggregatedLabel, "true")
	if err := w.c.Patch(ctx, &no, patch); err != nil {
		t.Fatal(err)
	}
}

// TestProvidersReachAggregatedConsumersEndpointsThroughHere: on an
// aggregator, a consumer's copy of its slice goes to the provider running
// the consumer's pods with the consumer's own endpoints at addresses of
// this cluster's external range (as the provider sees it), which the
// provider's TunnelEndpoint, not the consumer's, routes to them; an
// address the consumer names outside its own pods (the provider's range,
// anywhere else) leads nowhere; the routes follow the slice and go with
// it.
func TestProvidersReachAggregatedConsumersEndpointsThroughHere(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	const consumer = "aggregated-consumer"
	w.aggregate(t, consumer)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "db-theirs", Labels: map[string]string{
			offloadingv1alpha1.OriginClusterLabel: consumer,
			discoveryv1.LabelServiceName:          "db", discoveryv1.LabelManagedBy: objects.EndpointSliceManager,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("sql"), Port: ptr.To[int32](5432)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.91.0.7"}},  // the consumer's pod, as seen here
			{Addresses: []string{"10.51.0.77"}}, // the provider's range, no pod of the namespace
			{Addresses: []string{"10.60.0.9"}},  // nobody's
		},
	}
	if err := w.c.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}
	key := slice.Namespace + "/" + slice.Name
	routes := func(ctx context.Context, id string) ([]netv1alpha1.TransitRoute, error) {
		return w.transitRoutes(ctx, id, func(r netv1alpha1.TransitRoute) bool { return r.EndpointSlice == key })
	}
	copied := func(target string) {
		t.Helper()
		envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
			obj := w.mem.Object(testProvider, provider.EndpointSlices, w.remoteNS, slice.Name)
			if obj == nil {
				return errors.New("no copy of the consumer's slice at the provider")
			}
			var got []string
			for _, ep := range obj.(*discoveryv1.EndpointSlice).Endpoints {
				got = append(got, ep.Addresses...)
			}
			r, err := routes(ctx, testProvider)
			if err != nil {
				return err
			}
			if len(got) != 1 || len(r) != 1 {
				return fmt.Errorf("the copy lists %v, the provider's routes %+v; want one address, routed", got, r)
			}
			// Host bits kept: 10.12.x.y at the provider is 10.70.x.y here.
			seen, here := netip.MustParseAddr(got[0]).As4(), netip.MustParseAddr(r[0].Address).As4()
			if seen[0] != 10 || seen[1] != 12 || here[0] != 10 || here[1] != 70 || seen[2] != here[2] || seen[3] != here[3] {
				return fmt.Errorf("the copy lists %s, the route is at %s: want the same address of the external range, as the provider sees it", got[0], r[0].Address)
			}
			if r[0].Target != target || r[0].Provider != consumer {
				return fmt.Errorf("the provider's route: %+v; want it to %s at %s", r[0], target, consumer)
			}
			return nil
		})
	}
	copied("10.91.0.7")
	if r, err := routes(ctx, consumer); err != nil || len(r) != 0 {
		t.Errorf("the consumer's TunnelEndpoint has routes for its slice: %+v, %v", r, err)
	}
	// The endpoint moves: the route follows.
	patch := client.MergeFrom(slice.DeepCopy())
	slice.Endpoints[0].Addresses = []string{"10.91.0.8"}
	if err := w.c.Patch(ctx, slice, patch); err != nil {
		t.Fatal(err)
	}
	copied("10.91.0.8")
	if err := w.c.Delete(ctx, slice); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if r, err := routes(ctx, testProvider); err != nil {
			return err
		} else if len(r) != 0 {
			return fmt.Errorf("the slice went; the provider's routes for it: %+v", r)
		}
		if w.mem.Object(testProvider, provider.EndpointSlices, w.remoteNS, slice.Name) != nil {
			return errors.New("the slice went; its copy is still at the provider")
		}
		return nil
	})
}

// withoutConsumersObjects is the controller manager's cache as far as
// the reflectors go: the objects a consumer stores here (labelled with
// its origin) are not in it.
func withoutConsumersObjects() cache.Options {
	theirs, err := labels.NewRequirement(offloadingv1alpha1.OriginClusterLabel, selection.DoesNotExist, nil)
	if err != nil {
		panic(err)
	}
	own := cache.ByObject{Label: labels.NewSelector().Add(*theirs)}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: own, &corev1.ConfigMap{}: own, &corev1.Service{}: own, &discoveryv1.EndpointSlice{}: own,
	}}
}

type reflectorWorld struct {
	c                 client.Client
	mem               *memory.Providers
	localNS, remoteNS string
}

// startReflectors gives the test a namespace offloaded to the provider.
func startReflectors(t *testing.T) *reflectorWorld {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real API server; skipped with -short")
	}
	shared.n++
	w := &reflectorWorld{c: shared.c, mem: shared.mem, localNS: fmt.Sprintf("web-%d", shared.n)}
	w.remoteNS = "consumer-" + w.localNS
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.localNS}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "default"}}
	no := &offloadingv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: offloadingv1alpha1.NamespaceOffloadingName}}
	for _, obj := range []client.Object{ns, sa, no} {
		if err := w.c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	no.Status.RemoteNamespaces = []offloadingv1alpha1.RemoteNamespaceStatus{{
		ClusterID: testProvider, Namespace: w.remoteNS, Phase: offloadingv1alpha1.RemoteNamespaceReady,
	}}
	if err := w.c.Status().Update(ctx, no); err != nil {
		t.Fatal(err)
	}
	return w
}

// transitRoutes are the transit routes of the TunnelEndpoint of peer id
// that keep says are the test's.
func (w *reflectorWorld) transitRoutes(ctx context.Context, id string, keep func(netv1alpha1.TransitRoute) bool) ([]netv1alpha1.TransitRoute, error) {
	var tep netv1alpha1.TunnelEndpoint
	if err := w.c.Get(ctx, client.ObjectKey{Name: id}, &tep); err != nil {
		return nil, err
	}
	var out []netv1alpha1.TransitRoute
	if tep.Spec.Transit != nil {
		for _, r := range tep.Spec.Transit.Routes {
			if keep(r) {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// offloadedPod creates a pod bound to the virtual node.
func (w *reflectorWorld) offloadedPod(t *testing.T, name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName: testNode, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "main", Image: "registry.example/app:1"}},
		},
	}
	for _, m := range mutate {
		m(pod)
	}
	if err := w.c.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// remotePod waits for the provider pod of name, and returns it.
func (w *reflectorWorld) remotePod(t *testing.T, name string, check func(*corev1.Pod) error) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		obj := w.mem.Object(testProvider, provider.Pods, w.remoteNS, name)
		if obj == nil {
			return fmt.Errorf("no provider pod %s/%s", w.remoteNS, name)
		}
		pod = obj.(*corev1.Pod)
		if check != nil {
			return check(pod)
		}
		return nil
	})
	return pod
}

func (w *reflectorWorld) podOps(verb, name string) []memory.Op {
	var out []memory.Op
	for _, op := range w.mem.Ops() {
		if op.Verb == verb && op.Kind == provider.Pods && op.Namespace == w.remoteNS && op.Name == name {
			out = append(out, op)
		}
	}
	return out
}

func (w *reflectorWorld) running(t *testing.T, name, ip string) {
	t.Helper()
	if err := w.mem.Change(testProvider, provider.Pods, w.remoteNS, name, func(o client.Object) {
		pod := o.(*corev1.Pod)
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}); err != nil {
		t.Fatal(err)
	}
}

// TestPodReflection: a pod bound to the virtual node runs as one provider
// pod (one create), forged for the provider; the provider's status flows
// back to the local pod.
func TestPodReflection(t *testing.T) {
	w := startReflectors(t)
	createdBefore, statusBefore := reflections(t, pods.StepCreate), reflections(t, pods.StepStatus)
	pod := w.offloadedPod(t, "web-1")
	remote := w.remotePod(t, pod.Name, nil)
	if got := remote.Labels[offloadingv1alpha1.OriginClusterLabel]; got != testConsumer {
		t.Errorf("provider pod's origin cluster label %q, want %q", got, testConsumer)
	}
	if got := remote.Annotations[offloadingv1alpha1.OriginUIDAnnotation]; got != string(pod.UID) {
		t.Errorf("provider pod's origin UID %q, want %q", got, pod.UID)
	}
	if remote.Spec.NodeName != "" || remote.Spec.ServiceAccountName != "" {
		t.Errorf("provider pod keeps the consumer's node %q or service account %q", remote.Spec.NodeName, remote.Spec.ServiceAccountName)
	}
	ensureTunnel(t, w.c)
	w.running(t, pod.Name, "10.201.0.7")
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP != "10.51.0.7" {
			return fmt.Errorf("local pod %s with IP %q, want Running with the provider's 10.201.0.7 as seen here, 10.51.0.7", pod.Status.Phase, pod.Status.PodIP)
		}
		return nil
	})
	if n := len(w.podOps("create", pod.Name)); n != 1 {
		t.Errorf("%d creates of the provider pod, want 1", n)
	}
	// Both steps were timed (other tests may add theirs).
	if created, status := reflections(t, pods.StepCreate)-createdBefore, reflections(t, pods.StepStatus)-statusBefore; created < 1 || status < 1 {
		t.Errorf("reflection latency observed %d creates and %d status changes, want at least one of each", created, status)
	}
}

// reflections is how many of step's latencies were observed so far.
func reflections(t *testing.T, step string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := pods.ReflectionSeconds.WithLabelValues(step).(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// TestPodAddressesTranslated: a provider pod whose range the network
// fabric remapped shows at the address this cluster reaches it at, also
// when the agreement comes after the pod runs (before it, no address is
// shown); an address outside the agreed ranges is never shown, nor is the
// provider's node address; a condition says why.
func TestPodAddressesTranslated(t *testing.T) {
	w := startReflectors(t)
	// No agreement yet (another test may have made one).
	if err := w.c.Delete(t.Context(), &netv1alpha1.TunnelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: testProvider}}); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	pod := w.offloadedPod(t, "remapped")
	w.remotePod(t, pod.Name, nil)
	w.running(t, pod.Name, "10.201.3.9")
	// The provider's node address is never shown (the host shown is the
	// virtual node's).
	if err := w.mem.Change(testProvider, provider.Pods, w.remoteNS, pod.Name, func(o client.Object) {
		p := o.(*corev1.Pod)
		p.Status.HostIP, p.Status.HostIPs = "192.168.7.7", []corev1.HostIP{{IP: "192.168.7.7"}}
	}); err != nil {
		t.Fatal(err)
	}
	shows := func(pod *corev1.Pod, ip, reason string) {
		t.Helper()
		envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
			if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			var cond *corev1.PodCondition
			for i := range pod.Status.Conditions {
				if pod.Status.Conditions[i].Type == offloadingv1alpha1.ConditionPodAddress {
					cond = &pod.Status.Conditions[i]
				}
			}
			want := 1
			if ip == "" {
				want = 0
			}
			if pod.Status.PodIP != ip || len(pod.Status.PodIPs) != want || want == 1 && pod.Status.PodIPs[0].IP != ip ||
				cond == nil || cond.Reason != reason || pod.Status.HostIP == "192.168.7.7" {
				return fmt.Errorf("local pod shows %q %v, host %q, condition %+v; want %q, not the provider's host, reason %s", pod.Status.PodIP, pod.Status.PodIPs, pod.Status.HostIP, cond, ip, reason)
			}
			return nil
		})
	}
	// Before any agreement: the provider's address is not reachable, and
	// not shown.
	shows(pod, "", offloadingv1alpha1.ReasonNoNetwork)
	ensureTunnel(t, w.c)
	shows(pod, "10.51.3.9", offloadingv1alpha1.ReasonAddressTranslated)

	// A provider that reports an address outside its agreed ranges (this
	// cluster's own service range, say) points nothing here at it.
	elsewhere := w.offloadedPod(t, "elsewhere")
	w.remotePod(t, elsewhere.Name, nil)
	if err := w.mem.Change(testProvider, provider.Pods, w.remoteNS, elsewhere.Name, func(o client.Object) {
		p := o.(*corev1.Pod)
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP, p.Status.PodIPs = "10.96.0.10", []corev1.PodIP{{IP: "10.96.0.10"}, {IP: "10.201.3.10"}}
		p.Status.HostIP, p.Status.HostIPs = "10.0.0.1", []corev1.HostIP{{IP: "10.0.0.1"}}
	}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(elsewhere), elsewhere); err != nil {
			return err
		}
		for _, c := range elsewhere.Status.Conditions {
			if c.Type == offloadingv1alpha1.ConditionPodAddress && c.Reason == offloadingv1alpha1.ReasonAddressOutsideRanges &&
				strings.Contains(c.Message, "10.96.0.10") && elsewhere.Status.PodIP == "10.51.3.10" &&
				len(elsewhere.Status.PodIPs) == 1 && elsewhere.Status.HostIP != "10.0.0.1" && len(elsewhere.Status.HostIPs) <= 1 {
				return nil
			}
		}
		return fmt.Errorf("local pod shows %q %v, host %q, conditions %+v; want only 10.51.3.10, not the provider's host, and why", elsewhere.Status.PodIP,
			elsewhere.Status.PodIPs, elsewhere.Status.HostIP, elsewhere.Status.Conditions)
	})
}

// ensureTunnel makes the provider's TunnelEndpoint, as the network fabric
// agrees it: the provider's pods 10.201.0.0/16 seen here as 10.51.0.0/16,
// this cluster's 10.100.0.0/14 seen there as 10.8.0.0/14. It stays for
// every test: no other test's pod or endpoint is in those ranges.
func ensureTunnel(t *testing.T, c client.Client) {
	t.Helper()
	tep := &netv1alpha1.TunnelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: testProvider}, Spec: netv1alpha1.TunnelEndpointSpec{
		ClusterID: testProvider, PublicKey: "Ljk0kCqrl1KXUj2gN4wrxCu5ewcoPuVX3k0o6hMkRWg=",
		Remote:       netv1alpha1.Ranges{PodCIDR: "10.201.0.0/16", ExternalCIDR: "10.202.0.0/16"},
		RemoteSeenAs: netv1alpha1.Ranges{PodCIDR: "10.51.0.0/16", ExternalCIDR: "10.52.0.0/16"},
		Local:        &netv1alpha1.Ranges{PodCIDR: "10.100.0.0/14", ExternalCIDR: "10.70.0.0/16"},
		LocalSeenAs:  &netv1alpha1.Ranges{PodCIDR: "10.8.0.0/14", ExternalCIDR: "10.12.0.0/16"},
	}}
	if err := c.Create(t.Context(), tep); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// sliceCopied waits for the provider copy of slice to list the addresses
// want, with slice's service name and ports, managed by the virtual
// kubelet.
func (w *reflectorWorld) sliceCopied(t *testing.T, slice *discoveryv1.EndpointSlice, want ...string) {
	t.Helper()
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		obj := w.mem.Object(testProvider, provider.EndpointSlices, w.remoteNS, slice.Name)
		if obj == nil {
			return fmt.Errorf("no copy of the slice in %s", w.remoteNS)
		}
		es := obj.(*discoveryv1.EndpointSlice)
		var got []string
		for _, ep := range es.Endpoints {
			got = append(got, ep.Addresses...)
		}
		if !slices.Equal(got, want) || es.Labels[discoveryv1.LabelManagedBy] != objects.EndpointSliceManager ||
			es.Labels[discoveryv1.LabelServiceName] != slice.Labels[discoveryv1.LabelServiceName] || !equality.Semantic.DeepEqual(es.Ports, slice.Ports) {
			return fmt.Errorf("the copy: addresses %v, labels %v, ports %+v; want addresses %v", got, es.Labels, es.Ports, want)
		}
		return nil
	})
}

// TestEndpointSlicesReflected: the endpoints a Service has in this
// cluster reach the provider at the addresses the provider reaches them
// at; those on a virtual node (the provider's own pods, or another
// provider's) and those outside this cluster's pods do not; the copy
// follows the slice and goes with it.
func TestEndpointSlicesReflected(t *testing.T) {
	w := startReflectors(t)
	ensureTunnel(t, w.c)
	ctx := t.Context()
	ready := discoveryv1.EndpointConditions{Ready: ptr.To(true)}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "web-abcde", Labels: map[string]string{
			discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.100.0.5"}, NodeName: ptr.To("real-node"), Conditions: ready},
			{Addresses: []string{"10.51.0.9"}, NodeName: ptr.To(testNode), Conditions: ready},
			{Addresses: []string{"192.168.7.7"}, NodeName: ptr.To("real-node"), Conditions: ready},
		},
	}
	if err := w.c.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}
	copied := func(want ...string) { t.Helper(); w.sliceCopied(t, slice, want...) }
	copied("10.8.0.5")
	// The provider's EndpointSlice controller makes slices of its own for
	// the Service's copy, with the copy's labels (the origin label too):
	// they are the provider's, and stay.
	theirs := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.remoteNS, Name: "web-prov1", Labels: map[string]string{
			offloadingv1alpha1.OriginClusterLabel: testConsumer,
			discoveryv1.LabelServiceName:          "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.200.0.3"}, Conditions: ready}},
	}
	if err := w.mem.Put(testProvider, theirs); err != nil {
		t.Fatal(err)
	}
	envtest.Consistently(t, 2*time.Second, func(context.Context) error {
		if w.mem.Object(testProvider, provider.EndpointSlices, w.remoteNS, theirs.Name) == nil {
			return errors.New("the reflector deleted the provider's own EndpointSlice")
		}
		return nil
	})
	patch := client.MergeFrom(slice.DeepCopy())
	slice.Endpoints[0].Addresses = []string{"10.101.2.3"}
	if err := w.c.Patch(ctx, slice, patch); err != nil {
		t.Fatal(err)
	}
	copied("10.9.2.3")
	if err := w.c.Delete(ctx, slice); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		if w.mem.Object(testProvider, provider.EndpointSlices, w.remoteNS, slice.Name) != nil {
			return errors.New("the copy is still in the provider")
		}
		return nil
	})
}

// TestHandMadeEndpointSlicesReflected: a slice made by hand for a
// Service without a selector (the conformance suite's, a user's) reaches
// the provider with this cluster's own addresses as the provider reaches
// them, and the namespace's pods the provider runs at the provider's own
// addresses, as soon as they have one; any other address stays here.
func TestHandMadeEndpointSlicesReflected(t *testing.T) {
	w := startReflectors(t)
	ensureTunnel(t, w.c)
	ctx := t.Context()
	backend := w.offloadedPod(t, "backend")
	w.remotePod(t, backend.Name, nil)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "custom-1", Labels: map[string]string{
			discoveryv1.LabelServiceName: "custom", discoveryv1.LabelManagedBy: "e2e-test" + w.localNS,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("port80"), Port: ptr.To[int32](8090)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.51.0.20"}}, // the backend's, once it runs
			{Addresses: []string{"10.100.0.6"}}, // a pod of this cluster
			{Addresses: []string{"10.51.0.99"}}, // the provider's range as seen here, no pod of the namespace
			{Addresses: []string{"192.168.1.1"}},
		},
	}
	if err := w.c.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}
	w.sliceCopied(t, slice, "10.8.0.6")
	// The backend runs: its address there joins the copy.
	w.running(t, backend.Name, "10.201.0.20")
	w.sliceCopied(t, slice, "10.201.0.20", "10.8.0.6")
}

// TestPodDriftIsCorrected: a provider pod whose labels or image someone in
// the provider changed is set back; a label changed on the local pod
// reaches the provider pod.
func TestPodDriftIsCorrected(t *testing.T) {
	w := startReflectors(t)
	pod := w.offloadedPod(t, "web-1")
	w.remotePod(t, pod.Name, nil)
	if err := w.mem.Change(testProvider, provider.Pods, w.remoteNS, pod.Name, func(o client.Object) {
		p := o.(*corev1.Pod)
		p.Labels["app"] = "someone-else"
		p.Spec.Containers[0].Image = "registry.example/other:6"
	}); err != nil {
		t.Fatal(err)
	}
	w.remotePod(t, pod.Name, func(p *corev1.Pod) error {
		if p.Labels["app"] != "web-1" || p.Spec.Containers[0].Image != "registry.example/app:1" {
			return fmt.Errorf("provider pod still drifted: app=%q image %q", p.Labels["app"], p.Spec.Containers[0].Image)
		}
		return nil
	})

	patch := client.MergeFrom(pod.DeepCopy())
	pod.Labels["tier"] = "front"
	if err := w.c.Patch(t.Context(), pod, patch); err != nil {
		t.Fatal(err)
	}
	w.remotePod(t, pod.Name, func(p *corev1.Pod) error {
		if p.Labels["tier"] != "front" {
			return fmt.Errorf("provider pod labels %v, want tier=front from the local pod", p.Labels)
		}
		return nil
	})

	// Annotations (which the downward API shows) and the active deadline
	// follow the local pod; what the provider annotated itself stays.
	if err := w.mem.Change(testProvider, provider.Pods, w.remoteNS, pod.Name, func(o client.Object) {
		o.(*corev1.Pod).Annotations["provider.example/sidecar"] = "injected"
	}); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(pod.DeepCopy())
	metav1.SetMetaDataAnnotation(&pod.ObjectMeta, "example.com/build", "42")
	metav1.SetMetaDataAnnotation(&pod.ObjectMeta, "example.com/gone", "soon")
	pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](3600)
	if err := w.c.Patch(t.Context(), pod, patch); err != nil {
		t.Fatal(err)
	}
	w.remotePod(t, pod.Name, func(p *corev1.Pod) error {
		if p.Annotations["example.com/build"] != "42" || p.Annotations["example.com/gone"] != "soon" || ptr.Deref(p.Spec.ActiveDeadlineSeconds, 0) != 3600 {
			return fmt.Errorf("provider pod annotations %v, deadline %v; want the local pod's", p.Annotations, p.Spec.ActiveDeadlineSeconds)
		}
		return nil
	})
	patch = client.MergeFrom(pod.DeepCopy())
	delete(pod.Annotations, "example.com/gone")
	pod.Annotations["example.com/build"] = "43"
	if err := w.c.Patch(t.Context(), pod, patch); err != nil {
		t.Fatal(err)
	}
	w.remotePod(t, pod.Name, func(p *corev1.Pod) error {
		_, gone := p.Annotations["example.com/gone"]
		if p.Annotations["example.com/build"] != "43" || gone || p.Annotations["provider.example/sidecar"] != "injected" {
			return fmt.Errorf("provider pod annotations %v; want build=43, no gone, the provider's sidecar kept", p.Annotations)
		}
		return nil
	})
	if n := len(w.podOps("create", pod.Name)); n != 1 {
		t.Errorf("%d creates of the provider pod, want 1 (corrections update it)", n)
	}
}

// TestPodDeletionWithGrace: deleting the local pod deletes the provider
// pod with the same grace period, and the local pod goes only once the
// provider pod is gone, as a kubelet confirms a deletion.
func TestPodDeletionWithGrace(t *testing.T) {
	w := startReflectors(t)
	pod := w.offloadedPod(t, "web-1", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30) })
	w.remotePod(t, pod.Name, nil)
	w.running(t, pod.Name, "10.200.0.8")

	if err := w.c.Delete(t.Context(), pod, client.GracePeriodSeconds(7)); err != nil {
		t.Fatal(err)
	}
	w.remotePod(t, pod.Name, func(p *corev1.Pod) error {
		if p.DeletionTimestamp == nil {
			return errors.New("provider pod not being deleted")
		}
		if g := ptr.Deref(p.DeletionGracePeriodSeconds, -1); g != 7 {
			return fmt.Errorf("provider pod deleted with grace %d s, want the local pod's 7", g)
		}
		return nil
	})
	// The provider pod is still stopping: the local pod stays.
	envtest.Consistently(t, time.Second, func(ctx context.Context) error {
		return w.c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
	})
	w.mem.Remove(testProvider, provider.Pods, w.remoteNS, pod.Name) // its containers stopped
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		return errors.New("local pod still there once the provider pod is gone")
	})
	if n := len(w.podOps("delete", pod.Name)); n != 1 {
		t.Errorf("%d deletes of the provider pod, want 1", n)
	}
}

// TestPodDeletedInProviderComesBack: a provider pod someone else deleted,
// or lost when the provider restarted, is created again.
func TestPodDeletedInProviderComesBack(t *testing.T) {
	w := startReflectors(t)
	pod := w.offloadedPod(t, "web-1")
	first := w.remotePod(t, pod.Name, nil)

	w.mem.Remove(testProvider, provider.Pods, w.remoteNS, pod.Name)
	second := w.remotePod(t, pod.Name, func(p *corev1.Pod) error {
		if p.UID == first.UID {
			return errors.New("still the first provider pod")
		}
		return nil
	})

	w.mem.Restart(testProvider)
	w.remotePod(t, pod.Name, func(p *corev1.Pod) error {
		if p.UID == second.UID {
			return errors.New("still the provider pod from before the restart")
		}
		return nil
	})
}

// TestOrphanProviderPodIsDeleted: a provider pod this cluster made for a
// local pod that no longer exists (it was deleted while the virtual
// kubelet was down) is deleted, and so is a provider pod made for an older
// pod of the same name; the current pod's stays.
func TestOrphanProviderPodIsDeleted(t *testing.T) {
	w := startReflectors(t)
	pod := w.offloadedPod(t, "web-1")
	w.remotePod(t, pod.Name, nil) // the namespace's view is open

	orphan := pods.RemotePod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "gone", UID: "uid-of-a-deleted-pod"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "x"}}},
	}, w.remoteNS, testConsumer)
	if err := w.mem.Put(testProvider, orphan); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		if n := len(w.podOps("delete", "gone")); n == 0 {
			return errors.New("the orphan provider pod was not deleted")
		}
		return nil
	})
	if ops := w.podOps("delete", pod.Name); len(ops) != 0 {
		t.Errorf("the current pod's provider pod was deleted too: %+v", ops)
	}
}

// TestPodMadeAnewAlthoughItsOrphanCannotGo: a pod made anew in another
// provider (a broker's failover) is reflected there at once, although
// the provider pod its name had in a provider that does not answer cannot
// be deleted yet; that orphan goes once the provider answers.
func TestPodMadeAnewAlthoughItsOrphanCannotGo(t *testing.T) {
	const other, otherNode = "provider-2", "liqo-provider-2"
	w := startReflectors(t)
	ctx := t.Context()
	vnode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: otherNode, Labels: map[string]string{
		offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue, offloadingv1alpha1.RemoteClusterLabel: other,
	}}}
	if err := w.c.Create(ctx, vnode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.c.Delete(context.Background(), vnode) })
	var no offloadingv1alpha1.NamespaceOffloading
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.localNS, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
		t.Fatal(err)
	}
	no.Status.RemoteNamespaces = append(no.Status.RemoteNamespaces, offloadingv1alpha1.RemoteNamespaceStatus{
		ClusterID: other, Namespace: w.remoteNS, Phase: offloadingv1alpha1.RemoteNamespaceReady})
	if err := w.c.Status().Update(ctx, &no); err != nil {
		t.Fatal(err)
	}
	// web-1 ran at provider-1, which stops answering; the broker deleted
	// it and the consumer made it anew, now at provider-2.
	old := w.offloadedPod(t, "web-1")
	w.remotePod(t, old.Name, nil)
	t.Cleanup(func() { w.mem.Refuse(testProvider, nil) })
	w.mem.Refuse(testProvider, errors.New("connection refused"))
	if err := w.c.Delete(ctx, old, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(old), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the old pod is still there (%w)", err)
		}
		return nil
	})
	anew := w.offloadedPod(t, "web-1", func(p *corev1.Pod) { p.Spec.NodeName = otherNode })
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		obj := w.mem.Object(other, provider.Pods, w.remoteNS, anew.Name)
		if obj == nil {
			return errors.New("the pod made anew is not in provider-2, held up by its orphan in provider-1")
		}
		if uid := obj.GetAnnotations()[offloadingv1alpha1.OriginUIDAnnotation]; uid != string(anew.UID) {
			return fmt.Errorf("provider-2's pod is for UID %s, want %s", uid, anew.UID)
		}
		return nil
	})
	if w.mem.Object(testProvider, provider.Pods, w.remoteNS, old.Name) == nil {
		t.Fatal("the orphan in provider-1 went although provider-1 refuses every write")
	}
	// provider-1 answers again: its watch, established anew, shows the
	// orphan again, as a relist does.
	w.mem.Refuse(testProvider, nil)
	if err := w.mem.Change(testProvider, provider.Pods, w.remoteNS, old.Name, func(o client.Object) {
		a := o.GetAnnotations()
		a["relisted"] = "true"
		o.SetAnnotations(a)
	}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		// Deleted: gone, or going (the provider's kubelet stops it).
		if o := w.mem.Object(testProvider, provider.Pods, w.remoteNS, old.Name); o != nil && o.GetDeletionTimestamp() == nil {
			return errors.New("the orphan in provider-1 is still there once it answers")
		}
		return nil
	})
}

// TestOlderProviderPodIsNotAdopted: a provider pod of the same name made
// for an older pod is not taken for this pod's, even when a provider
// before it does not answer: it is deleted, and this pod is made once it
// is gone.
func TestOlderProviderPodIsNotAdopted(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	// A pod of this namespace keeps provider-1's view open; provider-1
	// then refuses every write.
	w.offloadedPod(t, "opener")
	w.remotePod(t, "opener", nil)
	older := pods.RemotePod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "web-1", UID: "uid-of-an-older-pod"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "x"}}},
	}, w.remoteNS, testConsumer)
	older.Status.Phase = corev1.PodRunning
	if err := w.mem.Put(testProvider, older); err != nil {
		t.Fatal(err)
	}
	pod := w.offloadedPod(t, "web-1")
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		o := w.mem.Object(testProvider, provider.Pods, w.remoteNS, "web-1")
		if o == nil || o.GetDeletionTimestamp() == nil {
			return errors.New("the older provider pod of web-1 is not being deleted")
		}
		return nil
	})
	var got corev1.Pod
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase == corev1.PodRunning {
		t.Errorf("web-1 shows the older provider pod's status: %s", got.Status.Phase)
	}
	w.mem.Remove(testProvider, provider.Pods, w.remoteNS, "web-1") // its containers stopped
	w.remotePod(t, "web-1", func(p *corev1.Pod) error {
		if uid := p.Annotations[offloadingv1alpha1.OriginUIDAnnotation]; uid != string(pod.UID) {
			return fmt.Errorf("provider pod for UID %s, want %s", uid, pod.UID)
		}
		return nil
	})
}

// TestRefusedPodFails: a pod the provider refuses for good (an invalid
// spec, its Pod Security level) fails with reason ProviderRejected instead
// of being retried forever; a refusal that may pass later is retried.
func TestRefusedPodFails(t *testing.T) {
	w := startReflectors(t)
	t.Cleanup(func() { w.mem.Refuse(testProvider, nil) })
	w.mem.Refuse(testProvider, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "web-1",
		field.ErrorList{field.Forbidden(field.NewPath("spec", "hostNetwork"), "not allowed here")}))
	pod := w.offloadedPod(t, "web-1")
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodFailed || pod.Status.Reason != offloadingv1alpha1.ReasonProviderRejected {
			return fmt.Errorf("local pod %s (%s), want Failed (%s)", pod.Status.Phase, pod.Status.Reason, offloadingv1alpha1.ReasonProviderRejected)
		}
		return nil
	})

	// Each refusal retried counts as a reflection error of the provider,
	// for pods and for the objects reflected beside them.
	podErrors := provider.ReflectionErrors(testProvider, provider.Pods)
	cmErrors := provider.ReflectionErrors(testProvider, provider.ConfigMaps)
	w.mem.Refuse(testProvider, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web-2", errors.New("RBAC not granted yet")))
	retried := w.offloadedPod(t, "web-2")
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "refused-settings"}}
	if err := w.c.Create(t.Context(), settings); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		n := len(w.podOps("create", retried.Name))
		if n < 2 {
			return fmt.Errorf("%d attempts to create the provider pod, want retries", n)
		}
		if got := provider.ReflectionErrors(testProvider, provider.Pods) - podErrors; got < 2 {
			return fmt.Errorf("%v pod reflection errors counted for %s after %d refused creates, want at least 2", got, testProvider, n)
		}
		if got := provider.ReflectionErrors(testProvider, provider.ConfigMaps) - cmErrors; got < 1 {
			return fmt.Errorf("%v ConfigMap reflection errors counted for %s, want at least 1", got, testProvider)
		}
		return nil
	})
	w.mem.Refuse(testProvider, nil)
	w.remotePod(t, retried.Name, nil)
}

// TestObjectReflection: a ConfigMap of the offloaded namespace is copied
// to the provider, its updates follow, a copy someone changed in the
// provider is set back, and the copy goes with the ConfigMap. A Secret is
// copied only while a pod there uses it.
func TestObjectReflection(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "settings"}, Data: map[string]string{"mode": "a"}}
	if err := w.c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	copyHas := func(want string) {
		t.Helper()
		envtest.Eventually(t, 10*time.Second, func(context.Context) error {
			obj := w.mem.Object(testProvider, provider.ConfigMaps, w.remoteNS, cm.Name)
			if obj == nil {
				return errors.New("no copy in the provider")
			}
			if got := obj.(*corev1.ConfigMap).Data["mode"]; got != want {
				return fmt.Errorf("copy has mode=%q, want %q", got, want)
			}
			return nil
		})
	}
	copyHas("a")
	cm.Data["mode"] = "b"
	if err := w.c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	copyHas("b")
	if err := w.mem.Change(testProvider, provider.ConfigMaps, w.remoteNS, cm.Name, func(o client.Object) {
		o.(*corev1.ConfigMap).Data["mode"] = "tampered"
	}); err != nil {
		t.Fatal(err)
	}
	copyHas("b")
	if err := w.c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		if w.mem.Object(testProvider, provider.ConfigMaps, w.remoteNS, cm.Name) != nil {
			return errors.New("the copy outlived the ConfigMap")
		}
		return nil
	})

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "db"}, Data: map[string][]byte{"password": []byte("x")}}
	if err := w.c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	envtest.Consistently(t, time.Second, func(context.Context) error {
		if w.mem.Object(testProvider, provider.Secrets, w.remoteNS, secret.Name) != nil {
			return errors.New("a Secret no offloaded pod uses left the cluster")
		}
		return nil
	})
	user := w.offloadedPod(t, "web-1", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "db", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret.Name}}}}
	})
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		if w.mem.Object(testProvider, provider.Secrets, w.remoteNS, secret.Name) == nil {
			return errors.New("the Secret the offloaded pod uses is not in the provider")
		}
		return nil
	})
	if err := w.c.Delete(ctx, user, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		if names := w.mem.Names(testProvider, provider.Secrets, w.remoteNS); slices.Contains(names, secret.Name) {
			return errors.New("the Secret stayed in the provider after its last user went")
		}
		return nil
	})
}

// TestServiceCopyAsksForTheClusterIP: a Service's copy asks the provider
// for the cluster IP the Service has here, so that offloaded pods reach it
// at the address this cluster shows them; where the provider refuses it
// (another Service holds it there), the provider chooses.
func TestServiceCopyAsksForTheClusterIP(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	const taken = "10.96.211.7"
	if err := w.mem.Put(testProvider, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "providers-own", Name: "holder"},
		Spec:       corev1.ServiceSpec{ClusterIP: taken, Ports: []corev1.ServicePort{{Port: 80}}},
	}); err != nil {
		t.Fatal(err)
	}
	free := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "free"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "a"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	clash := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "clash"},
		Spec: corev1.ServiceSpec{ClusterIP: taken, Selector: map[string]string{"app": "b"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	for _, svc := range []*corev1.Service{free, clash} {
		if err := w.c.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	if free.Spec.ClusterIP == "" || free.Spec.ClusterIP == taken {
		t.Fatalf("the API server gave %q a cluster IP of %q", free.Name, free.Spec.ClusterIP)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		for _, tc := range []struct{ name, want string }{{free.Name, free.Spec.ClusterIP}, {clash.Name, ""}} {
			obj := w.mem.Object(testProvider, provider.Services, w.remoteNS, tc.name)
			if obj == nil {
				return fmt.Errorf("no copy of Service %s in the provider", tc.name)
			}
			if got := obj.(*corev1.Service).Spec.ClusterIP; got != tc.want {
				return fmt.Errorf("the copy of %s has cluster IP %q, want %q", tc.name, got, tc.want)
			}
		}
		return nil
	})
	if holder := w.mem.Object(testProvider, provider.Services, "providers-own", "holder"); holder == nil || holder.(*corev1.Service).Spec.ClusterIP != taken {
		t.Errorf("the provider's own Service changed: %+v", holder)
	}

	// A headless Service is headless there too (the provider's DNS names
	// its pods by hostname and subdomain); a copy that is not (made before
	// copies were) is replaced.
	hl := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "hl"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "d"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	if err := w.c.Create(ctx, hl); err != nil {
		t.Fatal(err)
	}
	var first types.UID
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		cp := w.mem.Object(testProvider, provider.Services, w.remoteNS, hl.Name)
		if cp == nil || cp.(*corev1.Service).Spec.ClusterIP != corev1.ClusterIPNone {
			return fmt.Errorf("the copy of the headless Service is %+v, want headless", cp)
		}
		first = cp.GetUID()
		return nil
	})
	if err := w.mem.Change(testProvider, provider.Services, w.remoteNS, hl.Name, func(o client.Object) {
		o.(*corev1.Service).Spec.ClusterIP = "10.96.211.9"
	}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		cp := w.mem.Object(testProvider, provider.Services, w.remoteNS, hl.Name)
		if cp == nil || cp.GetUID() == first || cp.(*corev1.Service).Spec.ClusterIP != corev1.ClusterIPNone {
			return fmt.Errorf("the copy that was not headless is %+v, want a new headless one", cp)
		}
		return nil
	})

	// An ExternalName Service turned ClusterIP: its copy, which had no
	// address, asks for the one the Service now has.
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}}
	if err := w.c.Create(ctx, ext); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		if w.mem.Object(testProvider, provider.Services, w.remoteNS, ext.Name) == nil {
			return errors.New("no copy of the ExternalName Service")
		}
		return nil
	})
	ext.Spec.Type, ext.Spec.ExternalName = corev1.ServiceTypeClusterIP, ""
	ext.Spec.Selector, ext.Spec.Ports = map[string]string{"app": "c"}, []corev1.ServicePort{{Port: 80}}
	if err := w.c.Update(ctx, ext); err != nil {
		t.Fatal(err)
	}
	if ext.Spec.ClusterIP == "" {
		t.Fatal("the API server gave the Service no cluster IP")
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		cp, ok := w.mem.Object(testProvider, provider.Services, w.remoteNS, ext.Name).(*corev1.Service)
		if !ok {
			return errors.New("no copy of the Service")
		}
		if cp.Spec.Type != corev1.ServiceTypeClusterIP || cp.Spec.ClusterIP != ext.Spec.ClusterIP {
			return fmt.Errorf("the copy is %s at %q, want ClusterIP at %q", cp.Spec.Type, cp.Spec.ClusterIP, ext.Spec.ClusterIP)
		}
		return nil
	})
}

// TestConsumersObjectsReflectedInTurn: a broker offloads a namespace it
// made for one of its consumers in turn. The consumer's ConfigMaps,
// Services and (used) Secrets there, which the controller manager's cache
// leaves out, reach the provider all the same, follow their changes and
// go with them.
func TestConsumersObjectsReflectedInTurn(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	theirs := map[string]string{offloadingv1alpha1.OriginClusterLabel: "the-consumer"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "settings", Labels: theirs}, Data: map[string]string{"mode": "a"}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "web", Labels: theirs},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "db", Labels: theirs}, Data: map[string][]byte{"password": []byte("x")}}
	for _, obj := range []client.Object{cm, svc, secret} {
		if err := w.c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// The reflector cannot have read them from the cache.
	if err := shared.mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the manager's cache holds a consumer's ConfigMap: %v", err)
	}
	web := w.offloadedPod(t, "web-1", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "db", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret.Name}}}}
	})
	copyHas := func(want string) {
		t.Helper()
		envtest.Eventually(t, 10*time.Second, func(context.Context) error {
			obj := w.mem.Object(testProvider, provider.ConfigMaps, w.remoteNS, cm.Name)
			if obj == nil {
				return errors.New("no copy of the consumer's ConfigMap in the provider")
			}
			if got := obj.(*corev1.ConfigMap).Data["mode"]; got != want {
				return fmt.Errorf("copy has mode=%q, want %q", got, want)
			}
			if w.mem.Object(testProvider, provider.Services, w.remoteNS, svc.Name) == nil {
				return errors.New("no copy of the consumer's Service in the provider")
			}
			if w.mem.Object(testProvider, provider.Secrets, w.remoteNS, secret.Name) == nil {
				return errors.New("no copy of the Secret the pod uses in the provider")
			}
			return nil
		})
	}
	copyHas("a")
	cm.Data["mode"] = "b"
	if err := w.c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	copyHas("b")
	// The consumer's copy of a slice it made by hand names the pod this
	// cluster runs for it at the address shown here, and its own pods as
	// this cluster sees them: the pod goes on at the provider's address,
	// the consumer's own addresses stay (this cluster shows them to no
	// provider).
	ensureTunnel(t, w.c)
	w.remotePod(t, web.Name, nil)
	w.running(t, web.Name, "10.201.0.31")
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "custom-theirs", Labels: map[string]string{
			offloadingv1alpha1.OriginClusterLabel: "the-consumer",
			discoveryv1.LabelServiceName:          "custom", discoveryv1.LabelManagedBy: objects.EndpointSliceManager,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.51.0.31"}}, {Addresses: []string{"10.60.0.9"}}},
	}
	if err := w.c.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}
	w.sliceCopied(t, slice, "10.201.0.31")
	for _, obj := range []client.Object{cm, svc} {
		if err := w.c.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		if w.mem.Object(testProvider, provider.ConfigMaps, w.remoteNS, cm.Name) != nil || w.mem.Object(testProvider, provider.Services, w.remoteNS, svc.Name) != nil {
			return errors.New("copies outlived the consumer's ConfigMap and Service")
		}
		return nil
	})
}

// TestPodMarkedUnreadyIsShownAgain: the node lifecycle controller marks
// the pods of a NotReady virtual node unready, and may do it after the
// node is Ready again; the provider's status, still Ready, is shown
// again at once.
func TestPodMarkedUnreadyIsShownAgain(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	pod := w.offloadedPod(t, "web-1")
	w.remotePod(t, pod.Name, nil)
	w.running(t, pod.Name, "10.201.0.8")
	ready := func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if !ready(pod) {
			return errors.New("the local pod is not Ready yet")
		}
		return nil
	})
	// As the node lifecycle controller does.
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			pod.Status.Conditions[i].Status, pod.Status.Conditions[i].Reason = corev1.ConditionFalse, "NodeNotReady"
		}
	}
	if err := w.c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if !ready(pod) {
			return errors.New("the local pod stays unready while its provider pod is Ready")
		}
		return nil
	})
}

// TestBudgetsGoToOrchestratorsOnly: a PodDisruptionBudget reaches a
// provider only while its offer says it moves the pods on (a broker), as
// the number of pods there that must stay healthy: every one of them
// until this cluster's disruption controller has computed the budget,
// then what the budget wants healthy less the healthy pods elsewhere. A
// copy whose budget is gone is deleted; the copies leave when the
// provider stops saying it orchestrates (the budget stays here).
func TestBudgetsGoToOrchestratorsOnly(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	db := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} }
	for _, name := range []string{"db-0", "db-1", "db-2"} {
		w.offloadedPod(t, name, db)
	}
	// One more, healthy on a node of this cluster's own.
	local := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "db-3", Labels: map[string]string{"app": "db"}},
		Spec: corev1.PodSpec{NodeName: "real-1", Containers: []corev1.Container{{Name: "main", Image: "registry.example/app:1"}}}}
	if err := w.c.Create(ctx, local); err != nil {
		t.Fatal(err)
	}
	local.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := w.c.Status().Update(ctx, local); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "db"}, Spec: policyv1.PodDisruptionBudgetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, MaxUnavailable: ptr.To(intstr.FromInt32(1)),
	}}
	if err := w.c.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	copyKeeps := func(want int32) {
		t.Helper()
		envtest.Eventually(t, 10*time.Second, func(context.Context) error {
			obj := w.mem.Object(testProvider, provider.PodDisruptionBudgets, w.remoteNS, pdb.Name)
			if obj == nil {
				return errors.New("no copy of the budget in the provider")
			}
			spec := obj.(*policyv1.PodDisruptionBudget).Spec
			if spec.MinAvailable == nil || spec.MinAvailable.IntVal != want || spec.MaxUnavailable != nil || spec.Selector.MatchLabels["app"] != "db" {
				return fmt.Errorf("copy's spec is %+v, want minAvailable %d of app=db", spec, want)
			}
			return nil
		})
	}

	tenant := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: discoveryv1alpha1.TenantNamespace(testProvider)}}
	if err := w.c.Create(ctx, tenant); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	now := time.Now()
	adv := &sharingv1alpha1.Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: tenant.Name, Name: sharingv1alpha1.AdvertisementName(testProvider)},
		Spec: sharingv1alpha1.AdvertisementSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: testProvider},
			Resources:       corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")},
			Properties:      map[string]string{brokerv1alpha1.OrchestratorProperty: "true"},
			Timestamp:       metav1.NewTime(now), TimeToLive: metav1.NewTime(now.Add(time.Hour)),
		}}
	if err := w.c.Create(ctx, adv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.c.Delete(context.Background(), adv) })
	// Not computed yet: the three pods there stay.
	copyKeeps(3)
	// Computed: 3 of the 4 healthy; one of them is here.
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
		t.Fatal(err)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DesiredHealthy: 3, CurrentHealthy: 4, ExpectedPods: 4, DisruptionsAllowed: 1}
	if err := w.c.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	copyKeeps(2)
	// The local pod unready: all three there must stay.
	local.Status.Conditions[0].Status = corev1.ConditionFalse
	if err := w.c.Status().Update(ctx, local); err != nil {
		t.Fatal(err)
	}
	pdb.Status.CurrentHealthy, pdb.Status.DisruptionsAllowed = 3, 0
	if err := w.c.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	copyKeeps(3)
	// A copy whose budget is gone here (deleted while this cluster was
	// not looking) goes.
	if err := w.mem.Put(testProvider, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: w.remoteNS, Name: "gone",
		Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: testConsumer}}, Spec: policyv1.PodDisruptionBudgetSpec{
		Selector: &metav1.LabelSelector{}, MinAvailable: ptr.To(intstr.FromInt32(5))}}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		if w.mem.Object(testProvider, provider.PodDisruptionBudgets, w.remoteNS, "gone") != nil {
			return errors.New("a copy of a budget gone here stayed in the provider")
		}
		return nil
	})

	adv.Spec.Properties = nil
	if err := w.c.Update(ctx, adv); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		if w.mem.Object(testProvider, provider.PodDisruptionBudgets, w.remoteNS, pdb.Name) != nil {
			return errors.New("the budget stayed in a provider that no longer orchestrates")
		}
		return nil
	})
}

// TestStatusShowsTheVirtualNodeAndGeneration: an offloaded pod's host
// address is its virtual node's, as a kubelet shows its node's, and its
// status.observedGeneration (and its conditions') is the generation of the
// local spec the provider has acted on: it waits while the provider's
// kubelet has not observed the provider pod's latest spec.
func TestStatusShowsTheVirtualNodeAndGeneration(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	var vnode corev1.Node
	if err := w.c.Get(ctx, client.ObjectKey{Name: testNode}, &vnode); err != nil {
		t.Fatal(err)
	}
	vnode.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: testNode}, {Type: corev1.NodeInternalIP, Address: "10.9.9.9"}}
	if err := w.c.Status().Update(ctx, &vnode); err != nil {
		t.Fatal(err)
	}
	pod := w.offloadedPod(t, "web-1")
	w.remotePod(t, pod.Name, nil)
	if err := w.mem.Change(testProvider, provider.Pods, w.remoteNS, pod.Name, func(o client.Object) {
		p := o.(*corev1.Pod)
		p.Status.Phase = corev1.PodRunning
		p.Status.HostIP, p.Status.HostIPs = "192.168.7.7", []corev1.HostIP{{IP: "192.168.7.7"}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		p.Generation, p.Status.ObservedGeneration = 3, 3
	}); err != nil {
		t.Fatal(err)
	}
	shows := func(generation int64) {
		t.Helper()
		envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
			if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			ready := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
			if pod.Status.HostIP != "10.9.9.9" || len(pod.Status.HostIPs) != 1 || pod.Status.HostIPs[0].IP != "10.9.9.9" ||
				pod.Status.ObservedGeneration != generation || ready < 0 || pod.Status.Conditions[ready].ObservedGeneration != generation {
				return fmt.Errorf("pod shows host %q %v, observedGeneration %d, conditions %+v; want the virtual node's 10.9.9.9 and generation %d",
					pod.Status.HostIP, pod.Status.HostIPs, pod.Status.ObservedGeneration, pod.Status.Conditions, generation)
			}
			return nil
		})
	}
	shows(pod.Generation)

	// The provider's kubelet lags behind its pod's spec: the local pod
	// keeps showing the generation it showed, through a spec change that
	// reaches the provider pod, until the provider observes its spec.
	if err := w.mem.Change(testProvider, provider.Pods, w.remoteNS, pod.Name, func(o client.Object) {
		o.(*corev1.Pod).Generation = 4
	}); err != nil {
		t.Fatal(err)
	}
	before := pod.Generation
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](600)
	if err := w.c.Patch(ctx, pod, patch); err != nil {
		t.Fatal(err)
	}
	want := pod.Generation
	if want == before {
		t.Fatalf("the API server did not bump the pod's generation (%d)", want)
	}
	w.remotePod(t, pod.Name, func(p *corev1.Pod) error {
		if ptr.Deref(p.Spec.ActiveDeadlineSeconds, 0) != 600 {
			return fmt.Errorf("provider pod deadline %v, want 600", p.Spec.ActiveDeadlineSeconds)
		}
		return nil
	})
	shows(before)
	if err := w.mem.Change(testProvider, provider.Pods, w.remoteNS, pod.Name, func(o client.Object) {
		o.(*corev1.Pod).Status.ObservedGeneration = 4
	}); err != nil {
		t.Fatal(err)
	}
	shows(want)
}

// TestEphemeralContainersReflected: kubectl debug adds an ephemeral
// container to the local pod through the ephemeralcontainers
// subresource; the provider pod gets it the same way (an update of the
// pod may not add one), and its status comes back.
func TestEphemeralContainersReflected(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	pod := w.offloadedPod(t, "web-1")
	w.remotePod(t, pod.Name, nil)
	w.running(t, pod.Name, "10.51.0.4")
	// As kubectl debug: read, add, write, again if the status moved on.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "registry.example/busybox:1", Command: []string{"sh"}, Stdin: true, TTY: true},
			TargetContainerName:      "main",
		})
		return w.c.SubResource("ephemeralcontainers").Update(ctx, pod)
	}); err != nil {
		t.Fatal(err)
	}
	w.remotePod(t, pod.Name, func(p *corev1.Pod) error {
		if len(p.Spec.EphemeralContainers) != 1 || p.Spec.EphemeralContainers[0].Name != "debugger" ||
			p.Spec.EphemeralContainers[0].TargetContainerName != "main" || p.Spec.EphemeralContainers[0].Image != "registry.example/busybox:1" {
			return fmt.Errorf("provider pod's ephemeral containers %+v, want the debugger", p.Spec.EphemeralContainers)
		}
		return nil
	})
	if n := len(w.podOps("update/ephemeralcontainers", pod.Name)); n != 1 {
		t.Errorf("%d updates of the provider pod's ephemeral containers, want 1", n)
	}
	started := metav1.Now()
	if err := w.mem.Change(testProvider, provider.Pods, w.remoteNS, pod.Name, func(o client.Object) {
		o.(*corev1.Pod).Status.EphemeralContainerStatuses = []corev1.ContainerStatus{{
			Name: "debugger", Image: "registry.example/busybox:1", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}}
	}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if st := pod.Status.EphemeralContainerStatuses; len(st) != 1 || st[0].Name != "debugger" || st[0].State.Running == nil {
			return fmt.Errorf("local pod's ephemeral container statuses %+v, want the debugger running", st)
		}
		return nil
	})
	if n := len(w.podOps("create", pod.Name)); n != 1 {
		t.Errorf("%d creates of the provider pod, want 1", n)
	}
}

// TestPodResizeReflected: an in-place resize of the local pod (its
// resize subresource) resizes the provider pod through the same
// subresource, keeping what the provider added (a LimitRange's memory
// default), and the local pod shows the generation once the provider's
// kubelet acted on it, with the resources as the local spec names them;
// a resize the provider refuses waits, Deferred (its quota) or
// Infeasible (invalid there), with the provider's answer.
func TestPodResizeReflected(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	// The API server checks a resize against the node's allocatable.
	allocatable := []byte(`{"status":{"allocatable":{"cpu":"8","memory":"16Gi","pods":"110"}}}`)
	if err := w.c.Status().Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}, client.RawPatch(types.MergePatchType, allocatable)); err != nil {
		t.Fatal(err)
	}
	cpu := func(m int64) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(m, resource.DecimalSI)}
	}
	pod := w.offloadedPod(t, "web-1", func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = cpu(100)
		p.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired}}
	})
	w.remotePod(t, pod.Name, nil)
	// As the provider's LimitRange would: a memory default the consumer
	// did not name.
	mem := resource.MustParse("32Mi")
	if err := w.mem.Change(testProvider, provider.Pods, w.remoteNS, pod.Name, func(o client.Object) {
		r := &o.(*corev1.Pod).Spec.Containers[0].Resources
		r.Requests[corev1.ResourceMemory], r.Limits[corev1.ResourceMemory] = mem, mem
	}); err != nil {
		t.Fatal(err)
	}
	w.running(t, pod.Name, "10.51.0.5")

	resize := func(milli int64) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			pod.Spec.Containers[0].Resources.Requests = cpu(milli)
			return w.c.SubResource("resize").Update(ctx, pod)
		}); err != nil {
			t.Fatal(err)
		}
	}
	resize(200)
	resizedAt := pod.Generation
	w.remotePod(t, pod.Name, func(p *corev1.Pod) error {
		r := p.Spec.Containers[0].Resources
		if r.Requests.Cpu().MilliValue() != 200 || r.Limits.Cpu().MilliValue() != 200 || !r.Requests.Memory().Equal(mem) || !r.Limits.Memory().Equal(mem) {
			return fmt.Errorf("provider pod's resources %v, want cpu 200m (limit bounded to it) and the provider's memory default kept", r)
		}
		return nil
	})
	if n := len(w.podOps("update/resize", pod.Name)); n != 1 {
		t.Errorf("%d resizes of the provider pod, want 1", n)
	}
	if n := len(w.podOps("update", pod.Name)); n != 0 {
		t.Errorf("%d updates of the provider pod, want none (resources change through the resize subresource)", n)
	}
	// The provider's kubelet actuates it.
	if err := w.mem.Change(testProvider, provider.Pods, w.remoteNS, pod.Name, func(o client.Object) {
		p := o.(*corev1.Pod)
		p.Status.ObservedGeneration = p.Generation
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Ready: true,
			AllocatedResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: mem},
			Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: mem},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: mem},
			}}}
	}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.ObservedGeneration != resizedAt || len(pod.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("local pod observed generation %d, %d container statuses; want %d, 1", pod.Status.ObservedGeneration, len(pod.Status.ContainerStatuses), resizedAt)
		}
		cs := pod.Status.ContainerStatuses[0]
		want := corev1.ResourceRequirements{Requests: cpu(200)}
		if cs.Resources == nil || !equality.Semantic.DeepEqual(*cs.Resources, want) || !equality.Semantic.DeepEqual(cs.AllocatedResources, cpu(200)) {
			return fmt.Errorf("local container status resources %v, allocated %v; want %v as the local spec names them", cs.Resources, cs.AllocatedResources, want)
		}
		return nil
	})

	// The provider refuses the next one for now: Deferred, retried.
	w.mem.Refuse(testProvider, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, pod.Name, errors.New("exceeded quota: liqo-offer")))
	resize(300)
	pending := func(reason string) {
		t.Helper()
		envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
			if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodResizePending })
			if i < 0 || pod.Status.Conditions[i].Reason != reason || pod.Status.Conditions[i].ObservedGeneration != pod.Generation ||
				!strings.Contains(pod.Status.Conditions[i].Message, "refused the resize") {
				return fmt.Errorf("local pod conditions %+v, want PodResizePending %s for generation %d", pod.Status.Conditions, reason, pod.Generation)
			}
			if pod.Status.ObservedGeneration != resizedAt {
				return fmt.Errorf("local pod observed generation %d, want %d until the provider has the resize", pod.Status.ObservedGeneration, resizedAt)
			}
			return nil
		})
	}
	pending(corev1.PodReasonDeferred)
	tries := len(w.podOps("update/resize", pod.Name))
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		if n := len(w.podOps("update/resize", pod.Name)); n <= tries {
			return fmt.Errorf("%d resizes tried, want more than %d: a deferred resize is retried", n, tries)
		}
		return nil
	})
	// Invalid there (its pod's QoS class would change): Infeasible, not
	// tried again as the provider's status moves, and the generation is
	// observed (the provider acted on it: it refused).
	w.mem.Refuse(testProvider, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, pod.Name, field.ErrorList{field.Invalid(field.NewPath("spec", "containers").Index(0).Child("resources"), nil, "Pod QoS is immutable")}))
	resize(400)
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodResizePending })
		if i < 0 || pod.Status.Conditions[i].Reason != corev1.PodReasonInfeasible || pod.Status.ObservedGeneration != pod.Generation {
			return fmt.Errorf("local pod conditions %+v, observed generation %d; want PodResizePending Infeasible and generation %d observed",
				pod.Status.Conditions, pod.Status.ObservedGeneration, pod.Generation)
		}
		return nil
	})
	tries = len(w.podOps("update/resize", pod.Name))
	if err := w.mem.Change(testProvider, provider.Pods, w.remoteNS, pod.Name, func(o client.Object) {
		o.(*corev1.Pod).Status.Message = "moved on"
	}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Message != "moved on" || !slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodResizePending && c.Reason == corev1.PodReasonInfeasible
		}) {
			return fmt.Errorf("local pod message %q, conditions %+v; want the provider's and the infeasible resize kept", pod.Status.Message, pod.Status.Conditions)
		}
		return nil
	})
	if n := len(w.podOps("update/resize", pod.Name)); n != tries {
		t.Errorf("%d more tries of an infeasible resize, want none until the next resize", n-tries)
	}

	// Accepted again: the provider pod has it, the condition goes.
	w.mem.Refuse(testProvider, nil)
	resize(500)
	w.remotePod(t, pod.Name, func(p *corev1.Pod) error {
		if got := p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue(); got != 500 {
			return fmt.Errorf("provider pod requests %dm of CPU, want 500m", got)
		}
		return nil
	})
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodResizePending }) {
			return fmt.Errorf("local pod conditions %+v, want no PodResizePending once the provider has the resize", pod.Status.Conditions)
		}
		return nil
	})
	if n := len(w.podOps("create", pod.Name)); n != 1 {
		t.Errorf("%d creates of the provider pod, want 1", n)
	}
}

// TestRefusedEphemeralContainerIsShown: an ephemeral container the
// provider refuses for good (its Pod Security level: kubectl debug's
// default profile adds SYS_PTRACE) shows on the local pod as waiting,
// rejected, with the provider's answer, and is not tried again; the pod's
// status still flows, and an ephemeral container added later reaches the
// provider alone.
func TestRefusedEphemeralContainerIsShown(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	pod := w.offloadedPod(t, "web-1")
	w.remotePod(t, pod.Name, nil)
	w.running(t, pod.Name, "10.51.0.6")
	debug := func(name string) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name, Image: "registry.example/busybox:1"},
			})
			return w.c.SubResource("ephemeralcontainers").Update(ctx, pod)
		}); err != nil {
			t.Fatal(err)
		}
	}
	w.mem.Refuse(testProvider, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, pod.Name,
		errors.New(`violates PodSecurity "baseline:latest": non-default capabilities (container "ptrace" must not include "SYS_PTRACE" in securityContext.capabilities.add)`)))
	debug("ptrace")
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		st := pod.Status.EphemeralContainerStatuses
		if len(st) != 1 || st[0].Name != "ptrace" || st[0].State.Waiting == nil || st[0].State.Waiting.Reason != offloadingv1alpha1.ReasonProviderRejected ||
			!strings.Contains(st[0].State.Waiting.Message, "SYS_PTRACE") {
			return fmt.Errorf("local pod's ephemeral container statuses %+v, want ptrace waiting, rejected with the provider's answer", st)
		}
		if pod.Status.ObservedGeneration != pod.Generation {
			return fmt.Errorf("observed generation %d, want %d: the refusal is as far as the provider goes", pod.Status.ObservedGeneration, pod.Generation)
		}
		return nil
	})
	tried := len(w.podOps("update/ephemeralcontainers", pod.Name))
	w.mem.Refuse(testProvider, nil)
	// The status still flows.
	if err := w.mem.Change(testProvider, provider.Pods, w.remoteNS, pod.Name, func(o client.Object) {
		o.(*corev1.Pod).Status.Message = "still reflected"
	}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Message != "still reflected" || len(pod.Status.EphemeralContainerStatuses) != 1 {
			return fmt.Errorf("local pod message %q, ephemeral statuses %+v; want the provider's and the refusal kept", pod.Status.Message, pod.Status.EphemeralContainerStatuses)
		}
		return nil
	})
	if n := len(w.podOps("update/ephemeralcontainers", pod.Name)); n != tried {
		t.Errorf("%d tries to add ephemeral containers after the refusal, want none (%d before)", n-tried, tried)
	}
	debug("debugger")
	w.remotePod(t, pod.Name, func(p *corev1.Pod) error {
		if len(p.Spec.EphemeralContainers) != 1 || p.Spec.EphemeralContainers[0].Name != "debugger" {
			return fmt.Errorf("provider pod's ephemeral containers %+v, want the debugger alone", p.Spec.EphemeralContainers)
		}
		return nil
	})
}

// TestServiceCopyFollowsAffinity: a Service's session affinity (and its
// timeout) and whether it publishes addresses not ready reach its copy,
// when set and when switched back.
func TestServiceCopyFollowsAffinity(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "sticky"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "sticky"}, Ports: []corev1.ServicePort{{Port: 80}},
		SessionAffinity: corev1.ServiceAffinityClientIP, SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}},
	}}
	if err := w.c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	copyIs := func(affinity corev1.ServiceAffinity, timeout int32, publish bool) {
		t.Helper()
		envtest.Eventually(t, 10*time.Second, func(context.Context) error {
			cp, ok := w.mem.Object(testProvider, provider.Services, w.remoteNS, svc.Name).(*corev1.Service)
			if !ok {
				return errors.New("no copy of the Service")
			}
			got := int32(0)
			if c := cp.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
				got = *c.ClientIP.TimeoutSeconds
			}
			if cp.Spec.SessionAffinity != affinity || got != timeout || cp.Spec.PublishNotReadyAddresses != publish {
				return fmt.Errorf("the copy has affinity %q (timeout %d), publishes not ready %v; want %q (%d), %v",
					cp.Spec.SessionAffinity, got, cp.Spec.PublishNotReadyAddresses, affinity, timeout, publish)
			}
			return nil
		})
	}
	copyIs(corev1.ServiceAffinityClientIP, 60, false)
	update := func(mutate func(*corev1.Service)) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := w.c.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
				return err
			}
			mutate(svc)
			return w.c.Update(ctx, svc)
		}); err != nil {
			t.Fatal(err)
		}
	}
	update(func(s *corev1.Service) { s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptr.To[int32](90) })
	copyIs(corev1.ServiceAffinityClientIP, 90, false)
	update(func(s *corev1.Service) {
		s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig, s.Spec.PublishNotReadyAddresses = corev1.ServiceAffinityNone, nil, true
	})
	copyIs(corev1.ServiceAffinityNone, 0, true)
}

// TestAggregatedPodNamesNoProvider: a pod this cluster (a broker) runs
// for a consumer says which provider runs it (ProviderAddress), for the
// consumer's direct path; once its namespace is one the broker's
// aggregator serves, it says nothing of the provider, nor of the address
// the pod has there (its address condition neither), nor passes on what
// a provider that is a broker in turn says.
func TestAggregatedPodNamesNoProvider(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	// No network agreed: the address condition says why it hides the
	// pod's address, which names the provider but when opaque.
	if err := w.c.Delete(ctx, &netv1alpha1.TunnelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: testProvider}}); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	pod := w.offloadedPod(t, "resold", func(p *corev1.Pod) { p.Labels[offloadingv1alpha1.OriginClusterLabel] = "the-consumer" })
	w.remotePod(t, pod.Name, nil)
	w.running(t, pod.Name, "10.201.0.44")
	says := func(reason string) {
		t.Helper()
		envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
			var got corev1.Pod
			if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
				return err
			}
			var reasons []string
			for _, c := range got.Status.Conditions {
				if c.Type == offloadingv1alpha1.ConditionProviderAddress {
					reasons = append(reasons, c.Reason)
				}
			}
			if (reason == "" && len(reasons) > 0) || (reason != "" && !slices.Equal(reasons, []string{reason})) {
				return fmt.Errorf("the pod names providers %v, want %q", reasons, reason)
			}
			raw, err := json.Marshal(got.Status)
			if err != nil {
				return err
			}
			if named := strings.Contains(string(raw), testProvider) || strings.Contains(string(raw), "10.201.0.44"); named != (reason != "") {
				return fmt.Errorf("the pod's status names its provider or its address there: %v, want %v: %s", named, reason != "", raw)
			}
			return nil
		})
	}
	says(testProvider)

	var no offloadingv1alpha1.NamespaceOffloading
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.localNS, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(no.DeepCopy())
	metav1.SetMetaDataLabel(&no.ObjectMeta, brokerv1alpha1.AggregatedLabel, "true")
	if err := w.c.Patch(ctx, &no, patch); err != nil {
		t.Fatal(err)
	}
	// The provider is a broker too, and says where it runs the pod.
	if err := w.mem.Change(testProvider, provider.Pods, w.remoteNS, pod.Name, func(o client.Object) {
		p := o.(*corev1.Pod)
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: offloadingv1alpha1.ConditionProviderAddress, Status: corev1.ConditionTrue,
			Reason: "deeper-provider", Message: "10.9.0.1"})
	}); err != nil {
		t.Fatal(err)
	}
	says("")
}

// TestAggregatedPodsShowTheirTransitAddress: on an aggregator, a pod its
// consumer placed here runs at a provider and shows, instead of the
// address this cluster reaches it at, an address of this cluster's
// external range, which the consumer's TunnelEndpoint routes to it; the
// consumer is the namespace's, whatever the pod's own label says (the
// consumer writes it); the pod keeps the address while its provider's
// changes, and the route goes with the pod.
func TestAggregatedPodsShowTheirTransitAddress(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	const consumer, other = "aggregated-consumer", "another-consumer"
	w.aggregate(t, consumer, other)
	pod := w.offloadedPod(t, "in-transit", func(p *corev1.Pod) { p.Labels[offloadingv1alpha1.OriginClusterLabel] = other })
	key := pod.Namespace + "/" + pod.Name
	w.remotePod(t, pod.Name, nil)
	w.running(t, pod.Name, "10.201.0.45")
	external := netip.MustParsePrefix("10.70.0.0/16")
	routeOf := func(ctx context.Context, id string) (netv1alpha1.TransitRoute, bool, error) {
		routes, err := w.transitRoutes(ctx, id, func(r netv1alpha1.TransitRoute) bool { return r.Pod == key })
		if err != nil || len(routes) == 0 {
			return netv1alpha1.TransitRoute{}, false, err
		}
		return routes[0], true, nil
	}
	var shown string
	showsTransit := func(target string) {
		t.Helper()
		envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
			var got corev1.Pod
			if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
				return err
			}
			addr, err := netip.ParseAddr(got.Status.PodIP)
			if err != nil || !external.Contains(addr) || len(got.Status.PodIPs) != 1 {
				return fmt.Errorf("the pod shows %q %v, want one address of %s", got.Status.PodIP, got.Status.PodIPs, external)
			}
			var reason string
			for _, c := range got.Status.Conditions {
				if c.Type == offloadingv1alpha1.ConditionPodAddress {
					reason = c.Reason
				}
			}
			if reason != offloadingv1alpha1.ReasonTransit {
				return fmt.Errorf("the pod's address condition says %q, want %s", reason, offloadingv1alpha1.ReasonTransit)
			}
			raw, err := json.Marshal(got.Status)
			if err != nil {
				return err
			}
			for _, hidden := range []string{testProvider, "10.201.0.", "10.51.0."} {
				if strings.Contains(string(raw), hidden) {
					return fmt.Errorf("the pod's status names %s: %s", hidden, raw)
				}
			}
			r, ok, err := routeOf(ctx, consumer)
			if err != nil {
				return err
			}
			if !ok || r.Address != addr.String() || r.Target != target || r.Provider != testProvider {
				return fmt.Errorf("%s's route for the pod: %+v, %v; want %s to %s", consumer, r, ok, addr, target)
			}
			if shown != "" && shown != got.Status.PodIP {
				return fmt.Errorf("the pod moved from %s to %s", shown, got.Status.PodIP)
			}
			shown = got.Status.PodIP
			return nil
		})
	}
	showsTransit("10.51.0.45")
	if _, ok, err := routeOf(ctx, other); err != nil || ok {
		t.Errorf("the consumer the pod's own label names has a route for it: %v, %v", ok, err)
	}
	// The pod restarts at its provider with another address: the route
	// follows, the address it shows stays.
	w.running(t, pod.Name, "10.201.0.46")
	showsTransit("10.51.0.46")

	if err := w.c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	w.remotePod(t, pod.Name, func(p *corev1.Pod) error {
		if p.DeletionTimestamp == nil {
			return errors.New("provider pod not being deleted")
		}
		return nil
	})
	w.mem.Remove(testProvider, provider.Pods, w.remoteNS, pod.Name) // its containers stopped
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if _, ok, err := routeOf(ctx, consumer); err != nil {
			return err
		} else if ok {
			return errors.New("the pod went; its route is still there")
		}
		return nil
	})
}

// TestProvidersReachEachOthersPodsThroughHere: on an aggregator whose
// consumer's namespace runs pods at two providers, the slice this
// cluster's EndpointSlice controller made of them (at their transit
// addresses) goes to each provider with the pod at the other alone, at an
// address of this cluster's external range as the provider sees it,
// which the provider's own TunnelEndpoint routes through the other
// provider; its own pod its own controller lists. The routes follow the
// pods and go with the slice.
func TestProvidersReachEachOthersPodsThroughHere(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	const consumer, second, secondNode = "aggregated-consumer", "second-provider", "second-provider-node"
	w.aggregate(t, consumer, second)
	vnode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: secondNode, Labels: map[string]string{
		offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue, offloadingv1alpha1.RemoteClusterLabel: second,
	}}}
	if err := w.c.Create(ctx, vnode); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var no offloadingv1alpha1.NamespaceOffloading
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.localNS, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
		t.Fatal(err)
	}
	no.Status.RemoteNamespaces = append(no.Status.RemoteNamespaces, offloadingv1alpha1.RemoteNamespaceStatus{
		ClusterID: second, Namespace: w.remoteNS, Phase: offloadingv1alpha1.RemoteNamespaceReady})
	if err := w.c.Status().Update(ctx, &no); err != nil {
		t.Fatal(err)
	}
	here := w.offloadedPod(t, "db-here")
	there := w.offloadedPod(t, "db-there", func(p *corev1.Pod) { p.Spec.NodeName = secondNode })
	w.remotePod(t, here.Name, nil)
	w.running(t, here.Name, "10.201.0.61")
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		return w.mem.Change(second, provider.Pods, w.remoteNS, there.Name, func(o client.Object) {
			pod := o.(*corev1.Pod)
			pod.Status.Phase = corev1.PodRunning
			pod.Status.PodIP, pod.Status.PodIPs = "10.100.0.62", []corev1.PodIP{{IP: "10.100.0.62"}}
		})
	})
	external := netip.MustParsePrefix("10.70.0.0/16")
	shown := func(pod *corev1.Pod) string {
		t.Helper()
		var addr netip.Addr
		envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
			var got corev1.Pod
			if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
				return err
			}
			var err error
			if addr, err = netip.ParseAddr(got.Status.PodIP); err != nil || !external.Contains(addr) {
				return fmt.Errorf("pod %s shows %q, not a transit address yet", pod.Name, got.Status.PodIP)
			}
			return nil
		})
		return addr.String()
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "db-x7k2p", Labels: map[string]string{
			discoveryv1.LabelServiceName: "db", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("sql"), Port: ptr.To[int32](5432)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{shown(here)}, NodeName: ptr.To(testNode)},
			{Addresses: []string{shown(there)}, NodeName: ptr.To(secondNode)},
		},
	}
	if err := w.c.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}
	key := slice.Namespace + "/" + slice.Name
	ofSlice := func(r netv1alpha1.TransitRoute) bool { return r.EndpointSlice == key }
	// reaches: id's copy lists the pod at via alone (target, as this
	// cluster reaches it), at id's own route, as id sees this cluster's
	// external range (10.12.0.0/16).
	reaches := func(id, target, via string) {
		t.Helper()
		envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
			routes, err := w.transitRoutes(ctx, id, ofSlice)
			if err != nil {
				return err
			}
			if len(routes) != 1 || routes[0].Target != target || routes[0].Provider != via {
				return fmt.Errorf("%s's routes for the slice: %+v; want one to %s through %s", id, routes, target, via)
			}
			obj := w.mem.Object(id, provider.EndpointSlices, w.remoteNS, slice.Name)
			if obj == nil {
				return fmt.Errorf("no copy of the slice at %s", id)
			}
			addr, ok := ipam.Translate(netip.MustParseAddr(routes[0].Address), external, netip.MustParsePrefix("10.12.0.0/16"))
			var got []string
			for _, ep := range obj.(*discoveryv1.EndpointSlice).Endpoints {
				got = append(got, ep.Addresses...)
			}
			if !ok || !slices.Equal(got, []string{addr.String()}) {
				return fmt.Errorf("%s's copy lists %v, want %s (route %s) alone", id, got, addr, routes[0].Address)
			}
			return nil
		})
	}
	reaches(testProvider, "10.91.0.62", second)
	reaches(second, "10.51.0.61", testProvider)
	// The pod at second restarts there at another address: the route
	// follows (the address it shows, and the slice, stay).
	if err := w.mem.Change(second, provider.Pods, w.remoteNS, there.Name, func(o client.Object) {
		pod := o.(*corev1.Pod)
		pod.Status.PodIP, pod.Status.PodIPs = "10.100.0.63", []corev1.PodIP{{IP: "10.100.0.63"}}
	}); err != nil {
		t.Fatal(err)
	}
	reaches(testProvider, "10.91.0.63", second)

	if err := w.c.Delete(ctx, slice); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		for _, id := range []string{testProvider, second} {
			routes, err := w.transitRoutes(ctx, id, ofSlice)
			if err != nil {
				return err
			}
			if len(routes) > 0 {
				return fmt.Errorf("%s's routes for the slice gone: %+v", id, routes)
			}
		}
		return nil
	})
}

// TestPoolPodsGoWhereThePoolIs: a pod bound to the virtual node of one of
// a provider's pools goes to the provider with the pool (the node's
// selector, on exposed labels alone) as its node affinity, not the pod's
// own node selection nor the node's other labels; one bound to the
// provider's whole node goes with none.
func TestPoolPodsGoWhereThePoolIs(t *testing.T) {
	w := startReflectors(t)
	const region, zone = "topology.kubernetes.io/region", "topology.kubernetes.io/zone"
	pool := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode + "-" + w.localNS, Labels: map[string]string{
		offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue, offloadingv1alpha1.RemoteClusterLabel: testProvider,
		offloadingv1alpha1.PoolLabel: "0a1b2c3d", region: "eu", "team": "blue",
	}, Annotations: map[string]string{offloadingv1alpha1.PoolSelectorAnnotation: region + "=eu,!" + zone + ",team=blue"}}}
	if err := w.c.Create(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.c.Delete(context.Background(), pool) })
	own := func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{region: "eu", "disk": "ssd"}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpExists}}},
		}}}}
	}
	inPool := w.offloadedPod(t, "in-pool", own, func(p *corev1.Pod) { p.Spec.NodeName = pool.Name })
	whole := w.offloadedPod(t, "whole", own)
	want := &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: region, Operator: corev1.NodeSelectorOpIn, Values: []string{"eu"}}, {Key: zone, Operator: corev1.NodeSelectorOpDoesNotExist}},
	}}}}
	w.remotePod(t, inPool.Name, func(p *corev1.Pod) error {
		if p.Spec.NodeSelector != nil || p.Spec.Affinity == nil || !equality.Semantic.DeepEqual(p.Spec.Affinity.NodeAffinity, want) {
			return fmt.Errorf("the pool's pod at the provider: node selector %v, affinity %+v; want none, and %+v", p.Spec.NodeSelector, p.Spec.Affinity, want)
		}
		return nil
	})
	w.remotePod(t, whole.Name, func(p *corev1.Pod) error {
		if p.Spec.NodeSelector != nil || p.Spec.Affinity != nil && p.Spec.Affinity.NodeAffinity != nil {
			return fmt.Errorf("the whole node's pod at the provider: node selector %v, affinity %+v; want none", p.Spec.NodeSelector, p.Spec.Affinity)
		}
		return nil
	})
}
