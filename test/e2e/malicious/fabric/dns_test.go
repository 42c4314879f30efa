// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package fabric_test

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/network/netcheck"
	"github.com/liqo-go/liqo/internal/offloading"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestOneConsumerCannotUseAnothersDNS: c runs Liqo's DNS proxy, and
// gives each of its consumers, a and b, a DNS address of its own (a
// Service, a port of the proxy), where its pods' queries are asked with
// its namespace names and count against its budget. b, turned hostile,
// has its pod in c ask at a's port of the proxy: refused (a's budget is
// a's), while at its own port it is served, and so is a's pod at a's.
// The proxy asks no cluster DNS here (the suite's clusters run none:
// its upstream is a closed port of its own pod), so a query served gets
// SERVFAIL: what matters is that it is served, not refused.
func TestOneConsumerCannotUseAnothersDNS(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	inC := framework.Client(t, c)
	const nsA, nsB = "dns-of-a", "dns-of-b"
	spec := offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote}
	framework.StartOffloading(t, a, []*playground.Member{b, c}, nsA, spec)
	framework.StartOffloading(t, b, []*playground.Member{c}, nsB, spec)
	for _, m := range []struct {
		m  *playground.Member
		ns string
	}{{a, nsA}, {b, nsB}} {
		framework.Eventually(t, time.Minute, func() error { _, err := framework.OffloadingReady(t, m.m, m.ns); return err })
	}

	// Where the proxy of c listens for each consumer: its pod's own
	// address, the target port of the consumer's DNS Service.
	ports := map[string]int32{}
	var proxyIP string
	framework.Eventually(t, 2*time.Minute, func() error {
		for _, m := range []*playground.Member{a, b} {
			var svc corev1.Service
			if err := inC.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: offloading.DNSServiceName(m.ClusterID)}, &svc); err != nil {
				return fmt.Errorf("the DNS Service of %s in %s: %w", m.Name, c.Name, err)
			}
			ports[m.Name] = svc.Spec.Ports[0].TargetPort.IntVal
		}
		var pods corev1.PodList
		if err := inC.List(ctx, &pods, client.InNamespace(install.DefaultNamespace),
			client.MatchingLabels{"app.kubernetes.io/component": offloading.DNSProxyComponent}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				proxyIP = p.Status.PodIP
				return nil
			}
		}
		return fmt.Errorf("no DNS proxy running in %s: %d pods", c.Name, len(pods.Items))
	})
	if ports[a.Name] == ports[b.Name] {
		t.Fatalf("a and b have one port of the proxy: %d", ports[a.Name])
	}
	url := func(of *playground.Member) string {
		return "dns://" + net.JoinHostPort(proxyIP, strconv.Itoa(int(ports[of.Name]))) + "/kubernetes.default.svc.cluster.local"
	}

	// A pod of each consumer in c, left running to be asked from.
	onC := map[string]string{offloadingv1alpha1.RemoteClusterLabel: c.ClusterID}
	clientOfA := framework.CheckPod(t, a, nsA, "asker", onC, "serve", ":8080", "asker")
	clientOfB := framework.CheckPod(t, b, nsB, "asker", onC, "serve", ":8080", "asker")
	ask := func(m *playground.Member, pod *corev1.Pod, u string) (netcheck.Result, error) {
		out, err := framework.Kubectl(t, m, "", "--namespace", pod.Namespace, "exec", pod.Name, "--", "/liqo-gateway", "check", "get", u)
		for _, r := range netcheck.ParseResults([]byte(out)) {
			if r.URL == u {
				return r, nil
			}
		}
		return netcheck.Result{}, fmt.Errorf("%s's pod asking %s: no result: %w: %s", m.Name, u, err, out)
	}

	// b's pod at a's port: refused, once the proxy knows the pod's
	// address (the pod's own status reaches it through c's API server).
	framework.Eventually(t, time.Minute, func() error {
		r, err := ask(b, clientOfB, url(a))
		if err != nil {
			return err
		}
		if r.Answer != "REFUSED" {
			return fmt.Errorf("b's pod asking at a's port of c's DNS proxy: %+v, want REFUSED", r)
		}
		return nil
	})
	for _, q := range []struct {
		who  string
		m    *playground.Member
		pod  *corev1.Pod
		port *playground.Member
	}{{"b's pod at b's port", b, clientOfB, b}, {"a's pod at a's port", a, clientOfA, a}} {
		r, err := ask(q.m, q.pod, url(q.port))
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK || r.Answer == "REFUSED" {
			t.Errorf("%s: %+v, want it served (SERVFAIL: no cluster DNS here)", q.who, r)
		}
	}
}
