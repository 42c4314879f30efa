// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
	"github.com/liqo-go/liqo/internal/offloading"
)

const shadowConsumer = "consumer-1"

// startShadowPods runs the ShadowPod controller, its cache trimming
// ShadowPods as the controller manager's does, and returns the namespace
// it keeps pods in, made for shadowConsumer.
func startShadowPods(t *testing.T, firstPodGrace time.Duration) (client.Client, string) {
	t.Helper()
	cfg, c := envtest.StartInstalled(t, "provider")
	envtest.StartManager(t, cfg, func(mgr ctrl.Manager) error {
		return (&offloading.ShadowPodReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), FirstPodGrace: firstPodGrace}).SetupWithManager(mgr)
	}, func(o *ctrl.Options) {
		o.Cache.ByObject = map[client.Object]cache.ByObject{&offloadingv1alpha1.ShadowPod{}: {Transform: offloading.TrimShadowPod}}
	})
	const ns = "web-consumer-1"
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: shadowConsumer}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}},
	} {
		if err := c.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
	return c, ns
}

func shadowPod(ns, name string) *offloadingv1alpha1.ShadowPod {
	template, err := offloadingv1alpha1.NewShadowPodTemplate(
		// The template's own say on the origin does not count.
		map[string]string{"app": "web", offloadingv1alpha1.OriginClusterLabel: "someone-else"},
		map[string]string{offloadingv1alpha1.OriginUIDAnnotation: "uid-at-the-consumer"},
		&corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}})
	if err != nil {
		panic(err) // a constant spec
	}
	return &offloadingv1alpha1.ShadowPod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: shadowConsumer}},
		Spec:       offloadingv1alpha1.ShadowPodSpec{Template: template},
	}
}

// keptPod waits for sp's pod other than not, made from its template and
// owned by it, and returns it.
func keptPod(t *testing.T, c client.Client, sp *offloadingv1alpha1.ShadowPod, not types.UID) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(sp), &pod); err != nil {
			return err
		}
		if pod.UID == not {
			return errors.New("still the pod that went")
		}
		owner := metav1.GetControllerOf(&pod)
		if owner == nil || owner.UID != sp.UID || owner.Kind != "ShadowPod" {
			return fmt.Errorf("pod owned by %+v, want ShadowPod %s", owner, sp.UID)
		}
		return nil
	})
	if got := pod.Labels[offloadingv1alpha1.OriginClusterLabel]; got != shadowConsumer || pod.Labels["app"] != "web" {
		t.Errorf("pod labels %v, want the template's with origin %s (the ShadowPod's)", pod.Labels, shadowConsumer)
	}
	if pod.Annotations[offloadingv1alpha1.OriginUIDAnnotation] != "uid-at-the-consumer" || pod.Spec.Containers[0].Image != "registry.example/web:1" {
		t.Errorf("pod %v / %+v, not made from the template", pod.Annotations, pod.Spec.Containers)
	}
	return &pod
}

func shadowStatus(t *testing.T, c client.Client, sp *offloadingv1alpha1.ShadowPod, check func(*offloadingv1alpha1.ShadowPodStatus) error) {
	t.Helper()
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		var got offloadingv1alpha1.ShadowPod
		if err := c.Get(ctx, client.ObjectKeyFromObject(sp), &got); err != nil {
			return err
		}
		return check(&got.Status)
	})
}

func podCreated(st *offloadingv1alpha1.ShadowPodStatus) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, offloading.ConditionPodCreated)
}

// TestShadowPodKeepsItsPod, against a real API server: a ShadowPod's pod
// is made from its template, owned by it; deleted, it is made again (a
// new UID, counted); once it ended and went, it is not, and the ShadowPod
// goes.
func TestShadowPodKeepsItsPod(t *testing.T) {
	c, ns := startShadowPods(t, 0)
	ctx := t.Context()
	sp := shadowPod(ns, "web-1")
	if err := c.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	first := keptPod(t, c, sp, "")
	shadowStatus(t, c, sp, func(st *offloadingv1alpha1.ShadowPodStatus) error {
		if cond := podCreated(st); st.Recreations != 1 || cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("status %+v, want a pod made here (no virtual kubelet made one)", st)
		}
		return nil
	})

	// Deleted (by hand, or evicted) while nobody else looks: made again.
	if err := c.Delete(ctx, first, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	second := keptPod(t, c, sp, first.UID)
	shadowStatus(t, c, sp, func(st *offloadingv1alpha1.ShadowPodStatus) error {
		if st.Recreations != 2 {
			return fmt.Errorf("status %+v, want a second pod made here", st)
		}
		return nil
	})

	// It ends (a kubelet would say so), then goes: not made again.
	second.Status.Phase = corev1.PodSucceeded
	if err := c.Status().Update(ctx, second); err != nil {
		t.Fatal(err)
	}
	shadowStatus(t, c, sp, func(st *offloadingv1alpha1.ShadowPodStatus) error {
		if st.Ended != corev1.PodSucceeded {
			return fmt.Errorf("ended %q, want %s", st.Ended, corev1.PodSucceeded)
		}
		return nil
	})
	if err := c.Delete(ctx, second, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	// Nothing left to keep: the ShadowPod goes too (no garbage collector
	// runs here, and none is needed).
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		switch err := c.Get(ctx, client.ObjectKeyFromObject(sp), &offloadingv1alpha1.ShadowPod{}); {
		case err == nil:
			return errors.New("the ShadowPod of a pod that ended and went is still there")
		case !apierrors.IsNotFound(err):
			return err
		}
		return nil
	})
	envtest.Consistently(t, time.Second, func(ctx context.Context) error {
		switch err := c.Get(ctx, client.ObjectKeyFromObject(sp), &corev1.Pod{}); {
		case err == nil:
			return errors.New("a pod that ended was made again")
		case !apierrors.IsNotFound(err):
			return err
		}
		return nil
	})
}

