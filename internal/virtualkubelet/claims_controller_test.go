// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package virtualkubelet_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
	"github.com/liqo-go/liqo/internal/virtualkubelet/claims"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
)

// offerStorage makes the provider's offer name class as the one the
// consumer's claims are made with there.
func offerStorage(t *testing.T, c client.Client, class string) {
	t.Helper()
	ctx := t.Context()
	ns := discoveryv1alpha1.TenantNamespace(testProvider)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	now := time.Now()
	adv := &sharingv1alpha1.Advertisement{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharingv1alpha1.AdvertisementName(testProvider)},
		Spec: sharingv1alpha1.AdvertisementSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: testProvider, ClusterName: testProvider},
			Resources:       corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			StorageClass:    class,
			Timestamp:       metav1.NewTime(now), TimeToLive: metav1.NewTime(now.Add(time.Hour)),
		},
	}
	err := c.Create(ctx, adv)
	if err == nil {
		// Other tests make the offer of their own.
		t.Cleanup(func() { _ = c.Delete(context.Background(), adv) })
	}
	if apierrors.IsAlreadyExists(err) {
		var cur sharingv1alpha1.Advertisement
		if err := c.Get(ctx, client.ObjectKeyFromObject(adv), &cur); err != nil {
			t.Fatal(err)
		}
		cur.Spec.StorageClass = class
		err = c.Update(ctx, &cur)
		if err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
}

// provisioningFailed is nil once claim has a ProvisioningFailed event
// whose message says why.
func provisioningFailed(ctx context.Context, c client.Client, claim *corev1.PersistentVolumeClaim, why string) error {
	var evs corev1.EventList
	if err := c.List(ctx, &evs, client.InNamespace(claim.Namespace)); err != nil {
		return err
	}
	for _, e := range evs.Items {
		if e.InvolvedObject.UID == claim.UID && e.Reason == "ProvisioningFailed" && strings.Contains(e.Message, why) {
			return nil
		}
	}
	return fmt.Errorf("no ProvisioningFailed event on claim %s saying %q", claim.Name, why)
}

