// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestProviderCannotPointOurServicesAnywhere: a provider that reports,
// for a pod it runs for its consumer, an address of its choosing (the
// consumer's own DNS Service, say) and a node address, gets neither shown
// on the consumer's pod: the consumer's Service selecting that pod lists
// no endpoint at that address, and the pod's condition names the address
// and why it is not shown. The other provider serves throughout.
func TestProviderCannotPointOurServicesAnywhere(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	const ns = "pointed"
	remoteNS := remoteNamespaceOf(t, offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{}, 2), b.ClusterID)
	inA, inB := framework.Client(t, a), framework.Client(t, b)
	node, err := framework.VirtualNode(inA, b.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	pod := pausePod(ns, "target")
	pod.Labels = map[string]string{"app": "target"}
	pod.Spec.NodeName = node.Name
	pod.Spec.Tolerations = []corev1.Toleration{{Key: offloadingv1alpha1.VirtualNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "target"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	for _, o := range []client.Object{pod, svc} {
		if err := inA.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	var remote corev1.Pod
	framework.Eventually(t, 30*time.Second, func() error {
		if err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: pod.Name}, &remote); err != nil {
			return err
		}
		if remote.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("provider pod %s", remote.Status.Phase)
		}
		return nil
	})
	// The address of a's API server Service, as b reports it.
	var apiServer corev1.Service
	if err := inA.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}, &apiServer); err != nil {
		t.Fatal(err)
	}
	target := apiServer.Spec.ClusterIP
	patch := fmt.Sprintf(`{"status":{"podIP":%q,"podIPs":[{"ip":%q}],"hostIP":"10.0.0.1","hostIPs":[{"ip":"10.0.0.1"}]}}`, target, target)
	if err := inB.Status().Patch(ctx, &remote, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		if err := inA.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == offloadingv1alpha1.ConditionPodAddress && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, target) {
				return nil
			}
		}
		return fmt.Errorf("pod %s shows %q (host %q), conditions %+v; want no address and why", pod.Name, pod.Status.PodIP, pod.Status.HostIP, pod.Status.Conditions)
	})
	// The host shown, if any, is the virtual node's, never the provider's.
	if pod.Status.PodIP != "" || len(pod.Status.PodIPs) != 0 || pod.Status.HostIP == "10.0.0.1" ||
		slices.ContainsFunc(pod.Status.HostIPs, func(h corev1.HostIP) bool { return h.IP == "10.0.0.1" }) {
		t.Errorf("pod %s shows %q %v, host %q %v: an address the provider chose", pod.Name, pod.Status.PodIP, pod.Status.PodIPs, pod.Status.HostIP, pod.Status.HostIPs)
	}
	var slices discoveryv1.EndpointSliceList
	if err := inA.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
		t.Fatal(err)
	}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			for _, addr := range e.Addresses {
				if addr == target {
					t.Errorf("the consumer's Service %s lists %s, the address the provider chose", svc.Name, addr)
				}
			}
		}
	}
	requireReady(t, waitHeartbeats(t, a, c.ClusterID, 1))
}
