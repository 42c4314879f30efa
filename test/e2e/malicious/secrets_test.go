// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestSecretsStayHomeUnlessUsed: a provider gets the Secrets of an
// offloaded namespace that the namespace's pods use, not the others; a
// Secret's copy goes with the last pod that used it; a namespace that opts
// in (spec.secretReflection All) shares every Secret.
func TestSecretsStayHomeUnlessUsed(t *testing.T) {
	peered(t)
	a, b, _ := members()
	ctx := t.Context()
	const ns = "secrets-kept"
	remoteNS := remoteNamespaceOf(t, offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{}, 2), b.ClusterID)
	inA, inB := framework.Client(t, a), framework.Client(t, b)
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"password": name}}
	}
	inProvider := func(name string) (bool, error) {
		err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: name}, &corev1.Secret{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
	// The unused Secret first: the Secret reflector (one worker, in
	// order) has looked at it by the time it copies the used one.
	for _, name := range []string{"unused", "used"} {
		if err := inA.Create(ctx, secret(name)); err != nil {
			t.Fatal(err)
		}
	}
	node, err := framework.VirtualNode(inA, b.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	pod := pausePod(ns, "user")
	pod.Spec.NodeName = node.Name
	pod.Spec.Tolerations = []corev1.Toleration{{Key: offloadingv1alpha1.VirtualNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	pod.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "used"}}}}
	if err := inA.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		if ok, err := inProvider("used"); !ok {
			return fmt.Errorf("the Secret a pod uses is not in %s/%s yet (%w)", b.Name, remoteNS, err)
		}
		return nil
	})
	if ok, err := inProvider("unused"); ok || err != nil {
		t.Fatalf("the Secret no pod uses reached %s/%s (%v)", b.Name, remoteNS, err)
	}

	if err := inA.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		if ok, err := inProvider("used"); ok || err != nil {
			return fmt.Errorf("the Secret of a deleted pod is still in %s/%s (%w)", b.Name, remoteNS, err)
		}
		return nil
	})

	var no offloadingv1alpha1.NamespaceOffloading
	if err := inA.Get(ctx, client.ObjectKey{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(no.DeepCopy())
	no.Spec.SecretReflection = offloadingv1alpha1.ReflectAllSecrets
	if err := inA.Patch(ctx, &no, patch); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		for _, name := range []string{"unused", "used"} {
			if ok, err := inProvider(name); !ok {
				return fmt.Errorf("with secretReflection All, Secret %s is not in %s/%s yet (%w)", name, b.Name, remoteNS, err)
			}
		}
		return nil
	})
}