// TestClaimsKeptByTheProvider: a claim of class liqo that the scheduler
// gave the virtual node (as it does for a pod's claim that binds when
// first used) is made in the provider's namespace with the class the
// provider's offer names, its size and modes, and none of the
// annotations the consumer's controllers set; a volume here, pinned to
// the provider's virtual nodes, binds it. The provider claim's phase comes back as
// the ProviderBound condition; once the claim is gone and its volume
// released, the provider's claim and the volume go. A claim given a node
// that is not virtual is made nowhere, and says why.
func TestClaimsKeptByTheProvider(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	offerStorage(t, w.c, "fast")
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "data", Labels: map[string]string{"app": "db"},
			Annotations: map[string]string{claims.SelectedNodeAnnotation: testNode, "volume.kubernetes.io/storage-provisioner": claims.Provisioner}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(claims.StorageClass),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}},
		},
	}
	if err := w.c.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	var pv corev1.PersistentVolume
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		obj := w.mem.Object(testProvider, provider.PersistentVolumeClaims, w.remoteNS, claim.Name)
		if obj == nil {
			return errors.New("no claim in the provider")
		}
		remote := obj.(*corev1.PersistentVolumeClaim)
		size := remote.Spec.Resources.Requests[corev1.ResourceStorage]
		if ptr.Deref(remote.Spec.StorageClassName, "") != "fast" || size.String() != "2Gi" || remote.Labels["app"] != "db" ||
			remote.Labels[offloadingv1alpha1.OriginClusterLabel] != testConsumer || remote.Annotations[offloadingv1alpha1.OriginUIDAnnotation] != string(claim.UID) {
			return fmt.Errorf("the provider's claim: %+v", remote)
		}
		for k := range remote.Annotations {
			if strings.HasPrefix(k, "volume.kubernetes.io/") {
				return fmt.Errorf("the provider's claim carries the consumer's %s", k)
			}
		}
		if err := w.c.Get(ctx, client.ObjectKey{Name: claims.VolumeName(claim)}, &pv); err != nil {
			return err
		}
		ref, terms := pv.Spec.ClaimRef, pv.Spec.NodeAffinity.Required.NodeSelectorTerms
		if ref == nil || ref.UID != claim.UID || pv.Spec.StorageClassName != claims.StorageClass || pv.Annotations[claims.RemoteUIDAnnotation] != string(remote.UID) ||
			len(terms) != 1 || len(terms[0].MatchExpressions) != 2 || terms[0].MatchExpressions[0].Key != offloadingv1alpha1.VirtualNodeLabel ||
			terms[0].MatchExpressions[1].Key != offloadingv1alpha1.RemoteClusterLabel || terms[0].MatchExpressions[1].Values[0] != testProvider ||
			pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
			return fmt.Errorf("the volume here: %+v", pv)
		}
		return nil
	})

	// Bound here (the PV controller's part) and there.
	claim.Spec.VolumeName = pv.Name
	if err := w.c.Update(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if err := w.mem.Change(testProvider, provider.PersistentVolumeClaims, w.remoteNS, claim.Name, func(o client.Object) {
		c := o.(*corev1.PersistentVolumeClaim)
		c.Status.Phase, c.Status.Capacity = corev1.ClaimBound, corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("4Gi")}
	}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return err
		}
		for _, c := range claim.Status.Conditions {
			if c.Type == claims.ConditionProviderBound && c.Status == corev1.ConditionTrue && strings.Contains(c.Message, "4Gi") {
				return nil
			}
		}
		return fmt.Errorf("no ProviderBound condition True naming the provider's 4Gi: %+v", claim.Status.Conditions)
	})

	// Released (the claim is gone): the provider's claim goes, then the volume.
	if err := w.c.Delete(ctx, claim); err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = corev1.VolumeReleased
	if err := w.c.Status().Update(ctx, &pv); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if w.mem.Object(testProvider, provider.PersistentVolumeClaims, w.remoteNS, claim.Name) != nil {
			return errors.New("the provider's claim is still there")
		}
		// Deleted: its pv-protection finalizer, which no controller
		// removes here, keeps it.
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(&pv), &pv); !apierrors.IsNotFound(err) && (err != nil || pv.DeletionTimestamp == nil) {
			return fmt.Errorf("the volume is not deleted: %w", err)
		}
		return nil
	})

	// A node that is not virtual: nothing made, and the claim says why.
	real := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "real-" + w.localNS}}
	if err := w.c.Create(ctx, real); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.c.Delete(context.Background(), real) })
	stray := claim.DeepCopy()
	stray.ObjectMeta = metav1.ObjectMeta{Namespace: w.localNS, Name: "stray", Annotations: map[string]string{claims.SelectedNodeAnnotation: real.Name}}
	stray.Spec.VolumeName = ""
	if err := w.c.Create(ctx, stray); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		return provisioningFailed(ctx, w.c, stray, "not a virtual node")
	})
	if w.mem.Object(testProvider, provider.PersistentVolumeClaims, w.remoteNS, stray.Name) != nil {
		t.Error("a claim given a real node was made in the provider")
	}
}

