// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package playground implements `liqoctl playground`: up, status and down
// for a set of local clusters running Liqo.
package playground

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker"
	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
	"github.com/liqo-go/liqo/internal/ctl/testnetwork"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/internal/sharing"
)

// DefaultDir is where the playground lives unless --dir says otherwise.
const DefaultDir = ".playground"

// NewCommand returns `liqoctl playground`.
func NewCommand(ctx context.Context) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "playground",
		Short: "Run several local Kubernetes clusters with Liqo, on this machine",
		Long: `The playground starts real Kubernetes control planes (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler) as local processes, with kwok
simulating their nodes, installs Liqo on each and runs its controller manager.
Everything listens on 127.0.0.1. The binaries come from 'make tools'.`,
	}
	dir := DefaultDir
	cmd.PersistentFlags().StringVar(&dir, "dir", dir, "Directory holding the playground's state, kubeconfigs and logs")
	cmd.AddCommand(newUpCommand(ctx, &dir), newDownCommand(&dir), newStatusCommand(ctx, &dir), newSuperviseCommand(ctx))
	return cmd
}

// newSuperviseCommand is the supervisor each component of a playground
// runs under (hidden: `up` starts it).
func newSuperviseCommand(ctx context.Context) *cobra.Command {
	var restarts string
	cmd := &cobra.Command{
		Use:    "supervise --restarts FILE -- BINARY [ARGS...]",
		Short:  "Run a component and restart it with backoff when it exits",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return localcluster.Supervise(ctx, restarts, args[0], args[1:], cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&restarts, "restarts", "", "File the restarts are counted in")
	_ = cmd.MarkFlagRequired("restarts")
	return cmd
}

// Supervisor is the command that runs each component of a playground
// under liqoctl's supervisor.
func Supervisor(liqoctl string) []string { return []string{liqoctl, "playground", "supervise"} }

// UpOptions are the settings of `playground up`.
type UpOptions struct {
	Dir             string
	Clusters        int
	NodesPerCluster int
	BinDir          string
	Timeout         time.Duration
	// Peer turns on autojoin and LAN trust, so that the clusters peer
	// with each other as soon as they meet.
	Peer bool
	// Network gives each cluster a real node and the network fabric, when
	// this machine allows it (playground.NetworkSupported); otherwise the
	// playground says why and runs without.
	Network bool
	// GatewayImage is the archive of the gateway's image; the bin
	// directory's when empty (playground.Options.GatewayImage).
	GatewayImage string
	// NodeImages are more image archives the real nodes import.
	NodeImages []string
	// ClusterDNSImage is a CoreDNS image among NodeImages each cluster
	// runs as its DNS.
	ClusterDNSImage string
	// UntaintedVirtualNodes names the clusters whose virtual nodes are
	// left untainted (their controller managers'
	// --virtual-node-taint=false).
	UntaintedVirtualNodes []string
	// Liqoctl is the liqoctl binary the components are supervised by;
	// this program when empty.
	Liqoctl string
	// Broker, when set, adds a cluster named broker running liqo-broker
	// with these modes (comma-separated: catalog, orchestrator).
	Broker string
	// DistinctPodRanges gives each cluster a pod range of its own
	// (playground.Options.DistinctPodRanges).
	DistinctPodRanges bool
	// DNSProxy runs the DNS proxy in every cluster
	// (playground.Options.DNSProxy).
	DNSProxy bool
}

func newUpCommand(ctx context.Context, dir *string) *cobra.Command {
	o := &UpOptions{Clusters: 3, NodesPerCluster: 2, Timeout: 10 * time.Minute, Peer: true}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the clusters and Liqo on each; they keep running after this command returns",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Dir = *dir
			return o.Run(ctx, cmd.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&o.Clusters, "clusters", o.Clusters, "Number of clusters (1 to 10)")
	cmd.Flags().IntVar(&o.NodesPerCluster, "nodes", o.NodesPerCluster, "Simulated worker nodes per cluster (with --network, a real node instead)")
	cmd.Flags().StringVar(&o.BinDir, "bin-dir", o.BinDir, "Directory of the control-plane binaries and liqo-controller-manager (default: next to liqoctl, or $LIQO_BIN_DIR)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "Give up, and stop what was started, after this long")
	cmd.Flags().BoolVar(&o.Peer, "peer", o.Peer, "Peer every cluster with every other (autojoin and LAN trust); --peer=false only discovers")
	cmd.Flags().StringVar(&o.Broker, "broker", o.Broker, "Add a cluster named broker, peered with every other, running liqo-broker with these services (comma-separated: catalog, orchestrator, aggregator; --broker alone: catalog and orchestrator); its URL goes to <dir>/broker.url")
	cmd.Flags().Lookup("broker").NoOptDefVal = "catalog,orchestrator"
	cmd.Flags().BoolVar(&o.Network, "network", o.Network, "Give each cluster a real node (kubelet, containerd) and connect the clusters' pod networks through the gateways' tunnels; needs root, `make node-tools` and the gateway's image (`make demo` as root builds them)")
	cmd.Flags().BoolVar(&o.DistinctPodRanges, "distinct-pod-ranges", o.DistinctPodRanges, "Give each cluster a pod range of its own (cluster-1 10.100.0.0/14, cluster-2 10.104.0.0/14, ...), so that peers reach each other's pods at their own addresses; by default all share "+localcluster.PodCIDR+" and the network fabric remaps each peer's range")
	cmd.Flags().BoolVar(&o.DNSProxy, "dns-proxy", o.DNSProxy, "With --network, run the DNS proxy in every cluster (the chart's dnsProxy.enabled): a consumer's offloaded pods reach Services by the consumer's namespace names where the provider names the namespace otherwise")
	cmd.Flags().StringSliceVar(&o.UntaintedVirtualNodes, "untainted-virtual-nodes", o.UntaintedVirtualNodes, "Clusters (e.g. cluster-1) whose virtual nodes are left without their taint (--virtual-node-taint=false), for suites that take only untainted nodes as schedulable, such as upstream conformance; every pod may then land there, so never a provider's")
	cmd.Flags().StringSliceVar(&o.NodeImages, "node-images", o.NodeImages, "With --network, more image archives (OCI or Docker, as `ctr images import` reads) every real node imports, for workloads that cannot pull")
	cmd.Flags().StringVar(&o.ClusterDNSImage, "cluster-dns-image", o.ClusterDNSImage, "With --network, a CoreDNS image (in an archive of --node-images) each cluster runs as its DNS, kube-system/kube-dns at "+localcluster.ClusterDNSAddress+", so that pods reach Services by name")
	return cmd
}

// Run starts the playground and prints how to use it.
func (o *UpOptions) Run(ctx context.Context, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	start := time.Now()
	exe := o.Liqoctl
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return err
		}
	}
	for i, f := range o.NodeImages {
		abs, err := filepath.Abs(f)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("--node-images: %w", err)
		}
		o.NodeImages[i] = abs
	}
	network, nodes := o.Network, o.NodesPerCluster
	if network {
		if err := playground.NetworkSupported(o.BinDir, o.GatewayImage); err != nil {
			fmt.Fprintf(out, "The network is off: %v.\n"+
				"The clusters run without real nodes or tunnels (as root, `make demo` builds what the network needs).\n\n", err)
			network = false
		} else {
			// The offloaded pods must land on a real node: no kwok one.
			nodes = 0
		}
	}
	if o.ClusterDNSImage != "" && !network {
		return errors.New("--cluster-dns-image needs --network: the DNS runs on a real node")
	}
	var brokerModes []string
	if o.Broker != "" {
		var err error
		if brokerModes, err = broker.ParseModes(o.Broker); err != nil {
			return err
		}
	}
	p, err := playground.Up(ctx, playground.Options{
		ControllerManagerArgsFor: func(name string) []string {
			if slices.Contains(o.UntaintedVirtualNodes, name) {
				return []string{"--virtual-node-taint=false"}
			}
			return nil
		},
		Broker:            brokerModes,
		Supervisor:        Supervisor(exe),
		Dir:               o.Dir,
		Clusters:          o.Clusters,
		NodesPerCluster:   nodes,
		BinDir:            o.BinDir,
		Network:           network,
		GatewayImage:      o.GatewayImage,
		NodeImages:        o.NodeImages,
		ClusterDNSImage:   o.ClusterDNSImage,
		DistinctPodRanges: o.DistinctPodRanges,
		DNSProxy:          o.DNSProxy,
		Detach:            true,
		Out:               out,
		ClusterConfig: func(_ string, spec *configv1alpha1.ClusterConfigSpec) {
			if o.Peer {
				spec.DiscoveryConfig.AutoJoin = ptr.To(true)
				spec.PeeringConfig.TrustLANPeers = ptr.To(true)
			}
		},
	})
	if err != nil {
		return err
	}
	waitForDiscovery(ctx, out, p.Dir, o.Clusters)
	if o.Peer {
		waitForPeering(ctx, out, p.Dir, o.Clusters)
		waitForAll(ctx, out, p.Dir, o.Clusters, 30*time.Second, func(st *status) bool { return st.virtualReady >= o.Clusters-1 },
			fmt.Sprintf("virtual nodes: every cluster has a Ready virtual node for each of the other %d", o.Clusters-1),
			"virtual nodes: not every virtual node is Ready; see `kubectl get nodes` and `liqoctl status -v`")
		if network {
			waitForAll(ctx, out, p.Dir, o.Clusters, 30*time.Second, func(st *status) bool { return st.networkEstablished >= o.Clusters-1 },
				fmt.Sprintf("network: every cluster's tunnel to each of the other %d is established", o.Clusters-1),
				"network: not every tunnel is established; see `kubectl get tunnelendpoints` and the gateways' logs")
		}
	}
	fmt.Fprintf(out, "Playground ready in %s.\n\n", time.Since(start).Round(100*time.Millisecond))
	if p.Broker != nil {
		fmt.Fprintf(out, "The broker's API: %s (%s); its kubeconfig: %s\n\n", p.Broker.BrokerURL, filepath.Join(p.Dir, playground.BrokerURLFile), p.Broker.Kubeconfig)
	}
	if err := printStatus(ctx, out, p.Dir); err != nil {
		return err
	}
	first := filepath.Join(p.Dir, playground.ClusterName(1)+".kubeconfig")
	if o.Peer && o.Clusters > 1 {
		fmt.Fprintf(out, "\nOffloading namespace %s of %s:\n", demoNamespace, playground.ClusterName(1))
		if err := runDemoWorkload(ctx, out, first, network); err != nil {
			return fmt.Errorf("the demo workload: %w", err)
		}
		switch {
		case p.Broker != nil && slices.Contains(brokerModes, "orchestrator") && o.Clusters > 1:
			if err := runBrokerDemo(ctx, out, p, network); err != nil {
				return fmt.Errorf("the broker demo: %w", err)
			}
		case p.Broker != nil && slices.Contains(brokerModes, "aggregator") && o.Clusters > 1:
			if err := runAggregatorDemo(ctx, out, p, network); err != nil {
				return fmt.Errorf("the aggregator demo: %w", err)
			}
		}
		if network {
			fmt.Fprintf(out, "\nThe network, from a pod of %s to pods in each provider and back, as `liqoctl test network` checks it:\n", playground.ClusterName(1))
			if err := (&testnetwork.Options{Kubeconfig: first, Namespace: install.DefaultNamespace, TestNamespace: "test-liqo-network",
				Timeout: 3 * time.Minute}).Run(ctx, out); err != nil {
				return fmt.Errorf("the network: %w", err)
			}
		}
	}
	liqoctl := exe
	kubectl := "kubectl"
	if bin, err := localcluster.FindBinDir(); err == nil {
		if _, err := os.Stat(filepath.Join(bin, "kubectl")); err == nil {
			kubectl = filepath.Join(bin, "kubectl")
		}
	}
	// kubectl exec reaches a kwok pod's simulated shell; a real pod of
	// the probe image has none.
	more := fmt.Sprintf("  %s exec -n %s deploy/hello -- printenv %s\n", kubectl, demoNamespace, localcluster.KwokExecClusterEnv)
	if network {
		more = fmt.Sprintf("  %s get tunnelendpoints\n  %s test network\n", kubectl, liqoctl)
	}
	fmt.Fprintf(out, `
Use a cluster:
  export KUBECONFIG=%s
  %s get nodes
  %s get clusterconfig cluster
  %s get foreignclusters
  %s status -v
  %s get peeringrequests
  %s get pods -n %s -o wide
  %s logs -n %s deploy/hello
%s  %s get namespaceoffloadings -A
Logs of every component: %s/clusters/<name>/logs/
Stop everything:
  %s playground down --dir %s
`, first, kubectl, kubectl, kubectl, liqoctl, kubectl, kubectl, demoNamespace, kubectl, demoNamespace, more, kubectl, p.Dir, liqoctl, p.Dir)
	return nil
}

func newDownCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop every process of the playground and remove its directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := playground.Down(*dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Stopped %d clusters; removed %s.\n", n, *dir)
			return nil
		},
	}
}

func newStatusCommand(ctx context.Context, dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show each cluster's ClusterID, nodes and peerings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printStatus(ctx, cmd.OutOrStdout(), *dir)
		},
	}
}

// waitForDiscovery waits, up to 10 s, until every cluster found the others.
func waitForDiscovery(ctx context.Context, out io.Writer, dir string, n int) {
	waitForAll(ctx, out, dir, n, 10*time.Second, func(st *status) bool { return len(st.peers) >= n-1 },
		fmt.Sprintf("discovery: every cluster found the other %d over mDNS", n-1),
		"discovery: not every cluster found the others; see `liqoctl playground status` and the logs")
}

// waitForPeering waits, up to 30 s, until every cluster's peering with
// every other was accepted.
func waitForPeering(ctx context.Context, out io.Writer, dir string, n int) {
	waitForAll(ctx, out, dir, n, 30*time.Second, func(st *status) bool { return st.accepted >= n-1 },
		fmt.Sprintf("peering: every cluster peered with the other %d, both ways,", n-1),
		"peering: not every peering was accepted; see `liqoctl status -v` on each cluster and the logs")
}

