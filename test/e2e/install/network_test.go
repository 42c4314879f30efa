// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package install

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/ctl/remove"
	"github.com/liqo-go/liqo/internal/ctl/testnetwork"
	liqoinstall "github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/netlab"
	"github.com/liqo-go/liqo/internal/network/gateway"
	"github.com/liqo-go/liqo/internal/network/routeagent"
	"github.com/liqo-go/liqo/internal/network/translation"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestNetworkOnRealNodes is the network fabric as an operator gets it: a
// consumer with two real nodes and two providers with one each, all three
// with the same pod range, installed with liqoctl (the gateways and route
// agents run as pods of the chart on the nodes), peered. Each tunnel comes
// up on its own; a real pod in the consumer, on the node without the
// gateway (through the route agent) and on the gateway's, reaches a real
// offloaded pod in each provider at the address the consumer's API shows
// for it, and through a Service, with answers that need the tunnel's MTU
// and MSS right; an offloaded pod reaches a pod of the consumer on the
// node without the gateway at the address its provider sees it at. The underlay
// between the gateways cut for 20 s, the tunnels go down and come back
// without new keys; a gateway restarted, its tunnel comes back. Uninstalled,
// nothing is left on the nodes: no interface, route or nftables table.
func TestNetworkOnRealNodes(t *testing.T) {
	skipWithoutRealNodes(t)
	ctx := t.Context()
	dir := t.TempDir()
	archives, ref, err := framework.BuildImages(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	// The consumer has two nodes: its pods on the one without the gateway
	// reach the peers through the route agent.
	e := startClusters(t, dir, []string{"consumer", "provider-a", "provider-b"}, []int{2}, archives...)
	for i, c := range e.clusters {
		if out, err := e.install(c, e.names[i], ref, ""); err != nil {
			t.Fatalf("install on %s: %v\n%s", e.names[i], err, out)
		}
	}
	cc := ctrlClient(t, e.consumer)
	consumerID := clusterID(t, cc)
	providers := e.clusters[1:]
	ids := make([]string, len(providers))
	for i, p := range providers {
		ids[i] = e.peerWith(p)
		// The virtual node is Ready: the peering is done. The network
		// follows it.
		peered := time.Now()
		waitNetwork(t, cc, ids[i], metav1.ConditionTrue, time.Minute)
		t.Logf("the tunnel to %s is established %s after its virtual node was Ready", e.names[i+1], time.Since(peered).Round(10*time.Millisecond))
		waitNetwork(t, ctrlClient(t, p), consumerID, metav1.ConditionTrue, 30*time.Second)
	}

	// The consumer's node with the gateway, and the other, whose route
	// agent sends the providers' ranges to the first.
	gw, otherNode, otherNetns := consumerNodes(t, e)
	gwNode := gw.name
	keysRanges := waitAgentRoutes(t, otherNetns, ids, cc)

	// The gateway's metrics, on its node's address: over HTTPS, to
	// callers the API server allows get on /metrics, and to no one else.
	reader := framework.ServiceAccountToken(t, e.consumer, framework.MetricsReader, liqoinstall.MetricsReaderName)
	stranger := framework.ServiceAccountToken(t, e.consumer, "metrics-stranger", "")
	for _, tc := range []struct {
		who, token string
		want       int
	}{{"no token", "", http.StatusUnauthorized}, {"a ServiceAccount without the role", stranger, http.StatusForbidden}, {"a metrics reader", reader, http.StatusOK}} {
		framework.Eventually(t, 10*time.Second, func() error {
			status, body, err := gatewayMetrics(t.Context(), gw.netns, net.JoinHostPort(gw.ip, "8082"), tc.token)
			if err != nil {
				return err
			}
			established := fmt.Sprintf("liqo_gateway_peer_established{peer=%q} 1", ids[0])
			if status != tc.want || (status == http.StatusOK) != strings.Contains(body, established) {
				return fmt.Errorf("the gateway's metrics to %s: status %d, want %d: %.200s", tc.who, status, tc.want, body)
			}
			return nil
		})
	}

	// A server pod in each provider, offloaded, and one in the consumer
	// (on the node without the gateway), in one namespace (offloaded with
	// LocalAndRemote: each pod is pinned); the client pods run on the
	// consumer's nodes, or offloaded.
	const work, local = "work", "local"
	offloadNamespace(t, cc, work, offloadingv1alpha1.PodOffloadingLocalAndRemote)
	if err := cc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: local}}); err != nil {
		t.Fatal(err)
	}
	servers := make([]*corev1.Pod, len(providers))
	for i := range providers {
		servers[i] = probePod(work, fmt.Sprintf("hello-%d", i), "serve", ":8080", "hello from "+e.names[i+1])
		servers[i].Spec.NodeSelector = map[string]string{offloadingv1alpha1.RemoteClusterLabel: ids[i]}
	}
	consumerServer := probePod(work, "consumer-server", "serve", ":8080", "hello from the consumer")
	consumerServer.Spec.NodeName = otherNode
	for _, p := range append(append([]*corev1.Pod{}, servers...), consumerServer) {
		if err := cc.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: work, Name: p.Name},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": p.Name}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		if err := cc.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range append(append([]*corev1.Pod{}, servers...), consumerServer) {
		waitRunning(t, cc, p)
	}

	// From the consumer: each provider's pod at the address the consumer's
	// EndpointSlice of its Service lists (its pod IP as the consumer sees
	// that provider's pods), and through the Service.
	var urls, want []string
	for i, s := range servers {
		var tep netv1alpha1.TunnelEndpoint
		if err := cc.Get(ctx, client.ObjectKey{Name: ids[i]}, &tep); err != nil {
			t.Fatal(err)
		}
		addr := endpointAddress(t, cc, work, s.Name)
		ip := netip.MustParseAddr(addr)
		if addr != s.Status.PodIP || netip.MustParsePrefix(localcluster.PodCIDR).Contains(ip) || !netip.MustParsePrefix(tep.Spec.RemoteSeenAs.PodCIDR).Contains(ip) {
			t.Fatalf("the consumer lists %s's pod (IP %s) at %s, which is not in %s, how the consumer sees that provider's pods", e.names[i+1], s.Status.PodIP, addr, tep.Spec.RemoteSeenAs.PodCIDR)
		}
		base := "http://" + addr + ":8080"
		urls = append(urls, base+"/", base+"/bytes/1400", base+"/bytes/8000", "http://"+serviceIP(t, cc, work, s.Name)+"/")
		want = append(want, "hello from "+e.names[i+1], strings.Repeat("x", 1400), strings.Repeat("x", 8000), "hello from "+e.names[i+1])
	}
	expectAnswers(t, cc, e, local, "consumer-client", otherNode, urls, want)

	// From each provider: an offloaded pod reaches the consumer's pod at
	// the address the provider's copy of the Service's EndpointSlice lists
	// (the consumer's pod as the provider sees the consumer's pods), and
	// through the provider's copy of the Service.
	for i, p := range providers {
		pc := ctrlClient(t, p)
		var tep netv1alpha1.TunnelEndpoint
		if err := pc.Get(ctx, client.ObjectKey{Name: consumerID}, &tep); err != nil {
			t.Fatal(err)
		}
		seen, ok := translation.FromPeer(&tep, netip.MustParseAddr(consumerServer.Status.PodIP))
		if !ok {
			t.Fatalf("%s has no view of the consumer's pod %s: %+v", e.names[i+1], consumerServer.Status.PodIP, tep.Spec)
		}
		remoteNS := remoteNamespace(t, cc, work, ids[i])
		if addr := endpointAddress(t, pc, remoteNS, consumerServer.Name); addr != seen.String() {
			t.Fatalf("%s lists the consumer's pod at %s, want %s (how it sees the consumer's pods)", e.names[i+1], addr, seen)
		}
		base := "http://" + seen.String() + ":8080"
		expectAnswers(t, cc, e, work, fmt.Sprintf("to-consumer-%d", i), "",
			[]string{base + "/", base + "/bytes/8000", "http://" + serviceIP(t, pc, remoteNS, consumerServer.Name) + "/"},
			[]string{"hello from the consumer", strings.Repeat("x", 8000), "hello from the consumer"}, ids[i])
	}

	// What an operator runs to check it: liqoctl test network.
	var report bytes.Buffer
	if err := (&testnetwork.Options{Kubeconfig: e.consumer.KubeconfigPath, Namespace: liqoinstall.DefaultNamespace,
		TestNamespace: "test-liqo-network", Timeout: 3 * time.Minute}).Run(ctx, &report); err != nil {
		t.Fatalf("liqoctl test network: %v\n%s", err, report.String())
	}
	t.Logf("liqoctl test network:\n%s", report.String())
	for _, name := range e.names[1:] {
		if n := strings.Count(report.String(), name+" "); n != 3 || strings.Contains(report.String(), "FAILED") {
			t.Errorf("liqoctl test network: %d checks of %s, want 3, all OK", n, name)
		}
	}
	// It returns once its namespace is gone, so that it runs again at
	// once (as liqoctl playground up, then the test it suggests, do).
	if err := cc.Get(ctx, client.ObjectKey{Name: "test-liqo-network"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("liqoctl test network returned with its namespace still there: %v", err)
	}
	report.Reset()
	if err := (&testnetwork.Options{Kubeconfig: e.consumer.KubeconfigPath, Namespace: liqoinstall.DefaultNamespace,
		TestNamespace: "test-liqo-network", Timeout: 3 * time.Minute}).Run(ctx, &report); err != nil || strings.Contains(report.String(), "FAILED") {
		t.Errorf("liqoctl test network, again at once: %v\n%s", err, report.String())
	}

	// The underlay between the gateways cut for 20 s: down, then back
	// within 10 s of the link, with the keys they had.
	keys := map[string]string{}
	for _, id := range ids {
		var tep netv1alpha1.TunnelEndpoint
		if err := cc.Get(ctx, client.ObjectKey{Name: id}, &tep); err != nil {
			t.Fatal(err)
		}
		keys[id] = tep.Spec.PublicKey
	}
	cut := cutTunnels(t, e)
	for _, id := range ids {
		waitNetwork(t, cc, id, metav1.ConditionFalse, 15*time.Second)
	}
	// The outage lasts 20 s: this waits for nothing.
	time.Sleep(20 * time.Second)
	cut()
	back := time.Now()
	for _, id := range ids {
		waitNetwork(t, cc, id, metav1.ConditionTrue, 10*time.Second)
	}
	t.Logf("after 20 s without the underlay, both tunnels were back %s after it returned", time.Since(back).Round(10*time.Millisecond))
	for _, id := range ids {
		var tep netv1alpha1.TunnelEndpoint
		if err := cc.Get(ctx, client.ObjectKey{Name: id}, &tep); err != nil {
			t.Fatal(err)
		}
		if tep.Spec.PublicKey != keys[id] {
			t.Errorf("the key of %s changed across the outage", id)
		}
	}

	// A provider's gateway restarted: its tunnel comes back.
	restarted := time.Now()
	cs := clientset(t, providers[0])
	if err := cs.CoreV1().Pods(liqoinstall.DefaultNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=gateway"}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		pods, err := cs.CoreV1().Pods(liqoinstall.DefaultNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=gateway"})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.CreationTimestamp.After(restarted.Add(-time.Second)) && p.Status.Phase == corev1.PodRunning {
				return nil
			}
		}
		return fmt.Errorf("no new gateway pod Running in %s", e.names[1])
	})
	running := time.Now()
	waitNetwork(t, cc, ids[0], metav1.ConditionTrue, 10*time.Second)
	expectAnswers(t, cc, e, local, "after-restart", gwNode, urls[:1], want[:1])
	t.Logf("%s's gateway restarted: its new pod ran %s after the old one was deleted, and the tunnel was back %s after that",
		e.names[1], running.Sub(restarted).Round(10*time.Millisecond), time.Since(running).Round(10*time.Millisecond))

	// Unpeered from provider-b, with Liqo still installed: nothing of
	// that peering is left on either side, objects, routes or tables;
	// provider-a's tunnel goes on.
	var removed bytes.Buffer
	if err := (&remove.Options{Kubeconfig: e.consumer.KubeconfigPath, Cluster: ids[1], Timeout: 2 * time.Minute}).Run(ctx, &removed); err != nil {
		t.Fatalf("liqoctl remove %s: %v\n%s", e.names[2], err, removed.String())
	}
	unpeered := time.Now()
	pb := ctrlClient(t, providers[1])
	framework.Eventually(t, time.Minute, func() error {
		for _, side := range []struct {
			c    client.Client
			name string
			peer string
		}{{cc, e.names[0], ids[1]}, {pb, e.names[2], consumerID}} {
			var teps netv1alpha1.TunnelEndpointList
			var ncs netv1alpha1.NetworkConfigList
			if err := side.c.List(ctx, &teps); err != nil {
				return err
			}
			if err := side.c.List(ctx, &ncs); err != nil {
				return err
			}
			for _, tep := range teps.Items {
				if tep.Name == side.peer {
					return fmt.Errorf("%s: TunnelEndpoint %s left", side.name, tep.Name)
				}
			}
			for _, nc := range ncs.Items {
				if nc.Spec.ClusterID == side.peer || nc.Name == netv1alpha1.NetworkConfigName(side.peer) {
					return fmt.Errorf("%s: NetworkConfig %s/%s left", side.name, nc.Namespace, nc.Name)
				}
			}
		}
		// provider-b has no peer left: nothing of the data plane.
		if left := dataPlaneLeft(t, providers[1].RealNodeNetns(0)); len(left) > 0 {
			return fmt.Errorf("%s's node: %v", e.names[2], left)
		}
		// The consumer's nodes: nothing of provider-b's.
		for n := range e.consumer.RealNodes() {
			if left := peerLeft(t, e.consumer.RealNodeNetns(n), ids[1], keysRanges[ids[1]]); len(left) > 0 {
				return fmt.Errorf("%s's node %s: %v", e.names[0], e.consumer.RealNodeName(n), left)
			}
		}
		return nil
	})
	t.Logf("unpeered from %s: nothing of it left on either side %s after liqoctl remove returned", e.names[2], time.Since(unpeered).Round(10*time.Millisecond))
	waitNetwork(t, cc, ids[0], metav1.ConditionTrue, 10*time.Second)

	if err := cc.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: local}}); err != nil {
		t.Fatal(err)
	}
	e.uninstallAll()
	for i, c := range e.clusters {
		for n := range c.RealNodes() {
			if left := dataPlaneLeft(t, c.RealNodeNetns(n)); len(left) > 0 {
				t.Errorf("%s's node %s after the uninstall: %v", e.names[i], c.RealNodeName(n), left)
			}
		}
	}
}