// TestOrphanProviderClaims: a provider claim that no claim here stands
// for and that no pod can have written to (not bound there) goes, for a
// claim deleted before its volume was made, or an earlier claim of a
// name a new claim takes; a bound one stays, and the new claim of its
// name is made nowhere and says why.
func TestOrphanProviderClaims(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	offerStorage(t, w.c, "fast")
	remote := func(name, origin string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.remoteNS, Name: name,
				Labels:      map[string]string{offloadingv1alpha1.OriginClusterLabel: testConsumer},
				Annotations: map[string]string{offloadingv1alpha1.OriginUIDAnnotation: origin}},
			Spec:   corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("fast")},
			Status: corev1.PersistentVolumeClaimStatus{Phase: phase},
		}
	}
	local := func(name string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: name, Annotations: map[string]string{claims.SelectedNodeAnnotation: testNode}},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: ptr.To(claims.StorageClass),
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
	}
	// The view is open once the namespace is reflected into.
	if _, err := w.mem.Namespace(ctx, testProvider, w.localNS, w.remoteNS); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*corev1.PersistentVolumeClaim{
		remote("lonely", "deleted-before-its-volume", corev1.ClaimPending),
		remote("taken", "an-earlier-claim", corev1.ClaimPending),
		remote("written", "an-earlier-claim-bound-there", corev1.ClaimBound),
	} {
		if err := w.mem.Put(testProvider, r); err != nil {
			t.Fatal(err)
		}
	}
	taken, written := local("taken"), local("written")
	for _, c := range []*corev1.PersistentVolumeClaim{taken, written} {
		if err := w.c.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	origin := func(name string) string {
		obj := w.mem.Object(testProvider, provider.PersistentVolumeClaims, w.remoteNS, name)
		if obj == nil {
			return ""
		}
		return obj.GetAnnotations()[offloadingv1alpha1.OriginUIDAnnotation]
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if o := origin("lonely"); o != "" {
			return fmt.Errorf("the claim of a claim deleted before its volume is still there (%s)", o)
		}
		if o := origin("taken"); o != string(taken.UID) {
			return fmt.Errorf("the provider's claim taken is %q's, want the new claim's %s", o, taken.UID)
		}
		return provisioningFailed(ctx, w.c, written, "earlier claim of this name")
	})
	if o := origin("written"); o != "an-earlier-claim-bound-there" {
		t.Errorf("a bound provider claim of an earlier claim was replaced or deleted (origin %q)", o)
	}
	if err := w.c.Get(ctx, client.ObjectKey{Name: claims.VolumeName(written)}, &corev1.PersistentVolume{}); !apierrors.IsNotFound(err) {
		t.Errorf("a volume was made for the claim whose name a bound provider claim holds: %v", err)
	}
}

// TestRetainedClaimStays: with the liqo class's reclaim policy Retain,
// the volume says so; released, it stays, and so does the provider's
// claim, whose name a new claim then cannot take (it says why, and gets
// no volume of the earlier claim's data).
func TestRetainedClaimStays(t *testing.T) {
	w := startReflectors(t)
	ctx := t.Context()
	offerStorage(t, w.c, "fast")
	class := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: claims.StorageClass}, Provisioner: claims.Provisioner,
		ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain), VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if err := w.c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.c.Delete(context.Background(), class) })
	newClaim := func() *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.localNS, Name: "kept", Annotations: map[string]string{claims.SelectedNodeAnnotation: testNode}},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: ptr.To(claims.StorageClass),
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
	}
	first := newClaim()
	if err := w.c.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	var pv corev1.PersistentVolume
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := w.c.Get(ctx, client.ObjectKey{Name: claims.VolumeName(first)}, &pv); err != nil {
			return err
		}
		if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
			return fmt.Errorf("the volume's reclaim policy is %s, want the class's Retain", pv.Spec.PersistentVolumeReclaimPolicy)
		}
		return nil
	})
	// Bound there, then released here.
	if err := w.mem.Change(testProvider, provider.PersistentVolumeClaims, w.remoteNS, first.Name, func(o client.Object) {
		o.(*corev1.PersistentVolumeClaim).Status.Phase = corev1.ClaimBound
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	// No pod uses it: its protection goes (the pvc-protection
	// controller's part).
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		var c corev1.PersistentVolumeClaim
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(first), &c); err != nil {
			return client.IgnoreNotFound(err)
		}
		c.Finalizers = nil
		if err := w.c.Update(ctx, &c); err != nil {
			return err
		}
		return errors.New("the claim was still there")
	})
	pv.Status.Phase = corev1.VolumeReleased
	if err := w.c.Status().Update(ctx, &pv); err != nil {
		t.Fatal(err)
	}
	second := newClaim()
	if err := w.c.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		return provisioningFailed(ctx, w.c, second, "earlier claim of this name")
	})
	if obj := w.mem.Object(testProvider, provider.PersistentVolumeClaims, w.remoteNS, first.Name); obj == nil ||
		obj.GetAnnotations()[offloadingv1alpha1.OriginUIDAnnotation] != string(first.UID) {
		t.Errorf("the retained provider claim is gone or replaced: %v", obj)
	}
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(&pv), &pv); err != nil || pv.DeletionTimestamp != nil {
		t.Errorf("the retained volume: %v, deleted at %v", err, pv.DeletionTimestamp)
	}
	if err := w.c.Get(ctx, client.ObjectKey{Name: claims.VolumeName(second)}, &corev1.PersistentVolume{}); !apierrors.IsNotFound(err) {
		t.Errorf("a volume was made for the new claim: %v", err)
	}
}
