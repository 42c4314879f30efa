// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package playground runs several local clusters with Liqo installed: the
// harness of internal/localcluster for the control planes, the install
// package for CRDs and RBAC, and one liqo-controller-manager process per
// cluster, authenticated as its ServiceAccount. `liqoctl playground`, the
// end-to-end tests and the benchmarks all start clusters through it.
//
// A playground lives in one directory: a state file, one kubeconfig per
// cluster (<name>.kubeconfig), and each cluster's own directory under
// clusters/. Down stops everything recorded there, from any process.
package playground

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/install/chart"
	"github.com/liqo-go/liqo/internal/localcluster"
)

// ControllerManager is the name of the liqo-controller-manager process and
// binary.
const ControllerManager = "liqo-controller-manager"

const stateFile = "playground.json"

// BrokerName is the playground's broker cluster, and BrokerURLFile the
// file, in the playground directory, holding its API's URL.
const (
	BrokerName    = "broker"
	BrokerURLFile = "broker.url"
	// BrokerProcess is the name of the liqo-broker process and binary.
	BrokerProcess = "liqo-broker"
)

// Options says what playground to start.
type Options struct {
	// Dir is the playground directory; it must not hold a running
	// playground.
	Dir string
	// Clusters is how many clusters to start; defaults to 3.
	Clusters int
	// NodesPerCluster is how many kwok worker nodes each cluster gets;
	// defaults to 2.
	NodesPerCluster int
	// BinDir holds the control-plane binaries and liqo-controller-manager;
	// see localcluster.FindBinDir for the default.
	BinDir string
	// ControllerManagerBin is the liqo-controller-manager binary; defaults
	// to BinDir/liqo-controller-manager. Tests point it at a fresh build.
	ControllerManagerBin string
	// Customize, when set, adjusts each cluster's harness options.
	Customize func(name string, o *localcluster.Options)
	// MDNSPort is the UDP port the clusters' mDNS uses on the loopback
	// interface; 0 picks a free one, so that playgrounds and test suites
	// running at once do not discover each other.
	MDNSPort int
	// ControllerManagerArgs are extra flags for every controller manager.
	ControllerManagerArgs []string
	// ControllerManagerArgsFor, when set, adds flags for one cluster's
	// controller manager.
	ControllerManagerArgsFor func(name string) []string
	// ClusterConfig, when set, adjusts the ClusterConfig each cluster
	// starts with (after the playground's own settings).
	ClusterConfig func(name string, spec *configv1alpha1.ClusterConfigSpec)
	// Detach lets the playground outlive the caller (liqoctl); tests leave
	// it false so that nothing survives them.
	Detach bool
	// Supervisor, when set, runs every component under a supervisor that
	// restarts it when it exits (see localcluster.Options.Supervisor).
	Supervisor []string
	// Network gives each cluster a real node (kubelet and containerd, in a
	// network namespace) instead of kwok workers, all on one underlay, and
	// runs the chart's gateway and route agent there: the clusters' pod
	// networks are connected through the tunnels. Root only; see
	// NetworkSupported.
	Network bool
	// GatewayImage is the archive of the liqo-gateway image the real
	// nodes import (tagged GatewayImageRepository:GatewayImageTag); defaults to
	// BinDir/GatewayImageFile.
	GatewayImage string
	// NodeImages are more image archives the real nodes import (with
	// Network), for workloads that cannot pull: `make conformance` gives
	// the suite's images this way.
	NodeImages []string
	// ClusterDNSImage, with Network, is a CoreDNS image among NodeImages
	// that every cluster runs as its DNS (localcluster.Options.
	// ClusterDNSImage): pods reach Services by name.
	ClusterDNSImage string
	// Broker, when set, starts one more cluster, named BrokerName, that
	// runs Liqo and liqo-broker with these modes (catalog, orchestrator),
	// its catalog public; the broker's URL is written to <Dir>/broker.url.
	Broker []string
	// BrokerBin is the liqo-broker binary; defaults to BinDir/liqo-broker.
	BrokerBin string
	// DistinctPodRanges gives each cluster a pod range of its own
	// (PodRange): peers then reach each other's pods at the pods' own
	// addresses, nothing remapped, as between organisations that chose
	// their ranges apart. Otherwise every cluster has localcluster.PodCIDR
	// and the network fabric remaps each peer's range.
	DistinctPodRanges bool
	// DNSProxy, with Network, runs the chart's DNS proxy in every cluster
	// (dnsProxy.enabled, the controller managers' --dns-proxy): a
	// consumer's offloaded pods reach Services by the consumer's
	// namespace names.
	DNSProxy bool
	// DNSProxyUpstream is the cluster DNS the proxy asks (dnsProxy.
	// upstream); its pod's first nameserver when empty.
	DNSProxyUpstream string
	// Out receives progress lines; nil discards them.
	Out io.Writer
	// Log receives the harness's detailed messages.
	Log logr.Logger
}