// node is a real node: its name, network namespace and address.
type node struct{ name, netns, ip string }

// consumerNodes finds the consumer's node the gateway runs on, and the
// other one (its name and network namespace).
func consumerNodes(t *testing.T, e *realEnv) (gw node, other, otherNetns string) {
	t.Helper()
	pods, err := clientset(t, e.consumer).CoreV1().Pods(liqoinstall.DefaultNamespace).List(t.Context(),
		metav1.ListOptions{LabelSelector: netv1alpha1.GatewayComponentLabel + "=" + netv1alpha1.GatewayComponentValue})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Spec.NodeName == "" {
		t.Fatalf("the consumer's gateway pods: %d, want one scheduled", len(pods.Items))
	}
	gw = node{name: pods.Items[0].Spec.NodeName, ip: pods.Items[0].Status.HostIP}
	for n := range e.consumer.RealNodes() {
		if e.consumer.RealNodeName(n) == gw.name {
			gw.netns = e.consumer.RealNodeNetns(n)
		} else {
			other, otherNetns = e.consumer.RealNodeName(n), e.consumer.RealNodeNetns(n)
		}
	}
	if other == "" || gw.netns == "" {
		t.Fatalf("the consumer has no node without the gateway (%s)", gw.name)
	}
	return gw, other, otherNetns
}

