// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package fabric_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/network/translation"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestPeerReachesWhatThePeeringExposes: through the tunnel, a consumer's
// pod opens connections to the pods its provider runs for it, and to no
// other pod of the provider (one of the provider's own, on the same
// node); once the provider's operator lets that consumer reach every pod
// (networkReach: AllPods on its ForeignCluster), it reaches that one too.
func TestPeerReachesWhatThePeeringExposes(t *testing.T) {
	peered(t)
	a, b, _ := members()
	ctx := t.Context()
	inA, inB := framework.Client(t, a), framework.Client(t, b)
	const ns, own = "reach", "provider-own"
	framework.StartOffloading(t, a, []*playground.Member{b}, ns, offloadingv1alpha1.NamespaceOffloadingSpec{
		PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingLocalAndRemote,
	})
	framework.Eventually(t, time.Minute, func() error { _, err := framework.OffloadingReady(t, a, ns); return err })
	if err := inB.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: own}}); err != nil {
		t.Fatal(err)
	}
	framework.DeleteOnCleanup(t, inB, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: own}})
	// A server of a's, offloaded to b, and one of b's own.
	exposed := framework.CheckPod(t, a, ns, "exposed", map[string]string{offloadingv1alpha1.RemoteClusterLabel: b.ClusterID}, "serve", ":8080", "exposed")
	hidden := framework.CheckPod(t, b, own, "hidden", nil, "serve", ":8080", "hidden")
	var tep netv1alpha1.TunnelEndpoint
	if err := inA.Get(ctx, client.ObjectKey{Name: b.ClusterID}, &tep); err != nil {
		t.Fatal(err)
	}
	hiddenInA, ok := translation.FromPeer(&tep, netip.MustParseAddr(hidden.Status.PodIP))
	if !ok {
		t.Fatalf("no view in %s of %s's pod %s: %+v", a.Name, b.Name, hidden.Status.PodIP, tep.Spec)
	}
	urls := []string{fmt.Sprintf("http://%s:8080/", exposed.Status.PodIP), fmt.Sprintf("http://%s:8080/", hiddenInA)}
	local := map[string]string{"kubernetes.io/hostname": a.RealNodeName(0)}

	got := framework.CheckResults(t, a, framework.CheckPod(t, a, ns, "client-1", local, append([]string{"get"}, urls...)...))
	if r := got[urls[0]]; !r.OK || r.Answer != "exposed" {
		t.Errorf("a's pod asking the pod b runs for a: %+v, want an answer", r)
	}
	if r := got[urls[1]]; r.OK {
		t.Errorf("a's pod reached b's own pod %s (seen as %s): %+v", hidden.Status.PodIP, hiddenInA, r)
	}

	// b's operator lets a reach every pod.
	setReach := func(ctx context.Context, reach netv1alpha1.NetworkReach) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			fc, err := foreigncluster.Find(ctx, inB, a.ClusterID)
			if err != nil {
				return err
			}
			if fc == nil {
				return fmt.Errorf("no ForeignCluster of %s in %s", a.Name, b.Name)
			}
			fc.Spec.NetworkReach = string(reach)
			return inB.Update(ctx, fc)
		})
	}
	framework.Cleanup(t, func(ctx context.Context) {
		if err := setReach(ctx, netv1alpha1.ReachPeering); err != nil {
			t.Error(err)
		}
	})
	if err := setReach(ctx, netv1alpha1.ReachAllPods); err != nil {
		t.Fatal(err)
	}
	got = framework.CheckResults(t, a, framework.CheckPod(t, a, ns, "client-2", local, "get", urls[1]))
	if r := got[urls[1]]; !r.OK || r.Answer != "hidden" {
		t.Errorf("a's pod asking b's own pod, every pod allowed: %+v, want an answer", r)
	}
}
