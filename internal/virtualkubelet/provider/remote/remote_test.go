// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package remote_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
	"github.com/liqo-go/liqo/internal/virtualkubelet/forge"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider/providertest"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider/remote"
)

const (
	liqoNS, local, remoteNS = "liqo", "web", "consumer-web"
	providerID, consumerID  = "provider-1", "consumer-1"
	node                    = "provider-node"
)

// startSessions starts an API server that is both clusters (the CRDs,
// the Liqo namespace, the identity Secret of providerID reaching back
// the same server, namespaces local and remoteNS), and the sessions.
func startSessions(t *testing.T) (client.Client, *remote.Sessions) {
	t.Helper()
	// The CRDs (ShadowPods) and the Liqo namespace, as liqoctl install
	// puts them.
	cfg, c := envtest.StartInstalled(t, "remote-provider")
	return c, startSessionsOn(t, cfg, c)
}

// startSessionsOn is startSessions on the API server of cfg.
func startSessionsOn(t *testing.T, cfg *rest.Config, c client.Client) *remote.Sessions {
	t.Helper()
	ctx := t.Context()
	objs := []client.Object{
		// Room for the suite's pod as it is resized: the API server
		// checks a resize against the node's allocatable.
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("10"),
		}}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: liqoNS, Name: identity.RemoteSecretName(providerID)},
			Data: map[string][]byte{
				identity.ServerKey: []byte(cfg.Host), identity.CAKey: cfg.CAData,
				identity.VirtualKubeletCertKey: cfg.CertData, identity.VirtualKubeletKeyKey: cfg.KeyData,
			},
		},
	}
	for _, ns := range []string{liqoNS, local, remoteNS} {
		objs = append([]client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}},
		}, objs...)
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && (o.GetName() != liqoNS || !apierrors.IsAlreadyExists(err)) {
			t.Fatal(err)
		}
	}

	sessions := &remote.Sessions{
		Remotes: &identity.Remotes{Client: c, Namespace: liqoNS, Scheme: c.Scheme()}, Reader: c, LocalClusterID: consumerID,
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sessions.Start(sctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sessions: %v", err)
		}
	})
	return sessions
}

// TestContract: the remote-cluster provider answers as the contract says,
// against a real API server. One API server is both clusters here: the
// local namespace and the identity Secret on one side, the provider
// namespace, reached with that identity, on the other.
func TestContract(t *testing.T) {
	c, sessions := startSessions(t)
	ctx := t.Context()
	providertest.Run(t, providertest.Harness{
		Providers: sessions, Provider: providerID, LocalClusterID: consumerID, Local: local, Remote: remoteNS, Node: node,
		// The local pod the provider's stands for; without it the cache
		// keeps a provider's pod as its name alone.
		Stands: func(ctx context.Context, kind provider.Kind, name string) error {
			if kind != provider.Pods {
				return fmt.Errorf("the suite offloads pods only, not %s", kind)
			}
			return c.Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: local, Name: name},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
			})
		},
		Remove: func(ctx context.Context, kind provider.Kind, name string) error {
			if kind != provider.Pods {
				return fmt.Errorf("the suite removes pods only, not %s", kind)
			}
			return c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: name}}, client.GracePeriodSeconds(0))
		},
		// The provider's metrics API, as a custom resource.
		Measure: func(ctx context.Context, pod string, at time.Time, usage map[string]corev1.ResourceList) error {
			if err := providertest.MetricsAPI(ctx, c); err != nil {
				return err
			}
			return providertest.WritePodMetrics(ctx, c, remoteNS, pod, at, usage)
		},
	})

	// What a provider's metrics API states is its word: figures beyond
	// any machine, or below zero, are dropped, the rest kept.
	at := time.Now().Truncate(time.Second)
	if err := providertest.WritePodMetrics(ctx, c, remoteNS, "impossible", at, map[string]corev1.ResourceList{
		"huge":     {corev1.ResourceCPU: resource.MustParse("1e30"), corev1.ResourceMemory: resource.MustParse("1e30")},
		"negative": {corev1.ResourceCPU: resource.MustParse("-1"), corev1.ResourceMemory: resource.MustParse("-1Mi")},
		"sane":     {corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("2Gi")},
	}); err != nil {
		t.Fatal(err)
	}
	got, err := sessions.PodUsage(ctx, providerID, remoteNS)
	if err != nil {
		t.Fatal(err)
	}
	u := got["impossible"].Containers
	if len(u["huge"]) != 0 || len(u["negative"]) != 0 {
		t.Errorf("a provider stating 1e30 and -1: %v and %v passed, want both dropped", u["huge"], u["negative"])
	}
	if sane := u["sane"]; sane.Cpu().Value() != 3 || sane.Memory().Value() != 2<<30 {
		t.Errorf("a sane figure: %v, want 3 cores and 2Gi", u["sane"])
	}
}

