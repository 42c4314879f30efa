// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package install

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	ctlplayground "github.com/liqo-go/liqo/internal/ctl/playground"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestPlaygroundWithNetwork is `liqoctl playground up --network`, as `make
// demo` runs it as root, with two clusters: each gets a real node and
// the chart's gateway and route agent, both use the same pod range, they
// peer, their tunnel comes up, the demo's offloaded pods are listed at
// remapped addresses, and a pod of the first cluster gets answers from
// pods of the second through the tunnel, and the other way round.
// `playground down` leaves no process, namespace or underlay behind.
func TestPlaygroundWithNetwork(t *testing.T) {
	skipWithoutRealNodes(t)
	ctx := t.Context()
	gatewayImage, err := framework.PlaygroundGatewayImage(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bin, err := localcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "playground")
	t.Cleanup(func() {
		if _, err := playground.Down(dir); err != nil {
			t.Error(err)
		}
	})
	var out bytes.Buffer
	err = (&ctlplayground.UpOptions{
		Dir: dir, Clusters: 2, Timeout: 5 * time.Minute, Peer: true, Network: true,
		GatewayImage: gatewayImage, Liqoctl: filepath.Join(bin, "liqoctl"),
	}).Run(ctx, &out)
	t.Logf("liqoctl playground up --network:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"with a network: one real node per cluster",
		"network: every cluster's tunnel to each of the other 1 is established",
		"remapped",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output does not say %q", want)
		}
	}
	if strings.Contains(out.String(), "network is off") || strings.Contains(out.String(), "FAILED") || strings.Count(out.String(), "   OK   ") != 3 {
		t.Errorf("the network check: want 3 checks, all OK")
	}
	// The virtual node's kubelet API through the API server's node proxy,
	// as the conformance suite and metrics-server reach kubelets: its
	// address is the cluster's host address, not a loopback one the API
	// server refuses to proxy to.
	kc := filepath.Join(dir, playground.ClusterName(1)+".kubeconfig")
	kubectl := func(args ...string) (string, error) {
		o, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kc}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(o)), err
	}
	vnode, err := kubectl("get", "nodes", "-l", offloadingv1alpha1.VirtualNodeLabel+"="+offloadingv1alpha1.VirtualNodeValue, "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil || vnode == "" {
		t.Fatalf("the virtual node of %s: %q %v", playground.ClusterName(1), vnode, err)
	}
	if got, err := kubectl("get", "--raw", "/api/v1/nodes/"+vnode+"/proxy/healthz"); err != nil || got != "ok" {
		t.Errorf("the node proxy to %s's /healthz: %q %v, want ok", vnode, got, err)
	}
	state, err := os.ReadFile(filepath.Join(dir, "playground.json"))
	if err != nil {
		t.Fatal(err)
	}

	n, err := playground.Down(dir)
	if err != nil || n != 2 {
		t.Fatalf("playground down: %d clusters, %v", n, err)
	}
	// The underlay the state named is gone with the playground.
	netns, err := exec.CommandContext(ctx, "ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(netns), "\n") {
		if name, _, _ := strings.Cut(line, " "); name != "" && strings.Contains(string(state), `"`+name+`"`) {
			t.Errorf("after playground down, the namespace %s is left", name)
		}
	}
}
