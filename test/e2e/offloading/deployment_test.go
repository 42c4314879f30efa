// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/internal/sharing"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestOffloadDeployment: a 100-replica Deployment in a namespace offloaded
// with the Remote strategy runs on the two virtual nodes, each pod Running
// locally and backed by exactly one provider pod; its ConfigMap and Secret
// exist in the providers and follow updates; a local Service lists no
// provider address, no network being agreed; a provider pod deleted by
// hand comes back; scaled to 0, no provider pod is left.
func TestOffloadDeployment(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := context.Background()
	cl := framework.Client(t, a)
	const ns, replicas = "offload-deploy", 100
	remotes := offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote})

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"}, Data: map[string]string{"GREETING": "hello"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-secret"}, StringData: map[string]string{"PASSWORD": "s3cret"}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
	}}
	dep := deployment(ns, "web", replicas)
	for _, o := range []client.Object{cm, secret, svc, dep} {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("every pod Running locally on a virtual node, backed by one provider pod", func(t *testing.T) {
		framework.Eventually(t, 2*time.Minute, func() error { return allRunning(t, ns, replicas) })
		framework.Eventually(t, 30*time.Second, func() error { return podPairs(t, ns, replicas) })
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		perNode := map[string]int{}
		for _, p := range pods.Items {
			perNode[p.Spec.NodeName]++
		}
		for node := range perNode {
			var n corev1.Node
			if err := cl.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
				t.Fatal(err)
			}
			if !sharing.IsVirtual(&n) {
				t.Errorf("pods on node %s, which is not virtual, with the Remote strategy", node)
			}
		}
		if len(perNode) != 2 {
			t.Errorf("pods on nodes %v, want both virtual nodes", perNode)
		}
	})

	t.Run("the ConfigMap and Secret exist in the providers and follow updates", func(t *testing.T) {
		check := func(greeting string) {
			framework.Eventually(t, 20*time.Second, func() error {
				for i, p := range []*playground.Member{b, c} {
					remoteNS := remoteNamespaceOf(remotes, p.ClusterID)
					var rcm corev1.ConfigMap
					if err := framework.Client(t, p).Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: cm.Name}, &rcm); err != nil {
						return fmt.Errorf("provider %d: %w", i, err)
					}
					if rcm.Data["GREETING"] != greeting {
						return fmt.Errorf("%s: GREETING=%q, want %q", p.Name, rcm.Data["GREETING"], greeting)
					}
					var rs corev1.Secret
					if err := framework.Client(t, p).Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: secret.Name}, &rs); err != nil {
						return fmt.Errorf("%s: %w", p.Name, err)
					}
					if string(rs.Data["PASSWORD"]) != "s3cret" {
						return fmt.Errorf("%s: secret PASSWORD=%q", p.Name, rs.Data["PASSWORD"])
					}
				}
				return nil
			})
		}
		check("hello")
		cm.Data["GREETING"] = "bonjour"
		if err := cl.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		check("bonjour")
	})

	t.Run("the Service has in each provider the cluster IP it has here", func(t *testing.T) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			t.Fatal(err)
		}
		sameIP := func(p *playground.Member) error {
			pc := framework.Client(t, p)
			var rs corev1.Service
			if err := pc.Get(ctx, client.ObjectKey{Namespace: remoteNamespaceOf(remotes, p.ClusterID), Name: svc.Name}, &rs); err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			if rs.Spec.ClusterIP == svc.Spec.ClusterIP {
				return nil
			}
			// Only another Service holding the address there excuses it.
			var all corev1.ServiceList
			if err := pc.List(ctx, &all); err != nil {
				return err
			}
			for _, o := range all.Items {
				if o.Spec.ClusterIP == svc.Spec.ClusterIP && o.UID != rs.UID {
					t.Logf("%s: %s/%s holds %s; the copy has %s", p.Name, o.Namespace, o.Name, svc.Spec.ClusterIP, rs.Spec.ClusterIP)
					return nil
				}
			}
			return fmt.Errorf("%s: the copy of %s has cluster IP %s, want %s, which is free there", p.Name, svc.Name, rs.Spec.ClusterIP, svc.Spec.ClusterIP)
		}
		framework.Eventually(t, 20*time.Second, func() error { return errors.Join(sameIP(b), sameIP(c)) })
	})

	t.Run("in each provider, the Service's copy lists the pods that run there", func(t *testing.T) {
		// The provider's EndpointSlice controller fills the copy; its
		// slices carry the copy's labels, and the reflector leaves them be.
		framework.Eventually(t, 30*time.Second, func() error {
			for _, p := range []*playground.Member{b, c} {
				pc := framework.Client(t, p)
				remoteNS := remoteNamespaceOf(remotes, p.ClusterID)
				var pods corev1.PodList
				if err := pc.List(ctx, &pods, client.InNamespace(remoteNS)); err != nil {
					return err
				}
				var slices discoveryv1.EndpointSliceList
				if err := pc.List(ctx, &slices, client.InNamespace(remoteNS), client.MatchingLabels{
					discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
				}); err != nil {
					return err
				}
				listed := 0
				for _, s := range slices.Items {
					listed += len(s.Endpoints)
				}
				if listed != len(pods.Items) || listed == 0 {
					return fmt.Errorf("%s: the Service's copy lists %d endpoints, want its %d pods", p.Name, listed, len(pods.Items))
				}
			}
			return nil
		})
	})

	t.Run("a local Service points to no address a provider chose", func(t *testing.T) {
		// No network is agreed with the providers here: the offloaded
		// pods (all Running, above) show no address, so the Service's
		// slices list none of them, not the providers' own addresses.
		framework.Eventually(t, 30*time.Second, func() error {
			var slices discoveryv1.EndpointSliceList
			if err := cl.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
				return err
			}
			if len(slices.Items) == 0 {
				return fmt.Errorf("no EndpointSlice of %s yet", svc.Name)
			}
			for _, s := range slices.Items {
				if len(s.Endpoints) > 0 {
					return fmt.Errorf("the Service lists %v, with no network to reach it", s.Endpoints[0].Addresses)
				}
			}
			return nil
		})
	})

	t.Run("a provider pod deleted by hand is created again", func(t *testing.T) {
		remoteNS := remoteNamespaceOf(remotes, b.ClusterID)
		pc := framework.Client(t, b)
		var pods corev1.PodList
		if err := pc.List(ctx, &pods, client.InNamespace(remoteNS)); err != nil || len(pods.Items) == 0 {
			t.Fatalf("no provider pods in %s (%v)", remoteNS, err)
		}
		victim := pods.Items[0]
		if err := pc.Delete(ctx, &victim, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 30*time.Second, func() error {
			var p corev1.Pod
			if err := pc.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: victim.Name}, &p); err != nil {
				return err
			}
			if p.UID == victim.UID {
				return fmt.Errorf("provider pod %s not replaced yet", victim.Name)
			}
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("provider pod %s is %s", victim.Name, p.Status.Phase)
			}
			return nil
		})
		framework.Eventually(t, 30*time.Second, func() error { return podPairs(t, ns, replicas) })
		framework.Eventually(t, 30*time.Second, func() error { return allRunning(t, ns, replicas) })
	})

	t.Run("scaled to 0, no provider pod is left", func(t *testing.T) {
		scale(t, ns, dep.Name, 0)
		framework.Eventually(t, 60*time.Second, func() error { return podPairs(t, ns, 0) })
		// Graceful termination in the provider takes its time; then
		// nothing is left, not even a terminating pod.
		framework.Eventually(t, 60*time.Second, func() error {
			for _, p := range []*playground.Member{b, c} {
				var pods corev1.PodList
				if err := framework.Client(t, p).List(ctx, &pods, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: a.ClusterID}); err != nil {
					return err
				}
				if len(pods.Items) != 0 {
					return fmt.Errorf("%s still has %d pods for the consumer", p.Name, len(pods.Items))
				}
			}
			return nil
		})
	})
}

func remoteNamespaceOf(remotes []offloadingv1alpha1.RemoteNamespaceStatus, provider string) string {
	for _, r := range remotes {
		if r.ClusterID == provider {
			return r.Namespace
		}
	}
	return ""
}

func scale(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	a, _, _ := members()
	cl := framework.Client(t, a)
	dep := deployment(ns, name, 0)
	if err := cl.Get(context.Background(), client.ObjectKeyFromObject(dep), dep); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(dep.DeepCopy())
	dep.Spec.Replicas = &replicas
	if err := cl.Patch(context.Background(), dep, patch); err != nil {
		t.Fatal(err)
	}
}