// openView is the suite's provider namespace, once its view has listed
// what is there.
func openView(t *testing.T, sessions *remote.Sessions) provider.Namespace {
	t.Helper()
	var view provider.Namespace
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		var err error
		view, err = sessions.Namespace(ctx, providerID, local, remoteNS)
		return err
	})
	return view
}

// TestPodsKeptByShadowPods: a pod is made with the ShadowPod that keeps
// it, owned by it; an update of the pod is its template's (but its
// node); a pod the provider refuses leaves no ShadowPod; the ShadowPod of
// an older pod of the name goes before a new one is made; a deleted pod's
// ShadowPod goes first.
func TestPodsKeptByShadowPods(t *testing.T) {
	c, sessions := startSessions(t)
	ctx := t.Context()
	view := openView(t, sessions)
	pod := func(name, uid string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: name,
				Labels:      map[string]string{offloadingv1alpha1.OriginClusterLabel: consumerID},
				Annotations: map[string]string{offloadingv1alpha1.OriginUIDAnnotation: uid}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/web:1"}}},
		}
	}
	shadow := func(name string) (*offloadingv1alpha1.ShadowPod, error) {
		var sp offloadingv1alpha1.ShadowPod
		err := c.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: name}, &sp)
		return &sp, err
	}

	if err := view.Create(ctx, pod("web-1", "uid-1")); err != nil {
		t.Fatal(err)
	}
	sp, err := shadow("web-1")
	if err != nil {
		t.Fatalf("no ShadowPod for the pod made: %v", err)
	}
	if spec, err := sp.Spec.Template.PodSpec(); err != nil || sp.Spec.Template.Annotations[offloadingv1alpha1.OriginUIDAnnotation] != "uid-1" ||
		sp.Labels[offloadingv1alpha1.OriginClusterLabel] != consumerID || spec.Containers[0].Image != "registry.example/web:1" {
		t.Errorf("ShadowPod %+v, want the pod's labels and template", sp)
	}
	var made corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: "web-1"}, &made); err != nil {
		t.Fatal(err)
	}
	if owner := metav1.GetControllerOf(&made); owner == nil || owner.UID != sp.UID {
		t.Errorf("the pod is owned by %+v, want its ShadowPod %s", owner, sp.UID)
	}

	// An update, on a pod the scheduler placed, is the template's.
	if err := c.SubResource("binding").Create(ctx, &made, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: made.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: node},
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(&made), &made); err != nil {
		t.Fatal(err)
	}
	made.Spec.Containers[0].Image = "registry.example/web:2"
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		if p, ok := view.Get(provider.Pods, "web-1").(*corev1.Pod); !ok || p.ResourceVersion != made.ResourceVersion {
			return errors.New("the view has not seen the pod placed yet")
		}
		return nil
	})
	made.Spec.ActiveDeadlineSeconds = ptr.To[int64](3600)
	if err := view.Update(ctx, &made); err != nil {
		t.Fatal(err)
	}
	if sp, err = shadow("web-1"); err != nil {
		t.Fatal(err)
	}
	tmpl, err := sp.Spec.Template.PodSpec()
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.Containers[0].Image != "registry.example/web:2" || tmpl.ActiveDeadlineSeconds == nil || tmpl.NodeName != "" {
		t.Errorf("template after the update: image %s, deadline %v, node %q; want the pod's, without its node", tmpl.Containers[0].Image, tmpl.ActiveDeadlineSeconds, tmpl.NodeName)
	}

	// A pod the provider refuses (its quota) leaves no ShadowPod.
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: "full"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}}
	if err := c.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}
	if err := c.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// Once the API server's admission has the quota in its cache.
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		switch err := c.Create(ctx, pod("probe", "uid-probe"), client.DryRunAll); {
		case err == nil:
			return errors.New("a pod over the quota (dry run) was admitted")
		case !apierrors.IsForbidden(err):
			return fmt.Errorf("a pod over the quota (dry run), want refused: %w", err)
		}
		return nil
	})
	if err := view.Create(ctx, pod("web-2", "uid-2")); err == nil || !apierrors.IsForbidden(err) {
		t.Fatalf("a pod over the quota: %v, want refused", err)
	}
	if _, err := shadow("web-2"); !apierrors.IsNotFound(err) {
		t.Errorf("the ShadowPod of a refused pod: %v, want gone", err)
	}
	if err := c.Delete(ctx, quota); err != nil {
		t.Fatal(err)
	}

	// The ShadowPod of an older pod of the name (its pod gone) goes first.
	older, err := forge.ShadowPod(pod("web-3", "uid-old"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, older); err != nil {
		t.Fatal(err)
	}
	if err := view.Create(ctx, pod("web-3", "uid-new")); err == nil || apierrors.IsAlreadyExists(err) {
		t.Fatalf("a pod whose name an older ShadowPod holds: %v, want an error to retry on", err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := view.Create(ctx, pod("web-3", "uid-new")); err != nil {
			return err
		}
		sp, err := shadow("web-3")
		if err != nil {
			return err
		}
		if got := sp.Spec.Template.Annotations[offloadingv1alpha1.OriginUIDAnnotation]; got != "uid-new" {
			return fmt.Errorf("the ShadowPod is for %s, want uid-new", got)
		}
		return nil
	})

	// A deleted pod's ShadowPod goes, first.
	if err := view.Delete(ctx, provider.Pods, "web-1", made.UID, ptr.To[int64](0)); err != nil {
		t.Fatal(err)
	}
	// Going, its pod left to the deletion with its grace period (orphaned:
	// no garbage collector runs here to finish it).
	if sp, err := shadow("web-1"); !apierrors.IsNotFound(err) && (err != nil || sp.DeletionTimestamp.IsZero()) {
		t.Errorf("the ShadowPod of a deleted pod: %v, want gone or going", err)
	} else if err == nil && !slices.Contains(sp.Finalizers, metav1.FinalizerOrphanDependents) {
		t.Errorf("the ShadowPod of a deleted pod goes with finalizers %v, want its pod orphaned", sp.Finalizers)
	}
}

