// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/offloading"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestShadowPodsHeldToThePeering: a consumer's virtual kubelet, with its
// real identity in a provider, writes the ShadowPods its provider makes
// pods from with the controller manager's identity. What the consumer
// could not run as a pod it cannot run through a template; it writes no
// status, none outside its namespaces, no more than its quota of pods; a
// pod made from its template is labelled with its own origin whatever the
// template says; the other provider serves on.
func TestShadowPodsHeldToThePeering(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	const ns = "shadowed"
	remoteNS := remoteNamespaceOf(t, offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{}, 2), b.ClusterID)
	inB := framework.Client(t, b)
	vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))
	// The quota counts ShadowPods (the provider counts them itself
	// until its quota controller knows them).
	var q corev1.ResourceQuota
	framework.Eventually(t, time.Minute, func() error {
		if err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: offloading.OfferQuotaName}, &q); err != nil {
			return err
		}
		if _, ok := q.Status.Used[offloading.QuotaShadowPods]; !ok {
			return fmt.Errorf("the quota of %s has not counted ShadowPods yet: %v", remoteNS, q.Status.Used)
		}
		return nil
	})
	// Written as a hostile consumer would: the template as it likes, not
	// as the virtual kubelet forges it.
	shadow := func(name string, change func(*corev1.PodSpec)) *offloadingv1alpha1.ShadowPod {
		pod := labelled(pausePod(remoteNS, name), a)
		if change != nil {
			change(&pod.Spec)
		}
		template, err := offloadingv1alpha1.NewShadowPodTemplate(maps.Clone(pod.Labels), nil, &pod.Spec)
		if err != nil {
			t.Fatal(err)
		}
		return &offloadingv1alpha1.ShadowPod{
			ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: name, Labels: maps.Clone(pod.Labels)},
			Spec:       offloadingv1alpha1.ShadowPodSpec{Template: template},
		}
	}

	t.Run("a template that reaches the provider's hosts", func(t *testing.T) {
		for _, tc := range []struct {
			name, field string
			mutate      func(*corev1.PodSpec)
		}{
			{"privileged", "securityContext.privileged", func(s *corev1.PodSpec) {
				s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
			}},
			{"host-network", "hostNetwork", func(s *corev1.PodSpec) { s.HostNetwork = true }},
			{"host-path", "volumes", func(s *corev1.PodSpec) {
				s.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			}},
			{"node-name", "nodeName", func(s *corev1.PodSpec) { s.NodeName = b.Name + "-control-plane" }},
			{"system-priority", "priorityClassName", func(s *corev1.PodSpec) { s.PriorityClassName = "system-node-critical" }},
		} {
			err := vk.Create(ctx, shadow("direct-"+tc.name, tc.mutate))
			framework.Refused(t, "a ShadowPod whose template is "+tc.name, err)
			if !strings.Contains(err.Error(), "spec.template.spec.") || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("a ShadowPod whose template is %s: %v, want the template's %s named", tc.name, err, tc.field)
			}
		}
	})

	t.Run("its status, another namespace", func(t *testing.T) {
		sp := shadow("direct-status", nil)
		framework.Allowed(t, "an ordinary ShadowPod", vk.Create(ctx, sp))
		sp.Status.Ended, sp.Status.Recreations = corev1.PodSucceeded, 1000
		framework.Refused(t, "writing a ShadowPod's status", vk.Status().Update(ctx, sp))
		for _, elsewhere := range []string{"default", "liqo"} {
			other := shadow("direct-elsewhere", nil)
			other.Namespace = elsewhere
			framework.Refused(t, "a ShadowPod in "+elsewhere, vk.Create(ctx, other))
		}
	})

	t.Run("another origin in its template", func(t *testing.T) {
		// The consumer's own virtual kubelet would delete the pod at once
		// (it has no local pod): a hostile consumer stops it.
		framework.StopControllerManager(t, a)
		sp := shadow("direct-origin", nil)
		sp.Spec.Template.Labels[offloadingv1alpha1.OriginClusterLabel] = c.ClusterID
		framework.Allowed(t, "a ShadowPod whose template names another origin", vk.Create(ctx, sp))
		// Nobody makes its pod here: the provider does, after its grace.
		framework.Eventually(t, offloading.DefaultFirstPodGrace+time.Minute, func() error {
			var pod corev1.Pod
			if err := inB.Get(ctx, client.ObjectKeyFromObject(sp), &pod); err != nil {
				return err
			}
			if got := pod.Labels[offloadingv1alpha1.OriginClusterLabel]; got != a.ClusterID {
				t.Fatalf("the pod made from the template is labelled from %q, want its ShadowPod's %s", got, a.ClusterID)
			}
			return nil
		})
	})

	t.Run("more ShadowPods than its pods", func(t *testing.T) {
		if err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: offloading.OfferQuotaName}, &q); err != nil {
			t.Fatal(err)
		}
		hard, pods := q.Spec.Hard[offloading.QuotaShadowPods], q.Spec.Hard[corev1.ResourcePods]
		if hard.Cmp(pods) != 0 {
			t.Fatalf("the quota of %s holds %s ShadowPods and %s pods, want as many", remoteNS, hard.String(), pods.String())
		}
		used := q.Status.Used[offloading.QuotaShadowPods]
		room := hard.Value() - used.Value()
		if room > 1000 {
			t.Fatalf("room for %d ShadowPods: more than this test tries", room)
		}
		// The consumer's other ShadowPods here may go meanwhile (its
		// virtual kubelet deletes what it did not make): a few more
		// tries than the room.
		var err error
		made, conflicts := int64(0), 0
		for made <= room+5 {
			// Its own, not made into pods soon: the quota counts the
			// ShadowPods themselves.
			sp := shadow(fmt.Sprintf("direct-many-%d", made), nil)
			sp.Labels["flood"] = "true"
			err = vk.Create(ctx, sp)
			// The quota changed under the API server's admission (the
			// controller manager balances it as ClusterConfigs and
			// demands change): not a refusal, tried again, a few times.
			if apierrors.IsConflict(err) && conflicts < 10 {
				conflicts++
				continue
			}
			if err != nil {
				break
			}
			made++
		}
		if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), string(offloading.QuotaShadowPods)) {
			t.Fatalf("ShadowPod %d, with room for %d: %v, want refused for the quota of ShadowPods", made+1, room, err)
		}
		var held offloadingv1alpha1.ShadowPodList
		if err := inB.List(ctx, &held, client.InNamespace(remoteNS)); err != nil {
			t.Fatal(err)
		}
		if int64(len(held.Items)) > hard.Value() || made < room-5 {
			t.Errorf("%d ShadowPods made with room for %d, %d held: want no more held than the quota's %d", made, room, len(held.Items), hard.Value())
		}
		// Gone before the provider makes their pods (after its grace).
		if err := inB.DeleteAllOf(ctx, &offloadingv1alpha1.ShadowPod{}, client.InNamespace(remoteNS), client.MatchingLabels{"flood": "true"}); err != nil {
			t.Fatal(err)
		}
	})

	// The other provider serves on.
	vn, err := framework.VirtualNode(framework.Client(t, a), c.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	requireReady(t, vn)
}