// Member is one cluster of the playground.
type Member struct {
	*localcluster.Cluster
	// Kubeconfig is the admin kubeconfig copied to <Dir>/<name>.kubeconfig.
	Kubeconfig string
	// ClusterID is what the controller manager settled on.
	ClusterID string
	// MetricsPort and ProbePort are the controller manager's endpoints on
	// 127.0.0.1.
	MetricsPort, ProbePort int
	// AuthURL is where its auth service listens, on 127.0.0.1.
	AuthURL string
	// AuthPort is the auth service's port; StartControllerManager picks a
	// free one when it is 0, and keeps it across restarts otherwise.
	AuthPort int
	// WebhookPort is the admission webhook's port.
	WebhookPort int
	// BrokerURL is where liqo-broker's API listens, on 127.0.0.1, when
	// the member is the playground's broker.
	BrokerURL string

	controllerManagerBin string
	extraArgs            []string
}

// Playground is a running set of clusters.
type Playground struct {
	Dir     string
	Members []*Member
	// Broker is the broker cluster, when Options.Broker asked for one;
	// not among Members.
	Broker *Member

	// brokerArgs, brokerBin and its ports start liqo-broker again
	// (RestartBroker).
	brokerArgs                     []string
	brokerBin                      string
	brokerAPIPort, brokerProbePort int
	// MDNSPort is the UDP port the clusters speak mDNS on, on loopback.
	MDNSPort int

	network *localcluster.Network
}

type state struct {
	Clusters []ClusterInfo `json:"clusters"`
	// Network is the underlay's namespace, when the clusters have real
	// nodes: Down removes it after the clusters.
	Network string `json:"network,omitempty"`
}

// kubeletAddressArgs publish the virtual nodes' kubelet API at the
// cluster's host address when it has real nodes: the API server's node
// proxy (kubectl get --raw /api/v1/nodes/NAME/proxy/...) refuses a
// loopback address, and the egress proxy brings that one to the host's
// loopback.
func (m *Member) kubeletAddressArgs() []string {
	if a := m.HostAddress(); a.IsValid() {
		return []string{"--kubelet-address=" + a.String()}
	}
	return nil
}

// GatewayImageFile is the archive of the gateway's image that `make demo`
// builds into the bin directory for a playground with a network, tagged
// GatewayImageRepository:GatewayImageTag.
const (
	GatewayImageFile       = "liqo-gateway-image.tar"
	GatewayImageRepository = "ghcr.io/liqo-go/liqo-gateway"
	GatewayImageTag        = "playground"
)

// NetworkSupported says why a playground cannot have a network here (real
// nodes need root, Debian packages and `make node-tools`; the gateway its
// image), or nil.
func NetworkSupported(binDir, gatewayImage string) error {
	if binDir == "" {
		var err error
		if binDir, err = localcluster.FindBinDir(); err != nil {
			return err
		}
	}
	if err := localcluster.RealNodesSupported(binDir); err != nil {
		return err
	}
	if gatewayImage == "" {
		gatewayImage = filepath.Join(binDir, GatewayImageFile)
	}
	if _, err := os.Stat(gatewayImage); err != nil {
		return fmt.Errorf("the gateway's image %s is missing (make %s): %w", gatewayImage, filepath.Join("bin", GatewayImageFile), err)
	}
	return nil
}

// ClusterInfo is what the state file records of one cluster.
type ClusterInfo struct {
	Name       string `json:"name"`
	Dir        string `json:"dir"`
	Kubeconfig string `json:"kubeconfig"`
}

// ClusterName is the name of the i-th cluster (from 1).
func ClusterName(i int) string { return "cluster-" + strconv.Itoa(i) }