// TestPodsWithoutShadowPods: a provider of a version before ShadowPods
// (no such resource) gets its pods as then, alone.
func TestPodsWithoutShadowPods(t *testing.T) {
	cfg := envtest.Start(t, "old-provider")
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	sessions := startSessionsOn(t, cfg, c)
	view := openView(t, sessions)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: "web-1",
			Labels:      map[string]string{offloadingv1alpha1.OriginClusterLabel: consumerID},
			Annotations: map[string]string{offloadingv1alpha1.OriginUIDAnnotation: "uid-1"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/web:1"}}},
	}
	if err := view.Create(t.Context(), pod); err != nil {
		t.Fatalf("a pod in a provider without ShadowPods: %v", err)
	}
	var made corev1.Pod
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), &made); err != nil {
		t.Fatal(err)
	}
	if len(made.OwnerReferences) != 0 {
		t.Errorf("the pod is owned by %+v, want nothing", made.OwnerReferences)
	}
}

// TestClaimStubKeepsItsBinding: a provider claim that no claim here
// stands for is cached as a stub, which still says whether it is bound
// there: whether it may hold data (package claims deletes only those
// that cannot).
func TestClaimStubKeepsItsBinding(t *testing.T) {
	c, sessions := startSessions(t)
	ctx := t.Context()
	view := openView(t, sessions)
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: "written",
			Labels:      map[string]string{offloadingv1alpha1.OriginClusterLabel: consumerID},
			Annotations: map[string]string{offloadingv1alpha1.OriginUIDAnnotation: "uid-gone", "large": "x"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			VolumeName:       "pv-with-data",
			StorageClassName: ptr.To("fast"),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	// liqo-offloaded-claims, which matches what carries an origin, is
	// configured once this cluster's ClusterConfig exists.
	if err := c.Create(ctx, &configv1alpha1.ClusterConfig{ObjectMeta: metav1.ObjectMeta{Name: configv1alpha1.ClusterConfigName}}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 45*time.Second, func(ctx context.Context) error { return c.Create(ctx, claim) })
	claim.Status.Phase = corev1.ClaimBound
	if err := c.Status().Update(ctx, claim); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		if !view.Watch(provider.PersistentVolumeClaims) {
			return errors.New("the view has not listed claims yet")
		}
		got, _ := view.Get(provider.PersistentVolumeClaims, claim.Name).(*corev1.PersistentVolumeClaim)
		switch {
		case got == nil:
			return errors.New("the claim is not in the view")
		case got.Status.Phase != corev1.ClaimBound:
			return fmt.Errorf("the cached claim's phase is %q, want Bound", got.Status.Phase)
		case got.Spec.VolumeName != claim.Spec.VolumeName:
			return fmt.Errorf("the cached claim's volume is %q, want %s", got.Spec.VolumeName, claim.Spec.VolumeName)
		case got.Annotations["large"] != "" || got.Spec.StorageClassName != nil:
			return fmt.Errorf("the claim is cached whole, want a stub: %+v", got)
		}
		return nil
	})
}