// waitForAll polls every cluster's status until done holds for all of
// them, or timeout, and says which, with how long it took.
func waitForAll(ctx context.Context, out io.Writer, dir string, n int, timeout time.Duration, done func(*status) bool, success, failure string) {
	if n < 2 {
		return
	}
	clusters, err := playground.Load(dir)
	if err != nil {
		return
	}
	start := time.Now()
	for time.Since(start) < timeout {
		all := true
		for _, m := range clusters {
			st, err := clusterStatus(ctx, m.Kubeconfig)
			if err != nil || !done(st) {
				all = false
				break
			}
		}
		if all {
			fmt.Fprintf(out, "  %s in %s\n", success, time.Since(start).Round(10*time.Millisecond))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(out, "  %s (waited %s)\n", failure, timeout)
}

// printStatus asks every cluster of the playground for its ClusterID and
// nodes, so that what it prints is what the API servers say.
func printStatus(ctx context.Context, out io.Writer, dir string) error {
	clusters, err := playground.Load(dir)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tCLUSTER ID\tAPI SERVER\tNODES\tPEERS (discovery, outgoing, incoming)\tRESTARTS")
	for _, m := range clusters {
		restarts := restartsCell(localcluster.Restarts(m.Dir))
		st, err := clusterStatus(ctx, m.Kubeconfig)
		if err != nil {
			fmt.Fprintf(tw, "%s\t<error>\t\t%v\t\t%s\n", m.Name, err, restarts)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, st.id, st.server, strings.Join(st.nodes, ", "), strings.Join(st.peers, ", "), restarts)
	}
	return tw.Flush()
}

// restartsCell shows the components a supervisor restarted, as
// "name=count", or 0.
func restartsCell(restarts map[string]int) string {
	if len(restarts) == 0 {
		return "0"
	}
	var cells []string
	for name, n := range restarts {
		cells = append(cells, fmt.Sprintf("%s=%d", name, n))
	}
	sort.Strings(cells)
	return strings.Join(cells, ", ")
}

type status struct {
	id, server         string
	nodes, peers       []string
	accepted           int
	virtualReady       int
	networkEstablished int
}

func clusterStatus(ctx context.Context, kubeconfig string) (*status, error) {
	c, cfg, err := kubeclient.New(kubeconfig, 5*time.Second)
	if err != nil {
		return nil, err
	}
	var cc configv1alpha1.ClusterConfig
	if err := c.Get(ctx, client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cc); err != nil {
		return nil, fmt.Errorf("reading ClusterConfig: %w", err)
	}
	var list corev1.NodeList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	st := &status{id: cc.Status.ClusterID, server: cfg.Host}
	for _, n := range list.Items {
		state := "NotReady"
		if localcluster.NodeReady(&n) {
			state = "Ready"
		}
		st.nodes = append(st.nodes, fmt.Sprintf("%s (%s)", n.Name, state))
		if sharing.IsVirtual(&n) && state == "Ready" {
			st.virtualReady++
		}
	}
	var fcs discoveryv1alpha1.ForeignClusterList
	if err := c.List(ctx, &fcs); err != nil {
		return nil, fmt.Errorf("listing ForeignClusters: %w", err)
	}
	for _, fc := range fcs.Items {
		outgoing := "-"
		if c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested); c != nil {
			outgoing = c.Reason
			if c.Reason == discoveryv1alpha1.ReasonAccepted {
				st.accepted++
			}
		}
		incoming := "-"
		if fc.Status.IncomingPeering {
			incoming = "in"
		}
		st.peers = append(st.peers, fmt.Sprintf("%s (%s, %s, %s)", fc.Spec.ClusterIdentity.ClusterName, fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel], outgoing, incoming))
		if meta.IsStatusConditionTrue(fc.Status.Conditions, discoveryv1alpha1.ConditionNetworkEstablished) {
			st.networkEstablished++
		}
	}
	sort.Strings(st.nodes)
	sort.Strings(st.peers)
	return st, nil
}