// gatewayMetrics scrapes the gateway's metrics at addr from inside netns
// (the node's address has no route from the host's namespace), with
// token when it is not empty.
func gatewayMetrics(ctx context.Context, netns, addr, token string) (int, string, error) {
	ns := &netlab.Namespace{Name: netns}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext:     ns.Dial,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the gateway's self-signed certificate, inside the test's namespace
	}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// waitAgentRoutes waits for the route agent's routes in netns: one for
// each of the peers' ranges, as the consumer sees them. It returns the
// ranges of each peer.
func waitAgentRoutes(t *testing.T, netns string, peers []string, c client.Client) map[string][]string {
	t.Helper()
	var want []string
	ranges := map[string][]string{}
	for _, id := range peers {
		var tep netv1alpha1.TunnelEndpoint
		if err := c.Get(t.Context(), client.ObjectKey{Name: id}, &tep); err != nil {
			t.Fatal(err)
		}
		ranges[id] = []string{tep.Spec.RemoteSeenAs.PodCIDR, tep.Spec.RemoteSeenAs.ExternalCIDR}
		want = append(want, ranges[id]...)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		out, err := exec.CommandContext(t.Context(), "ip", "-n", netns, "route", "show", "table", strconv.Itoa(routeagent.RouteTable), "proto", strconv.Itoa(int(routeagent.RouteProtocol))).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip route: %w: %s", err, out)
		}
		for _, r := range want {
			if !strings.Contains(string(out), r+" via ") {
				return fmt.Errorf("no route agent's route to %s on the node without the gateway: %q", r, out)
			}
		}
		return nil
	})
	return ranges
}

