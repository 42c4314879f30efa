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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/network/netcheck"
	"github.com/liqo-go/liqo/internal/network/translation"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// checkPod runs `liqo-gateway check args...` (the image the real nodes
// have) in ns of m, on a real node, as Pod Security restricted allows,
// and returns it once it has an address.
func checkPod(t *testing.T, m *playground.Member, ns, name string, nodeSelector map[string]string, args ...string) *corev1.Pod {
	t.Helper()
	c := framework.Client(t, m)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			NodeSelector:    nodeSelector,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "check", Image: playground.GatewayImageRepository + ":" + playground.GatewayImageTag, ImagePullPolicy: corev1.PullNever,
				Args:            append([]string{"check"}, args...),
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	if err := c.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.PodIP == "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("pod %s/%s in %s: %s, no address yet", ns, name, m.Name, pod.Status.Phase)
		}
		return nil
	})
	return pod
}

// results waits for a client pod to end and reads what it printed, by URL.
func results(t *testing.T, m *playground.Member, pod *corev1.Pod) map[string]netcheck.Result {
	t.Helper()
	c := framework.Client(t, m)
	framework.Eventually(t, 2*time.Minute, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("client %s: %s", pod.Name, pod.Status.Phase)
		}
		return nil
	})
	logs, err := framework.Clientset(t, m).CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]netcheck.Result{}
	for _, r := range netcheck.ParseResults(logs) {
		out[r.URL] = r
	}
	return out
}

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
	exposed := checkPod(t, a, ns, "exposed", map[string]string{offloadingv1alpha1.RemoteClusterLabel: b.ClusterID}, "serve", ":8080", "exposed")
	hidden := checkPod(t, b, own, "hidden", nil, "serve", ":8080", "hidden")
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

	got := results(t, a, checkPod(t, a, ns, "client-1", local, append([]string{"get"}, urls...)...))
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
	got = results(t, a, checkPod(t, a, ns, "client-2", local, "get", urls[1]))
	if r := got[urls[1]]; !r.OK || r.Answer != "hidden" {
		t.Errorf("a's pod asking b's own pod, every pod allowed: %+v, want an answer", r)
	}
}