func (o *Options) complete() error {
	if o.Dir == "" {
		return errors.New("options: Dir is required")
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	o.Dir = abs
	if o.Clusters == 0 {
		o.Clusters = 3
	}
	if o.Clusters < 1 || o.Clusters > 10 {
		return fmt.Errorf("options: Clusters must be between 1 and 10, got %d", o.Clusters)
	}
	if o.NodesPerCluster == 0 && !o.Network {
		o.NodesPerCluster = 2
	}
	if o.BinDir == "" {
		if o.BinDir, err = localcluster.FindBinDir(); err != nil {
			return err
		}
	}
	if o.Network {
		if o.GatewayImage == "" {
			o.GatewayImage = filepath.Join(o.BinDir, GatewayImageFile)
		}
		if err := NetworkSupported(o.BinDir, o.GatewayImage); err != nil {
			return fmt.Errorf("a playground with a network: %w", err)
		}
	}
	if o.ControllerManagerBin == "" {
		o.ControllerManagerBin = filepath.Join(o.BinDir, ControllerManager)
	}
	if _, err := os.Stat(o.ControllerManagerBin); err != nil {
		return fmt.Errorf("%s not found (run `make build`): %w", o.ControllerManagerBin, err)
	}
	if len(o.Broker) > 0 {
		if o.BrokerBin == "" {
			o.BrokerBin = filepath.Join(o.BinDir, BrokerProcess)
		}
		if _, err := os.Stat(o.BrokerBin); err != nil {
			return fmt.Errorf("%s not found (run `make build`): %w", o.BrokerBin, err)
		}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	// The clusters start side by side, each telling its progress.
	o.Out = &syncWriter{w: o.Out}
	if o.MDNSPort == 0 {
		if o.MDNSPort, err = freeUDPPort(); err != nil {
			return err
		}
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	return nil
}

// Up starts the clusters in parallel, installs Liqo on each and starts its
// controller manager. On error everything started is stopped.
func Up(ctx context.Context, opts Options) (*Playground, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(opts.Dir, stateFile)); err == nil {
		return nil, fmt.Errorf("a playground already exists in %s: run `liqoctl playground down` first", opts.Dir)
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "clusters"), 0o750); err != nil {
		return nil, fmt.Errorf("creating %s: %w", opts.Dir, err)
	}
	p := &Playground{Dir: opts.Dir, Members: make([]*Member, opts.Clusters), MDNSPort: opts.MDNSPort}
	fmt.Fprintf(opts.Out, "Starting %d clusters in %s\n", opts.Clusters, opts.Dir)
	if opts.Network {
		n, err := localcluster.NewNetwork()
		if err != nil {
			return nil, err
		}
		p.network = n
		// Recorded first: a failed start, or Down, removes it.
		if err := p.writeState(); err != nil {
			return nil, errors.Join(err, n.Close())
		}
		fmt.Fprintf(opts.Out, "  with a network: one real node per cluster, on the underlay %s\n", n.Name)
	}

	var wg sync.WaitGroup
	errs := make([]error, opts.Clusters+1)
	for i := range opts.Clusters {
		wg.Go(func() {
			p.Members[i], errs[i] = startMember(ctx, opts, ClusterName(i+1), opts.podRange(i), p.network)
		})
	}
	if len(opts.Broker) > 0 {
		wg.Go(func() {
			if p.Broker, errs[opts.Clusters] = startMember(ctx, opts, BrokerName, opts.podRange(opts.Clusters), p.network); errs[opts.Clusters] == nil {
				errs[opts.Clusters] = p.startBroker(ctx, opts)
			}
		})
	}
	wg.Wait()
	if err := p.writeState(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		// Keep the logs, but not the state: nothing runs any more, and a
		// new `up` must be able to start here.
		_ = p.Stop()
		_ = os.Remove(filepath.Join(opts.Dir, stateFile))
		return nil, fmt.Errorf("%w\n(logs kept in %s)", err, filepath.Join(opts.Dir, "clusters"))
	}
	return p, nil
}

// PodRange is the pod range of the playground's i-th cluster (from 0, the
// broker last) when its ranges are distinct: 10.100.0.0/14, 10.104.0.0/14
// and so on, clear of the Service range (localcluster.ServiceCIDR) and of
// the underlay (localcluster.UnderlayCIDR) for every number of clusters
// Options allows.
func PodRange(i int) string {
	return fmt.Sprintf("10.%d.0.0/14", 100+4*i)
}

// podRange is cluster i's pod range: its own, or the one all share.
func (o *Options) podRange(i int) string {
	if o.DistinctPodRanges {
		return PodRange(i)
	}
	return localcluster.PodCIDR
}

func startMember(ctx context.Context, opts Options, name, podCIDR string, network *localcluster.Network) (*Member, error) {
	start := time.Now()
	copts := localcluster.Options{
		Name:    name,
		PodCIDR: podCIDR,
		Dir:     filepath.Join(opts.Dir, "clusters", name),
		BinDir:  opts.BinDir,
		Nodes:   opts.NodesPerCluster,
		Detach:  opts.Detach, Supervisor: opts.Supervisor,
		Log: opts.Log,
	}
	values := map[string]any{"clusterName": name}
	if name == BrokerName {
		// The chart's broker, with its rights; liqo-broker runs on the
		// host, as the controller manager does.
		modes := make([]any, len(opts.Broker))
		for i, m := range opts.Broker {
			modes[i] = m
		}
		values["broker"] = map[string]any{"enabled": true, "modes": modes, "catalog": map[string]any{"public": true}}
	}
	// Neither the gateway nor the route agents run on kwok nodes: there is
	// no network to program.
	skip := []string{"Deployment", "DaemonSet"}
	if network != nil {
		copts.RealNodes, copts.Network = 1, network
		copts.NodeImages = append(copts.NodeImages, opts.GatewayImage)
		copts.NodeImages = append(copts.NodeImages, opts.NodeImages...)
		copts.ClusterDNSImage = opts.ClusterDNSImage
		values["gateway"] = map[string]any{"image": map[string]any{"repository": GatewayImageRepository, "tag": GatewayImageTag}}
		if opts.DNSProxy {
			values["dnsProxy"] = map[string]any{"enabled": true, "upstream": opts.DNSProxyUpstream}
		}
		skip = []string{"Deployment/" + install.ControllerManagerName, "Deployment/" + install.BrokerName}
	}
	if opts.Customize != nil {
		opts.Customize(name, &copts)
	}
	c, err := localcluster.Start(ctx, copts)
	if err != nil {
		return nil, err
	}
	m := &Member{Cluster: c, controllerManagerBin: opts.ControllerManagerBin, extraArgs: opts.ControllerManagerArgs}
	if network != nil && opts.DNSProxy {
		m.extraArgs = append(slices.Clone(m.extraArgs), "--dns-proxy")
	}
	if name == BrokerName {
		// The broker measures its providers (the chart's broker.enabled).
		m.extraArgs = append(slices.Clone(m.extraArgs), "--measure-providers")
		// An aggregating broker's virtual nodes tell its consumers
		// nothing of its providers (the chart's broker.modes).
		if slices.Contains(opts.Broker, "aggregator") {
			m.extraArgs = append(m.extraArgs, "--opaque-virtual-nodes")
		}
	}
	if opts.ControllerManagerArgsFor != nil {
		m.extraArgs = append(append([]string{}, m.extraArgs...), opts.ControllerManagerArgsFor(name)...)
	}
	fmt.Fprintf(opts.Out, "  %s: control plane and %d nodes ready in %s\n", name, opts.NodesPerCluster+c.RealNodes(), c.StartDuration.Round(100*time.Millisecond))

	kubeconfig, err := os.ReadFile(c.KubeconfigPath)
	if err == nil {
		m.Kubeconfig = filepath.Join(opts.Dir, name+".kubeconfig")
		err = os.WriteFile(m.Kubeconfig, kubeconfig, 0o600)
	}
	if err == nil {
		// The chart users install, rendered by the same code; the
		// controller manager runs on the host instead of in a pod,
		// with the chart's ServiceAccount and rights.
		err = chart.Apply(ctx, c.RESTConfig, chart.Release{Name: chart.DefaultReleaseName, Namespace: install.DefaultNamespace,
			Values: values}, skip...)
	}
	if err == nil {
		err = createClusterConfig(ctx, c, opts)
	}
	if err == nil {
		err = m.StartControllerManager(ctx)
	}
	if err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	fmt.Fprintf(opts.Out, "  %s: Liqo running, ClusterID %s (%s in all)\n", name, m.ClusterID, time.Since(start).Round(100*time.Millisecond))
	return m, nil
}

// StartControllerManager starts the member's liqo-controller-manager,
// authenticated as its ServiceAccount, and waits until it is ready and has
// published the ClusterID in the ClusterConfig status.
func (m *Member) StartControllerManager(ctx context.Context) error {
	kc, err := install.ControllerManagerKubeconfig(ctx, m.RESTConfig, install.Options{}, 24*time.Hour)
	if err != nil {
		return err
	}
	kcPath := filepath.Join(m.Dir, "liqo-controller-manager.kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		return err
	}
	if m.MetricsPort, err = localcluster.FreePort(); err != nil {
		return err
	}
	if m.ProbePort, err = localcluster.FreePort(); err != nil {
		return err
	}
	if m.AuthPort == 0 {
		if m.AuthPort, err = localcluster.FreePort(); err != nil {
			return err
		}
	}
	m.AuthURL = "https://127.0.0.1:" + strconv.Itoa(m.AuthPort)
	if m.WebhookPort, err = localcluster.FreePort(); err != nil {
		return err
	}
	proc, err := m.Launch(ControllerManager, m.controllerManagerBin, append([]string{
		"--kubeconfig=" + kcPath,
		"--cluster-name=" + m.Name,
		"--pod-cidr=" + m.PodCIDR(),
		"--service-cidr=" + localcluster.ServiceCIDR,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(m.MetricsPort),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(m.ProbePort),
		"--auth-bind-address=127.0.0.1:" + strconv.Itoa(m.AuthPort),
		"--auth-url=" + m.AuthURL,
		"--webhook-bind-address=127.0.0.1:" + strconv.Itoa(m.WebhookPort),
		// Each virtual node's kubelet API takes a free port.
		"--kubelet-bind-address=127.0.0.1:0",
	}, append(m.kubeletAddressArgs(), m.extraArgs...)...))
	if err != nil {
		return err
	}
	c, err := client.New(m.RESTConfig, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if proc.Exited() {
			return false, fmt.Errorf("%s exited; last lines of %s:\n%s", ControllerManager, proc.LogPath, proc.Tail(20))
		}
		var cfg configv1alpha1.ClusterConfig
		if err := c.Get(ctx, client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cfg); err != nil {
			return false, nil //nolint:nilerr // not created yet
		}
		m.ClusterID = cfg.Status.ClusterID
		// After a restart the ClusterID is there already: the new process
		// is ready once its own endpoints answer.
		return m.ClusterID != "" && listening(ctx, m.MetricsPort, m.AuthPort, m.WebhookPort) && probeReady(ctx, m.ProbePort), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to publish the ClusterID: %w", ControllerManager, err)
	}
	return nil
}

// startBroker starts liqo-broker on the broker member, authenticated as
// the chart's ServiceAccount, waits until it is ready, and writes its
// URL to BrokerURLFile.
func (p *Playground) startBroker(ctx context.Context, opts Options) error {
	m := p.Broker
	kc, err := install.ServiceAccountKubeconfig(ctx, m.RESTConfig, install.DefaultNamespace, install.BrokerName, 24*time.Hour)
	if err != nil {
		return err
	}
	kcPath := filepath.Join(m.Dir, "liqo-broker.kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		return err
	}
	apiPort, err := localcluster.FreePort()
	if err != nil {
		return err
	}
	probePort, err := localcluster.FreePort()
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + kcPath,
		"--namespace=" + install.DefaultNamespace,
		"--http-bind-address=127.0.0.1:" + strconv.Itoa(apiPort),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probePort),
		"--metrics-bind-address=0",
		"--public-catalog=true",
	}
	for _, mode := range opts.Broker {
		args = append(args, "--with-"+mode)
	}
	p.brokerArgs, p.brokerBin, p.brokerAPIPort, p.brokerProbePort = args, opts.BrokerBin, apiPort, probePort
	if err := p.launchBroker(ctx); err != nil {
		return err
	}
	m.BrokerURL = "http://127.0.0.1:" + strconv.Itoa(apiPort)
	fmt.Fprintf(opts.Out, "  %s: liqo-broker (%s) at %s (its dashboard at /)\n", m.Name, strings.Join(opts.Broker, ", "), m.BrokerURL)
	return os.WriteFile(filepath.Join(p.Dir, BrokerURLFile), []byte(m.BrokerURL+"\n"), 0o600)
}

