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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestConsumerClaimsHeldToTheConsumerClass: a consumer's virtual kubelet
// makes claims of the class this cluster gives its consumers alone
// (liqo-offloaded-claims): none while the ClusterConfig's status names
// none; then of that class, never another, never naming or selecting one
// of this cluster's volumes, never copying another volume, never placed
// or bound by the annotations this cluster's controllers use; a claim
// without its origin is refused as any object; and a pod's generic
// ephemeral volume, whose claim this cluster's controller would make of
// whatever class its template says, is refused.
func TestConsumerClaimsHeldToTheConsumerClass(t *testing.T) {
	cfg, admin := envtest.StartInstalled(t, "provider")
	ctx := t.Context()
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "work"}},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	vk := impersonating(t, cfg, "liqo-virtual-kubelet-consumer-1")
	claim := func(class string, change func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "work", Name: "data", Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: "consumer-1"}},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: ptr.To(class),
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if change != nil {
			change(c)
		}
		return c
	}
	cc := &configv1alpha1.ClusterConfig{ObjectMeta: metav1.ObjectMeta{Name: configv1alpha1.ClusterConfigName}}
	if err := admin.Create(ctx, cc); err != nil {
		t.Fatal(err)
	}
	// The API server may take a while to read the parameter's kind.
	envtest.Eventually(t, 45*time.Second, func(ctx context.Context) error {
		switch err := vk.Create(ctx, claim("fast", nil), client.DryRunAll); {
		case err == nil:
			return errors.New("a claim was admitted while this cluster names no class for its consumers")
		case !strings.Contains(err.Error(), "keeps no volumes for its consumers"):
			return fmt.Errorf("a claim with no consumer class, want refused saying so: %w", err)
		}
		return nil
	})
	cc.Status.ConsumerStorageClass = "fast"
	if err := admin.Status().Update(ctx, cc); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		return vk.Create(ctx, claim("fast", nil), client.DryRunAll)
	})
	for _, c := range []struct {
		field string
		claim *corev1.PersistentVolumeClaim
	}{
		{"spec.storageClassName", claim("other", nil)},
		{"spec.storageClassName", claim("", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = nil })},
		{"spec.volumeName", claim("fast", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "someone-elses" })},
		{"spec.selector", claim("fast", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "finance"}}
		})},
		{"spec.dataSourceRef", claim("fast", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "someone-elses"}
		})},
		{"metadata.annotations", claim("fast", func(c *corev1.PersistentVolumeClaim) {
			c.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "control-plane"}
		})},
		{"metadata.annotations", claim("fast", func(c *corev1.PersistentVolumeClaim) {
			c.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-provisioner": "example.com/other"}
		})},
		{"metadata.annotations", claim("fast", func(c *corev1.PersistentVolumeClaim) {
			c.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
		})},
		{"metadata.annotations", claim("fast", func(c *corev1.PersistentVolumeClaim) {
			c.Annotations = map[string]string{"csi.example.com/secret-name": "another-tenants"}
		})},
	} {
		err := vk.Create(ctx, c.claim, client.DryRunAll)
		if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), c.field+":") {
			t.Errorf("a claim breaking %s: %v, want refused naming it", c.field, err)
		}
	}
	unlabelled := claim("fast", func(c *corev1.PersistentVolumeClaim) { c.Labels = nil })
	if err := vk.Create(ctx, unlabelled, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "offloading.liqo.io/origin-cluster-id") {
		t.Errorf("a claim without its origin: %v, want refused by liqo-offloaded-objects", err)
	}
	// Not the consumer's: this cluster's own claims of any class.
	own := claim("other", func(c *corev1.PersistentVolumeClaim) { c.Labels = nil })
	if err := admin.Create(ctx, own, client.DryRunAll); err != nil {
		t.Errorf("this cluster's own claim: %v", err)
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "work", Name: "scratch", Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: "consumer-1"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}},
			Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: claim("other", nil).Spec},
			}}}},
		},
	}
	if err := vk.Create(ctx, pod, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "spec.volumes:") {
		t.Errorf("a pod with a generic ephemeral volume: %v, want refused naming spec.volumes", err)
	}
	if err := vk.Create(ctx, claim("fast", func(c *corev1.PersistentVolumeClaim) {
		c.Annotations = map[string]string{offloadingv1alpha1.OriginUIDAnnotation: "uid-1", offloadingv1alpha1.OriginNamespaceAnnotation: "web"}
	})); err != nil {
		t.Errorf("a claim of the consumers' class, with its origin's annotations: %v", err)
	}
}
