// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/clusterconfig"
	"github.com/liqo-go/liqo/internal/offloading"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestClaimsHeldToThePeering: a consumer's virtual kubelet, with its real
// identity in a provider, makes the claims of its pods' volumes there.
// It gets the class the provider gives its consumers (here its default
// class) and nothing else: no better class, no class at all (which could
// bind a class-less volume of the provider's), no volume of the
// provider's named or selected (one is Available, and stays so), no copy
// of another claim, no node chosen; no claim without its origin, none outside its
// namespaces, no change to one; no generic ephemeral volume, whose claim
// the provider's own controller would make; and no more claims, nor
// storage, than its quota. The other provider serves throughout.
func TestClaimsHeldToThePeering(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	remoteNS := remoteNamespaceOf(t, offload(t, "claimed", offloadingv1alpha1.NamespaceOffloadingSpec{}, 2), b.ClusterID)
	inB := framework.Client(t, b)
	vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))

	// The provider's storage: its default class, a better one, and a
	// volume of its own, Available to any claim of no class.
	standard := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "claims-standard", Annotations: map[string]string{clusterconfig.DefaultStorageClassAnnotation: "true"}},
		Provisioner:       "example.com/disk",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	gold := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "claims-gold"}, Provisioner: "example.com/ssd"}
	secret := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "claims-finance-data"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/finance"}},
		},
	}
	for _, o := range []client.Object{standard, gold, secret} {
		if err := inB.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		framework.DeleteOnCleanup(t, inB, o)
	}
	framework.SetClusterConfig(t, b, func(spec *configv1alpha1.ClusterConfigSpec) {
		spec.SharingConfig.ConsumerQuota.PersistentVolumeClaims = ptr.To[int64](6)
		spec.SharingConfig.ConsumerQuota.Storage = ptr.To(resource.MustParse("6Gi"))
	})
	t.Cleanup(func() {
		framework.SetClusterConfig(t, b, func(spec *configv1alpha1.ClusterConfigSpec) {
			spec.SharingConfig.ConsumerQuota.PersistentVolumeClaims, spec.SharingConfig.ConsumerQuota.Storage = nil, nil
		})
	})
	claim := func(name string, change func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
		c := labelled(&corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: ptr.To(standard.Name),
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Mi")}},
			},
		}, a)
		if change != nil {
			change(c)
		}
		return c
	}
	// The class in force and the quota reach the API server's admission
	// through informers: within moments.
	var quota corev1.ResourceQuota
	framework.Eventually(t, time.Minute, func() error {
		var cc configv1alpha1.ClusterConfig
		if err := inB.Get(ctx, client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cc); err != nil {
			return err
		}
		if cc.Status.ConsumerStorageClass != standard.Name {
			return fmt.Errorf("the provider's class for consumers is %q, want its default %s", cc.Status.ConsumerStorageClass, standard.Name)
		}
		if err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: offloading.OfferQuotaName}, &quota); err != nil {
			return err
		}
		if n := quota.Status.Hard[corev1.ResourcePersistentVolumeClaims]; n.Value() < 2 {
			return fmt.Errorf("the quota of %s enforces %s claims, want at least 2 of the 6 allowed", remoteNS, n.String())
		}
		return vk.Create(ctx, claim("direct-probe", nil), client.DryRunAll)
	})

	t.Run("another class, none, a volume of the provider's, a copy", func(t *testing.T) {
		for _, tc := range []struct {
			name, field string
			change      func(*corev1.PersistentVolumeClaim)
		}{
			{"a better class", "spec.storageClassName", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To(gold.Name) }},
			{"no class", "spec.storageClassName", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("") }},
			{"the provider's volume named", "spec.volumeName", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = secret.Name }},
			{"a node chosen", "metadata.annotations", func(c *corev1.PersistentVolumeClaim) {
				c.Annotations = map[string]string{"volume.kubernetes.io/selected-node": b.Name + "-control-plane"}
			}},
			{"a volume selected", "spec.selector", func(c *corev1.PersistentVolumeClaim) {
				c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "finance"}}
			}},
			{"a copy of another claim", "spec.dataSourceRef", func(c *corev1.PersistentVolumeClaim) {
				c.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "someone-elses"}
			}},
		} {
			err := vk.Create(ctx, claim("direct-bad", tc.change))
			framework.Refused(t, "a claim with "+tc.name, err)
			if !strings.Contains(err.Error(), tc.field+":") {
				t.Errorf("a claim with %s: %v, want %s named", tc.name, err, tc.field)
			}
		}
	})

	t.Run("without its origin, elsewhere, changed", func(t *testing.T) {
		unlabelled := claim("direct-unlabelled", nil)
		unlabelled.Labels = nil
		framework.Refused(t, "a claim without its origin", vk.Create(ctx, unlabelled))
		for _, elsewhere := range []string{"default", "liqo"} {
			framework.Refused(t, "a claim in "+elsewhere, vk.Create(ctx, claim("direct-elsewhere", func(c *corev1.PersistentVolumeClaim) { c.Namespace = elsewhere })))
		}
		kept := claim("direct-kept", nil)
		framework.Allowed(t, "a claim of the consumers' class", vk.Create(ctx, kept))
		kept.Labels["team"] = "finance"
		framework.Refused(t, "a change to a claim", vk.Update(ctx, kept))
	})

	t.Run("a generic ephemeral volume", func(t *testing.T) {
		pod := labelled(pausePod(remoteNS, "direct-scratch"), a)
		pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: claim("", func(c *corev1.PersistentVolumeClaim) {
				c.Spec.StorageClassName, c.Spec.VolumeName = ptr.To(""), secret.Name
			}).Spec},
		}}}}
		err := vk.Create(ctx, pod)
		framework.Refused(t, "a pod with a generic ephemeral volume", err)
		if !strings.Contains(err.Error(), "spec.volumes:") {
			t.Errorf("a pod with a generic ephemeral volume: %v, want spec.volumes named", err)
		}
	})

	t.Run("beyond the quota", func(t *testing.T) {
		hard := quota.Status.Hard[corev1.ResourceRequestsStorage]
		more := hard.DeepCopy()
		more.Add(resource.MustParse("1Gi"))
		err := vk.Create(ctx, claim("direct-big", func(c *corev1.PersistentVolumeClaim) { c.Spec.Resources.Requests[corev1.ResourceStorage] = more }))
		if err == nil || !strings.Contains(err.Error(), "exceeded quota") {
			t.Errorf("a claim of %s, the quota holding %s: %v, want refused for the quota", more.String(), hard.String(), err)
		}
		count := quota.Status.Hard[corev1.ResourcePersistentVolumeClaims]
		var err2 error
		for i := range count.Value() + 1 {
			if err2 = vk.Create(ctx, claim(fmt.Sprintf("direct-flood-%d", i), nil)); err2 != nil {
				break
			}
		}
		if err2 == nil || !strings.Contains(err2.Error(), "exceeded quota") {
			t.Errorf("more claims than the quota's %s: %v, want refused for the quota", count.String(), err2)
		}
		var claims corev1.PersistentVolumeClaimList
		if err := inB.List(ctx, &claims, client.InNamespace(remoteNS)); err != nil {
			t.Fatal(err)
		}
		if int64(len(claims.Items)) > count.Value() {
			t.Errorf("%d claims in %s, the quota allows %s", len(claims.Items), remoteNS, count.String())
		}
	})

	// The provider's own volume is still its own.
	if err := inB.Get(context.Background(), client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	if secret.Spec.ClaimRef != nil {
		t.Errorf("the provider's volume was claimed: %+v", secret.Spec.ClaimRef)
	}
	// The other provider serves throughout.
	requireReady(t, waitHeartbeats(t, a, c.ClusterID, 1))
}