// RestartBroker stops liqo-broker gracefully and starts it again, on the
// same ports, as an upgrade or a lost pod would.
func (p *Playground) RestartBroker(ctx context.Context) error {
	if p.Broker == nil {
		return errors.New("this playground has no broker")
	}
	if err := p.Broker.StopProcess(BrokerProcess); err != nil {
		return err
	}
	return p.launchBroker(ctx)
}

// launchBroker starts liqo-broker and waits until it answers.
func (p *Playground) launchBroker(ctx context.Context) error {
	proc, err := p.Broker.Launch(BrokerProcess, p.brokerBin, p.brokerArgs)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if proc.Exited() {
			return false, fmt.Errorf("%s exited; last lines of %s:\n%s", BrokerProcess, proc.LogPath, proc.Tail(20))
		}
		return listening(ctx, p.brokerAPIPort) && probeReady(ctx, p.brokerProbePort), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", BrokerProcess, err)
	}
	return nil
}

// listening reports whether something accepts connections on each of the
// loopback ports.
func listening(ctx context.Context, ports ...int) bool {
	var d net.Dialer
	for _, p := range ports {
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return false
		}
		_ = conn.Close()
	}
	return true
}

// probeReady reports whether the controller manager's /readyz on the
// loopback port answers 200.
func probeReady(ctx context.Context, port int) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// createClusterConfig creates the ClusterConfig the cluster starts with:
// mDNS on the loopback interface only (never a real one), on the
// playground's own port.
func createClusterConfig(ctx context.Context, c *localcluster.Cluster, opts Options) error {
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		return err
	}
	cfg := &configv1alpha1.ClusterConfig{ObjectMeta: metav1.ObjectMeta{Name: configv1alpha1.ClusterConfigName}}
	cfg.Spec.DiscoveryConfig.MDNSInterface = "lo"
	cfg.Spec.DiscoveryConfig.MDNSPort = int32(opts.MDNSPort) //nolint:gosec // a UDP port
	if opts.ClusterConfig != nil {
		opts.ClusterConfig(c.Name, &cfg.Spec)
	}
	if err := cl.Create(ctx, cfg); err != nil {
		return fmt.Errorf("creating the ClusterConfig: %w", err)
	}
	return nil
}