// peerLeft lists what is left in the node's namespace of the peer id
// whose ranges (as this cluster saw them) are given: routes to them, of
// the gateway or the route agent, and its nftables table.
func peerLeft(t *testing.T, netns, id string, ranges []string) []string {
	t.Helper()
	var left []string
	for _, proto := range []int{int(gateway.RouteProtocol), int(routeagent.RouteProtocol)} {
		for _, line := range ownRoutesAndRules(t, netns, proto) {
			for _, r := range ranges {
				if strings.Contains(line, r+" ") {
					left = append(left, fmt.Sprintf("a route or rule for %s (protocol %d): %s", r, proto, line))
				}
			}
		}
	}
	out, err := exec.CommandContext(t.Context(), "ip", "netns", "exec", netns, "nft", "list", "tables").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list tables: %v: %s", err, out)
	}
	if strings.Contains(string(out), gateway.PeerTable(id)) {
		left = append(left, "nftables: "+gateway.PeerTable(id))
	}
	return left
}

func clusterID(t *testing.T, c client.Client) string {
	t.Helper()
	var cc configv1alpha1.ClusterConfig
	if err := c.Get(t.Context(), client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cc); err != nil {
		t.Fatal(err)
	}
	return cc.Status.ClusterID
}

// waitNetwork waits for the ForeignCluster of peer to say the network is
// (or is not) established.
func waitNetwork(t *testing.T, c client.Client, peer string, status metav1.ConditionStatus, within time.Duration) {
	t.Helper()
	framework.Eventually(t, within, func() error {
		var fc discoveryv1alpha1.ForeignCluster
		if err := c.Get(t.Context(), client.ObjectKey{Name: peer}, &fc); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionNetworkEstablished)
		if cond == nil || cond.Status != status {
			return fmt.Errorf("ForeignCluster %s: NetworkEstablished %+v, want %s", peer, cond, status)
		}
		return nil
	})
}

