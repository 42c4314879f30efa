// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package claims

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider/memory"
)

// TestDeleteOrphans: of the provider claims of a claim's name, those that
// cannot hold data (Pending, no volume there) and that no volume here
// stands for go, but the current claim's own in its provider; a bound
// one, one whose phase is unknown, one with a volume there, or one a
// volume here (in that provider) stands for stays.
func TestDeleteOrphans(t *testing.T) {
	const local, remoteNS, name, current, uid = "web", "web-x", "data", "p1", types.UID("u1")
	volume := func(origin, providerID string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: volumeName(types.UID(origin)),
			Labels:      map[string]string{offloadingv1alpha1.RemoteClusterLabel: providerID},
			Annotations: map[string]string{RemoteNamespaceAnnotation: remoteNS}}}
	}
	for _, tc := range []struct {
		what       string
		in         string
		origin     string
		phase      corev1.PersistentVolumeClaimPhase
		volumeName string
		volume     *corev1.PersistentVolume
		gone, here bool
	}{
		{what: "an earlier claim's, never bound", in: current, origin: "u0", phase: corev1.ClaimPending, gone: true, here: true},
		{what: "an earlier claim's, its volume here released", in: current, origin: "u0", phase: corev1.ClaimPending, volume: volume("u0", current)},
		{what: "an earlier claim's, a volume here of another provider", in: current, origin: "u0", phase: corev1.ClaimPending, volume: volume("u0", "p2"), gone: true, here: true},
		{what: "an earlier claim's, bound there", in: current, origin: "u0", phase: corev1.ClaimBound},
		{what: "one whose phase is not known", in: current, origin: "u0"},
		{what: "one with a volume there", in: current, origin: "u0", phase: corev1.ClaimPending, volumeName: "pv-1"},
		{what: "this claim's in another provider", in: "p2", origin: string(uid), phase: corev1.ClaimPending, gone: true},
		{what: "this claim's in its provider", in: current, origin: string(uid), phase: corev1.ClaimPending},
	} {
		t.Run(tc.what, func(t *testing.T) {
			mem := memory.New()
			for _, id := range []string{current, "p2"} {
				if _, err := mem.Namespace(t.Context(), id, local, remoteNS); err != nil {
					t.Fatal(err)
				}
			}
			if err := mem.Put(tc.in, &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: name, Annotations: map[string]string{offloadingv1alpha1.OriginUIDAnnotation: tc.origin}},
				Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: tc.volumeName},
				Status:     corev1.PersistentVolumeClaimStatus{Phase: tc.phase},
			}); err != nil {
				t.Fatal(err)
			}
			b := fake.NewClientBuilder()
			if tc.volume != nil {
				b = b.WithObjects(tc.volume)
			}
			r := &Reflector{Client: b.Build(), Providers: mem}
			here, err := r.deleteOrphans(t.Context(), local, name, current, uid)
			if err != nil {
				t.Fatal(err)
			}
			gone := mem.Object(tc.in, provider.PersistentVolumeClaims, remoteNS, name) == nil
			if gone != tc.gone || here != tc.here {
				t.Errorf("deleted %v (in the current provider: %v), want %v (%v)", gone, here, tc.gone, tc.here)
			}
		})
	}
}