// freeUDPPort returns a UDP port nothing on loopback is bound to.
func freeUDPPort() (int, error) {
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0") //nolint:noctx // a bind on loopback, nothing to wait for
	if err != nil {
		return 0, fmt.Errorf("finding a free UDP port: %w", err)
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).Port, nil
}

// StopControllerManager stops the member's controller manager gracefully.
func (m *Member) StopControllerManager() error {
	return m.StopProcess(ControllerManager)
}

func (p *Playground) writeState() error {
	var s state
	if p.network != nil {
		s.Network = p.network.Name
	}
	for _, m := range append(slices.Clone(p.Members), p.Broker) {
		if m != nil {
			s.Clusters = append(s.Clusters, ClusterInfo{Name: m.Name, Dir: m.Dir, Kubeconfig: m.Kubeconfig})
		}
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(p.Dir, stateFile), data, 0o600)
}

// Stop stops every cluster of a playground this process started. The
// directory stays, for the logs.
func (p *Playground) Stop() error {
	var errs []error
	for _, m := range append(slices.Clone(p.Members), p.Broker) {
		if m != nil {
			errs = append(errs, m.Stop())
		}
	}
	if _, err := localcluster.Reap(p.Dir); err != nil {
		errs = append(errs, err)
	}
	if p.network != nil {
		errs = append(errs, p.network.Close())
	}
	return errors.Join(errs...)
}