// offloadNamespace offloads ns to every provider.
func offloadNamespace(t *testing.T, c client.Client, ns string, strategy offloadingv1alpha1.PodOffloadingStrategy) {
	t.Helper()
	ctx := t.Context()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &offloadingv1alpha1.NamespaceOffloading{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName},
		Spec:       offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: strategy},
	}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		var no offloadingv1alpha1.NamespaceOffloading
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(no.Status.Conditions, offloadingv1alpha1.ConditionReady) {
			return fmt.Errorf("NamespaceOffloading not Ready: %+v", no.Status)
		}
		return nil
	})
}

// endpointAddress waits for the one ready address the EndpointSlices of
// Service ns/name list, and returns it.
func endpointAddress(t *testing.T, c client.Client, ns, name string) string {
	t.Helper()
	var addr string
	framework.Eventually(t, time.Minute, func() error {
		var slices discoveryv1.EndpointSliceList
		if err := c.List(t.Context(), &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
			return err
		}
		var addrs []string
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					addrs = append(addrs, ep.Addresses...)
				}
			}
		}
		if len(addrs) != 1 {
			return fmt.Errorf("Service %s/%s: ready addresses %v, want one", ns, name, addrs)
		}
		addr = addrs[0]
		return nil
	})
	return addr
}

// serviceIP is the cluster IP of Service ns/name.
func serviceIP(t *testing.T, c client.Client, ns, name string) string {
	t.Helper()
	var svc corev1.Service
	framework.Eventually(t, time.Minute, func() error {
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
			return err
		}
		if svc.Spec.ClusterIP == "" {
			return fmt.Errorf("Service %s/%s has no cluster IP yet", ns, name)
		}
		return nil
	})
	return svc.Spec.ClusterIP
}

// remoteNamespace is the namespace ns of the consumer is offloaded to in
// provider.
func remoteNamespace(t *testing.T, c client.Client, ns, provider string) string {
	t.Helper()
	var no offloadingv1alpha1.NamespaceOffloading
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
		t.Fatal(err)
	}
	remote, ok := no.ReadyRemoteNamespace(provider)
	if !ok {
		t.Fatalf("%s is not offloaded to %s: %+v", ns, provider, no.Status)
	}
	return remote
}

// probePod is a pod of the probe image running probe with args, labelled
// app=name, as Pod Security restricted allows.
func probePod(ns, name string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "probe", Image: localcluster.ProbeImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/probe"}, Args: args,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}

func waitRunning(t *testing.T, c client.Client, pod *corev1.Pod) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
			return fmt.Errorf("pod %s/%s on %q: %s, IP %q", pod.Namespace, pod.Name, pod.Spec.NodeName, pod.Status.Phase, pod.Status.PodIP)
		}
		return nil
	})
}

