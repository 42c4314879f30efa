// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package fabric_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestConsumerPointsServicesOnlyAtItsOwn: a Service without a selector,
// whose EndpointSlice is made by hand and lists a pod the provider runs
// at the address the consumer shows for it, reaches that pod from
// another offloaded pod: the slice's copy lists the pod at its address
// in the provider. The consumer's virtual kubelet, used directly, may
// write in its provider namespace only slices of its own addresses: its
// ranges as the provider reaches them, and its pods in that namespace;
// an address of the provider's own pod range, of its node, of loopback
// or of its own pod that ended, a slice of names, one under another
// manager and one with a finalizer are refused, naming the field, also
// as an update; a slice it keeps naming its pod
// after that pod went is removed by the provider; the other peers'
// tunnels stay established.
func TestConsumerPointsServicesOnlyAtItsOwn(t *testing.T) {
	peered(t)
	a, b, _ := members()
	ctx := t.Context()
	const ns = "handmade"
	inA, inB := framework.Client(t, a), framework.Client(t, b)
	framework.StartOffloading(t, a, []*playground.Member{b}, ns, offloadingv1alpha1.NamespaceOffloadingSpec{
		PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote,
	})
	var no *offloadingv1alpha1.NamespaceOffloading
	framework.Eventually(t, time.Minute, func() error {
		var err error
		no, err = framework.OffloadingReady(t, a, ns)
		return err
	})
	remoteNS := no.Status.RemoteNamespaces[0].Namespace
	onB := map[string]string{offloadingv1alpha1.RemoteClusterLabel: b.ClusterID}
	backend := framework.CheckPod(t, a, ns, "backend", onB, "serve", ":8080", "backend")
	var remote corev1.Pod
	framework.Eventually(t, time.Minute, func() error {
		if err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: backend.Name}, &remote); err != nil {
			return err
		}
		if remote.Status.PodIP == "" || remote.Status.PodIP == backend.Status.PodIP {
			return fmt.Errorf("the backend is at %q in %s, shown as %q in %s: want an address there, remapped here", remote.Status.PodIP, b.Name, backend.Status.PodIP, a.Name)
		}
		return nil
	})

	// The client that asks the Service below: a pod that ends.
	const ended = "client"
	t.Run("a slice made by hand reaches the pod from the provider's pods", func(t *testing.T) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "custom"}, Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		}}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "custom-1", Labels: map[string]string{
				discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "by-hand",
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{backend.Status.PodIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		}
		for _, o := range []client.Object{svc, slice} {
			if err := inA.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		var copied corev1.Service
		framework.Eventually(t, 30*time.Second, func() error {
			var es discoveryv1.EndpointSlice
			if err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: slice.Name}, &es); err != nil {
				return err
			}
			if len(es.Endpoints) != 1 || !slices.Equal(es.Endpoints[0].Addresses, []string{remote.Status.PodIP}) {
				return fmt.Errorf("the copy in %s lists %+v, want the backend's %s there", b.Name, es.Endpoints, remote.Status.PodIP)
			}
			return inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: svc.Name}, &copied)
		})
		url := fmt.Sprintf("http://%s:80/", copied.Spec.ClusterIP)
		got := framework.CheckResults(t, a, framework.CheckPod(t, a, ns, ended, onB, "get", url))
		if r := got[url]; !r.OK || r.Answer != "backend" {
			t.Errorf("an offloaded pod asking the Service %s at %s: %+v, want the backend's answer", svc.Name, url, r)
		}
	})

	vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))
	var tep netv1alpha1.TunnelEndpoint
	if err := inB.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &tep); err != nil {
		t.Fatal(err)
	}
	theirs, err := netip.ParsePrefix(tep.Spec.RemoteSeenAs.PodCIDR)
	if err != nil || tep.Spec.Local == nil {
		t.Fatalf("%s's TunnelEndpoint of %s: ranges %+v, local %+v", b.Name, a.Name, tep.Spec.RemoteSeenAs, tep.Spec.Local)
	}
	own, err := netip.ParsePrefix(tep.Spec.Local.PodCIDR)
	if err != nil {
		t.Fatal(err)
	}
	// An address of the provider's pod range that is no pod of the
	// consumer's there.
	var list corev1.PodList
	if err := inB.List(ctx, &list, client.InNamespace(remoteNS)); err != nil {
		t.Fatal(err)
	}
	victim := own.Addr().Next()
	for range 256 {
		if !slices.ContainsFunc(list.Items, func(p corev1.Pod) bool { return p.Status.PodIP == victim.String() }) {
			break
		}
		victim = victim.Next()
	}
	var nodes corev1.NodeList
	if err := inB.List(ctx, &nodes); err != nil || len(nodes.Items) == 0 || len(nodes.Items[0].Status.Addresses) == 0 {
		t.Fatalf("%s's nodes: %v, %d", b.Name, err, len(nodes.Items))
	}
	nodeAddress := nodes.Items[0].Status.Addresses[0].Address
	direct := func(name string, addressType discoveryv1.AddressType, addrs ...string) *discoveryv1.EndpointSlice {
		es := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: name, Labels: map[string]string{
				discoveryv1.LabelServiceName: "custom", discoveryv1.LabelManagedBy: "virtual-kubelet.liqo.io",
				offloadingv1alpha1.OriginClusterLabel: a.ClusterID,
			}},
			AddressType: addressType,
		}
		for _, addr := range addrs {
			es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr}})
		}
		return es
	}
	// The address the ended client had in the provider, which the
	// network may give another pod.
	endedAddress := func(t *testing.T) string {
		t.Helper()
		var p corev1.Pod
		if err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: ended}, &p); err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase != corev1.PodSucceeded || p.Status.PodIP == "" {
			t.Fatalf("the client in %s: %s at %q, want Succeeded with the address it had", b.Name, p.Status.Phase, p.Status.PodIP)
		}
		return p.Status.PodIP
	}
	t.Run("the virtual kubelet writes slices of its own addresses", func(t *testing.T) {
		framework.Allowed(t, "its pod in the namespace and its range as the provider sees it (dry run)",
			vk.Create(ctx, direct("direct-own", discoveryv1.AddressTypeIPv4, remote.Status.PodIP, theirs.Addr().Next().String()), client.DryRunAll))
	})
	t.Run("the virtual kubelet cannot point a Service at what is not its own", func(t *testing.T) {
		ownAddress := []string{theirs.Addr().Next().String()}
		for i, tc := range []struct {
			what        string
			addressType discoveryv1.AddressType
			addrs       []string
			field       string
			mutate      func(*discoveryv1.EndpointSlice)
		}{
			{"a pod address of the provider's that is not the consumer's", discoveryv1.AddressTypeIPv4, []string{remote.Status.PodIP, victim.String()}, "endpoints[1].addresses[0]", nil},
			{"the provider's node", discoveryv1.AddressTypeIPv4, []string{nodeAddress}, "endpoints[0].addresses[0]", nil},
			{"loopback", discoveryv1.AddressTypeIPv4, []string{"127.0.0.1"}, "endpoints[0].addresses[0]", nil},
			{"a name", discoveryv1.AddressTypeFQDN, []string{"kubernetes.default.svc.cluster.local"}, "addressType", nil},
			{"the address of its pod that ended", discoveryv1.AddressTypeIPv4, []string{endedAddress(t)}, "endpoints[0].addresses[0]", nil},
			// Out of the provider's second check's sight: a slice under
			// another manager, a slice a finalizer keeps after deletion.
			{"a slice under the provider's own manager", discoveryv1.AddressTypeIPv4, ownAddress, "metadata.labels[endpointslice.kubernetes.io/managed-by]",
				func(es *discoveryv1.EndpointSlice) {
					es.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
				}},
			{"a slice with a finalizer", discoveryv1.AddressTypeIPv4, ownAddress, "metadata.finalizers",
				func(es *discoveryv1.EndpointSlice) { es.Finalizers = []string{"example.com/keep"} }},
		} {
			t.Run(tc.what, func(t *testing.T) {
				es := direct(fmt.Sprintf("direct-refused-%d", i), tc.addressType, tc.addrs...)
				if tc.mutate != nil {
					tc.mutate(es)
				}
				err := vk.Create(ctx, es)
				framework.Refused(t, tc.what, err)
				if !strings.Contains(err.Error(), tc.field) {
					t.Errorf("%s: %v, want the refusal to name %s", tc.what, err, tc.field)
				}
			})
		}
		// What the virtual kubelet already wrote is held to the same.
		es := direct("direct-updated", discoveryv1.AddressTypeIPv4, theirs.Addr().Next().String())
		if err := vk.Create(ctx, es); err != nil {
			t.Fatal(err)
		}
		es.Endpoints[0].Addresses = []string{victim.String()}
		framework.Refused(t, "an update to the provider's pod range", vk.Update(ctx, es))
	})
	t.Run("a slice naming its pod goes when the pod does", func(t *testing.T) {
		brief := framework.CheckPod(t, a, ns, "brief", onB, "serve", ":8080", "brief")
		var there corev1.Pod
		framework.Eventually(t, time.Minute, func() error {
			if err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: brief.Name}, &there); err != nil {
				return err
			}
			if there.Status.PodIP == "" || there.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("the pod in %s: %s at %q", b.Name, there.Status.Phase, there.Status.PodIP)
			}
			return nil
		})
		// Allowed when written (its pod runs); kept by the consumer,
		// never written again.
		kept := direct("direct-kept", discoveryv1.AddressTypeIPv4, there.Status.PodIP)
		inRange := direct("direct-range", discoveryv1.AddressTypeIPv4, theirs.Addr().Next().String())
		for _, es := range []*discoveryv1.EndpointSlice{kept, inRange} {
			if err := vk.Create(ctx, es); err != nil {
				t.Fatalf("a slice naming its running pod or its range: %v", err)
			}
		}
		if err := inA.Delete(ctx, brief); err != nil {
			t.Fatal(err)
		}
		// The pod terminates first (its grace period), then goes.
		framework.Eventually(t, 2*time.Minute, func() error {
			switch err := inB.Get(ctx, client.ObjectKeyFromObject(kept), &discoveryv1.EndpointSlice{}); {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return err
			}
			return fmt.Errorf("%s still keeps the slice naming %s, the address of the pod that went", b.Name, there.Status.PodIP)
		})
		// What it may still name stays.
		if err := inB.Get(ctx, client.ObjectKeyFromObject(inRange), &discoveryv1.EndpointSlice{}); err != nil {
			t.Errorf("the slice naming the consumer's range: %v, want it kept", err)
		}
	})
	// The other peers' tunnels are untouched.
	waitTunnels(t, 30*time.Second, without(a)...)
}
