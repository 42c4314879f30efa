// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package install

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/clusterconfig"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/virtualkubelet/claims"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// volumeKeptByProvider is a claim of the StorageClass liqo, which the
// chart installs, used by an offloaded pod: the provider keeps it there,
// in the class its ClusterConfig maps its consumers' claims to, one of
// volumes made by hand (a local volume on its real node).
// The pod writes a file to it (kubectl cp through the virtual node), is
// deleted and made again, and reads the file back; the claim shows the
// provider's claim Bound; deleting the claim deletes the provider's (the
// class's reclaim policy is Delete) and the volume here.
func (e *realEnv) volumeKeptByProvider(ns string) {
	t := e.t
	t.Helper()
	ctx := t.Context()
	pc, cc := ctrlClient(t, e.provider), ctrlClient(t, e.consumer)

	// The provider's storage: one local volume on its real node, of the
	// class it gives its consumers, and how much of it they may keep.
	disk := filepath.Join(e.provider.Dir, "disk")
	if err := os.MkdirAll(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(disk, 0o777); err != nil { // the pod runs as 65532
		t.Fatal(err)
	}
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "local-disk"},
		Provisioner:       clusterconfig.NoProvisioner,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "provider-disk"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              class.Name,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: disk}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{e.provider.RealNodeName(0)}}},
			}}}},
		},
	}
	for _, o := range []client.Object{class, pv} {
		if err := pc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, o := range []client.Object{pv, class} {
			if err := pc.Delete(context.Background(), o); client.IgnoreNotFound(err) != nil {
				t.Errorf("deleting %s: %v", o.GetName(), err)
			}
		}
	})
	share := func(ctx context.Context, patch string) error {
		return pc.Patch(ctx, &configv1alpha1.ClusterConfig{ObjectMeta: metav1.ObjectMeta{Name: configv1alpha1.ClusterConfigName}},
			client.RawPatch(types.MergePatchType, []byte(patch)))
	}
	if err := share(ctx, `{"spec":{"sharingConfig":{"consumerStorageClass":"local-disk","consumerQuota":{"persistentVolumeClaims":2,"storage":"1Gi"}}}}`); err != nil {
		t.Fatal(err)
	}
	// Before the test goes on (to uninstall, which removes the kind).
	defer func() {
		if err := share(context.Background(), `{"spec":{"sharingConfig":{"consumerStorageClass":null,"consumerQuota":{"persistentVolumeClaims":null,"storage":null}}}}`); err != nil {
			t.Errorf("restoring the provider's ClusterConfig: %v", err)
		}
	}()
	framework.Eventually(t, time.Minute, func() error {
		var advs sharingv1alpha1.AdvertisementList
		if err := cc.List(ctx, &advs); err != nil {
			return err
		}
		for _, a := range advs.Items {
			if a.Spec.StorageClass == class.Name {
				return nil
			}
		}
		return fmt.Errorf("no offer names the provider's class %s yet", class.Name)
	})

	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(claims.StorageClass),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
		},
	}
	if err := cc.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	keeper := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "keeper", Namespace: ns},
			Spec: corev1.PodSpec{
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{
					Name: "probe", Image: localcluster.ProbeImage, ImagePullPolicy: corev1.PullNever,
					Command: []string{"/probe"}, Args: []string{"serve", ":8080", "keeper"},
					VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}}},
			},
		}
	}
	run := func() *corev1.Pod {
		t.Helper()
		pod := keeper()
		if err := cc.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 3*time.Minute, func() error {
			if err := cc.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			if pod.Status.Phase != corev1.PodRunning {
				var c corev1.PersistentVolumeClaim
				_ = cc.Get(ctx, client.ObjectKeyFromObject(claim), &c)
				return fmt.Errorf("pod %s on %q: %s; its claim %s, volume %q, %+v", pod.Name, pod.Spec.NodeName, pod.Status.Phase, c.Status.Phase, c.Spec.VolumeName, c.Status.Conditions)
			}
			return nil
		})
		return pod
	}
	gone := func(pod *corev1.Pod) {
		t.Helper()
		if err := cc.Delete(ctx, pod); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 2*time.Minute, func() error {
			if err := cc.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("pod %s still there (%w)", pod.Name, err)
			}
			return nil
		})
	}
	kubectl := func(args ...string) {
		t.Helper()
		if out, err := framework.KubectlAt(t, e.consumer.KubeconfigPath, "", append([]string{"--namespace", ns}, args...)...); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}

	dir := t.TempDir()
	data := make([]byte, 256<<10)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	in, out := filepath.Join(dir, "in.bin"), filepath.Join(dir, "out.bin")
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	pod := run()
	kubectl("cp", in, pod.Name+":/data/kept.bin")
	gone(pod)
	pod = run()
	kubectl("cp", pod.Name+":/data/kept.bin", out)
	back, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, data) {
		t.Fatalf("the pod made again read %d bytes from its claim, not the %d its first self wrote", len(back), len(data))
	}
	if _, err := os.Stat(filepath.Join(disk, "kept.bin")); err != nil {
		t.Fatalf("the file is not on the provider's disk: %v", err)
	}
	framework.Eventually(t, time.Minute, func() error {
		if err := cc.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return err
		}
		for _, c := range claim.Status.Conditions {
			if c.Type == claims.ConditionProviderBound && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("claim %s: no ProviderBound condition True: %+v", claim.Name, claim.Status.Conditions)
	})
	volume := claim.Spec.VolumeName

	// Deleting the claim deletes the provider's, and the volume here.
	gone(pod)
	if err := cc.Delete(ctx, claim); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		var left corev1.PersistentVolumeClaimList
		if err := pc.List(ctx, &left, client.HasLabels{offloadingv1alpha1.OriginClusterLabel}); err != nil {
			return err
		}
		if n := len(left.Items); n > 0 {
			return fmt.Errorf("%d claims of the consumer left in the provider", n)
		}
		err := cc.Get(ctx, client.ObjectKey{Name: volume}, &corev1.PersistentVolume{})
		if !apierrors.IsNotFound(err) {
			return errors.Join(fmt.Errorf("volume %s still in the consumer", volume), err)
		}
		return nil
	})
}