// expectAnswers runs a probe pod that gets each URL, on node (or, with
// provider, offloaded to it), and checks that it printed want, one answer
// a line.
func expectAnswers(t *testing.T, c client.Client, e *realEnv, ns, name, node string, urls, want []string, provider ...string) {
	t.Helper()
	ctx := t.Context()
	pod := probePod(ns, name, append([]string{"get"}, urls...)...)
	pod.Spec.NodeName = node
	if len(provider) > 0 {
		pod.Spec.NodeSelector = map[string]string{offloadingv1alpha1.RemoteClusterLabel: provider[0]}
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("client pod %s: %s", name, pod.Status.Phase)
		}
		return nil
	})
	var logs []byte
	framework.Eventually(t, time.Minute, func() error {
		var err error
		logs, err = clientset(t, e.consumer).CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		return err
	})
	// The probe says on stderr when it tries again; the answers are the
	// other lines.
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(logs)), "\n") {
		if strings.HasPrefix(line, "retrying:") {
			t.Logf("%s: %s", name, line)
			continue
		}
		got = append(got, line)
	}
	if len(got) != len(want) {
		t.Fatalf("%s got %d answers, want %d: %.300q", name, len(got), len(want), logs)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: %s answered %.80q (%d bytes), want %.80q (%d bytes)", name, urls[i], got[i], len(got[i]), want[i], len(want[i]))
		}
	}
}

// cutTunnels drops, in the underlay between the clusters' nodes, the
// tunnels' packets (UDP 51820) and nothing else: the nodes keep their API
// servers. It returns the function that mends the cut.
func cutTunnels(t *testing.T, e *realEnv) func() {
	t.Helper()
	rules := "table bridge liqo-test-cut {\n chain forward {\n  type filter hook forward priority 0;\n  udp dport 51820 drop\n  udp sport 51820 drop\n }\n}\n"
	nft := func(args ...string) error {
		cmd := exec.CommandContext(context.Background(), "nsenter", append([]string{"--net=" + e.network.Path(), "nft"}, args...)...)
		if len(args) == 2 && args[1] == "-" {
			cmd.Stdin = strings.NewReader(rules)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft %v: %w: %s", args, err, out)
		}
		return nil
	}
	if err := nft("-f", "-"); err != nil {
		t.Fatal(err)
	}
	mended := false
	mend := func() {
		if !mended {
			mended = true
			if err := nft("delete", "table", "bridge", "liqo-test-cut"); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(mend)
	return mend
}

// dataPlaneLeft lists what a gateway or route agent made that is still in
// the node's namespace: the tunnel interface, the routes of either, the
// gateway's tables.
func dataPlaneLeft(t *testing.T, netns string) []string {
	t.Helper()
	var left []string
	if out, err := exec.CommandContext(t.Context(), "ip", "-n", netns, "-o", "link", "show", "liqo-tunnel").CombinedOutput(); err == nil {
		left = append(left, "interface: "+strings.TrimSpace(string(out)))
	}
	for _, proto := range []int{int(gateway.RouteProtocol), int(routeagent.RouteProtocol)} {
		if own := ownRoutesAndRules(t, netns, proto); len(own) > 0 {
			left = append(left, fmt.Sprintf("routes and rules (protocol %d): %s", proto, strings.Join(own, "; ")))
		}
	}
	out, err := exec.CommandContext(t.Context(), "ip", "netns", "exec", netns, "nft", "list", "tables").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list tables: %v: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "liqo-gateway") || strings.Contains(line, "liqo-peer-") {
			left = append(left, "nftables: "+line)
		}
	}
	return left
}

// ownRoutesAndRules lists the routes (in any table) and the policy rules
// of protocol proto in the node's namespace, one per line.
func ownRoutesAndRules(t *testing.T, netns string, proto int) []string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "ip", "-n", netns, "route", "show", "table", "all", "proto", strconv.Itoa(proto)).CombinedOutput()
	if err != nil {
		t.Fatalf("ip route: %v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	out, err = exec.CommandContext(t.Context(), "ip", "-n", netns, "-d", "rule").CombinedOutput()
	if err != nil {
		t.Fatalf("ip rule: %v: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasSuffix(strings.TrimSpace(line), fmt.Sprintf("proto %d", proto)) {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	return slices.DeleteFunc(lines, func(l string) bool { return l == "" })
}