// TestShadowPodRefusedOrNameTaken: a pod this cluster refuses (here its
// quota) is reported on the ShadowPod with the refusal, and made once it
// fits; a pod of the name the ShadowPod does not own is left alone.
func TestShadowPodRefusedOrNameTaken(t *testing.T) {
	c, ns := startShadowPods(t, 0)
	ctx := t.Context()
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "offer"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}
	if err := c.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// No quota controller runs here: its count, as it would write it.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if err := c.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// Once the API server's admission has the quota in its cache.
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}}}
		switch err := c.Create(ctx, probe, client.DryRunAll); {
		case err == nil:
			return errors.New("a pod over the quota (dry run) was admitted")
		case !apierrors.IsForbidden(err):
			return fmt.Errorf("a pod over the quota (dry run), want refused: %w", err)
		}
		return nil
	})
	sp := shadowPod(ns, "web-1")
	if err := c.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	shadowStatus(t, c, sp, func(st *offloadingv1alpha1.ShadowPodStatus) error {
		if cond := podCreated(st); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != offloading.ReasonPodRefused || !strings.Contains(cond.Message, "quota") {
			return fmt.Errorf("status %+v, want the quota's refusal", st)
		}
		return nil
	})
	if err := c.Delete(ctx, quota); err != nil {
		t.Fatal(err)
	}
	keptPod(t, c, sp, "")

	// A pod made by hand before its ShadowPod keeps its name.
	byHand := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-2"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "other", Image: "registry.example/other:1"}}},
	}
	if err := c.Create(ctx, byHand); err != nil {
		t.Fatal(err)
	}
	taken := shadowPod(ns, "web-2")
	if err := c.Create(ctx, taken); err != nil {
		t.Fatal(err)
	}
	shadowStatus(t, c, taken, func(st *offloadingv1alpha1.ShadowPodStatus) error {
		if cond := podCreated(st); cond == nil || cond.Reason != offloading.ReasonNameTaken {
			return fmt.Errorf("status %+v, want %s", st, offloading.ReasonNameTaken)
		}
		return nil
	})
	var still corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(byHand), &still); err != nil || still.UID != byHand.UID || metav1.GetControllerOf(&still) != nil {
		t.Errorf("the pod made by hand was touched: %v %+v", err, still.OwnerReferences)
	}
}

// TestShadowPodFirstPodIsTheVirtualKubelets: the pod of a new ShadowPod
// is left to the virtual kubelet that wrote it, which makes it at once:
// the one it made is kept, none is made beside it, nothing is refused,
// and nothing is written while it runs; its end is.
func TestShadowPodFirstPodIsTheVirtualKubelets(t *testing.T) {
	c, ns := startShadowPods(t, time.Minute)
	ctx := t.Context()
	sp := shadowPod(ns, "web-1")
	if err := c.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	theirs, err := offloading.ShadowPodPod(sp)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	theirs.Status.Phase = corev1.PodRunning
	if err := c.Status().Update(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	theirs.Status.Phase = corev1.PodFailed
	if err := c.Status().Update(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	shadowStatus(t, c, sp, func(st *offloadingv1alpha1.ShadowPodStatus) error {
		if st.Ended != corev1.PodFailed || st.Recreations != 0 || len(st.Conditions) != 0 {
			return fmt.Errorf("status %+v, want the virtual kubelet's pod's end alone, none made here", st)
		}
		return nil
	})
}

// TestShadowPodTemplateNotAPodSpec: a template whose spec does not decode
// as a PodSpec (which no schema refuses: the template has none) is its
// ShadowPod's error alone, reported on it; the controller keeps the
// others' pods.
func TestShadowPodTemplateNotAPodSpec(t *testing.T) {
	c, ns := startShadowPods(t, 0)
	ctx := t.Context()
	bad := shadowPod(ns, "bad")
	bad.Spec.Template.Spec = runtime.RawExtension{Raw: []byte(`{"terminationGracePeriodSeconds":"x","containers":[{"name":"c","image":{}}]}`)}
	if err := c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	shadowStatus(t, c, bad, func(st *offloadingv1alpha1.ShadowPodStatus) error {
		if cond := podCreated(st); cond == nil || cond.Reason != offloading.ReasonPodRefused || !strings.Contains(cond.Message, "spec.template.spec") {
			return fmt.Errorf("status %+v, want the template refused, naming spec.template.spec", st)
		}
		return nil
	})
	good := shadowPod(ns, "good")
	if err := c.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	keptPod(t, c, good, "")
}