// Down stops the playground in dir, whoever started it, and removes the
// directory. It returns how many clusters it stopped.
func Down(dir string) (int, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return 0, err
	}
	data, err := os.ReadFile(filepath.Join(abs, stateFile))
	if os.IsNotExist(err) {
		// Nothing recorded: still make sure nothing runs from here.
		_, rerr := localcluster.Reap(abs)
		return 0, rerr
	}
	if err != nil {
		return 0, fmt.Errorf("reading playground state: %w", err)
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return 0, fmt.Errorf("parsing %s: %w", filepath.Join(abs, stateFile), err)
	}
	var errs []error
	for _, m := range s.Clusters {
		if err := localcluster.StopDir(m.Dir); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s: %w", m.Name, err))
		}
	}
	if _, err := localcluster.Reap(abs); err != nil {
		errs = append(errs, err)
	}
	if s.Network != "" {
		errs = append(errs, localcluster.DeleteNetwork(s.Network))
	}
	if err := errors.Join(errs...); err != nil {
		return len(s.Clusters), err
	}
	return len(s.Clusters), os.RemoveAll(abs)
}

// Load reads the playground recorded in dir, for commands that inspect it.
func Load(dir string) ([]ClusterInfo, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("no playground in %s: run `liqoctl playground up`", dir)
		}
		return nil, err
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", filepath.Join(dir, stateFile), err)
	}
	return s.Clusters, nil
}

// syncWriter serializes writes to w: the clusters of a playground start in
// parallel and each reports to the same writer (a bytes.Buffer in tests).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
