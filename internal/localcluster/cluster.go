// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Component names, which are also the names of the binaries and log files.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kwok                  = "kwok"
)

// Binaries lists every binary a cluster needs.
var Binaries = []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler, Kwok}

// ServiceCIDR is the range of every cluster's Service IPs.
const ServiceCIDR = "10.96.0.0/16"

// PodCIDR is a cluster's pod range unless Options.PodCIDR names another:
// it covers every node's pod range (a /20 each, see podCIDR). Clusters
// that keep it overlap, so the network fabric remaps them.
const PodCIDR = "10.100.0.0/14"

// Labels and annotations of the nodes the harness registers.
const (
	// KwokNodeAnnotation marks nodes that kwok simulates.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// ControlPlaneLabel marks a control-plane node, as kubeadm does.
	ControlPlaneLabel = "node-role.kubernetes.io/control-plane"
	// NodeTypeLabel says what kind of node this is; kwok nodes get "kwok".
	NodeTypeLabel = "localcluster.liqo.io/node-type"
)

// Options says what cluster to start.
type Options struct {
	// Name names the cluster in its directory, nodes and logs.
	Name string
	// Dir is the cluster's directory; it is created, and a new temporary
	// directory is used when empty.
	Dir string
	// BinDir holds the binaries; see FindBinDir for the default.
	BinDir string
	// Nodes is the number of kwok worker nodes.
	Nodes int
	// NodeCapacity is each worker node's capacity; defaults to 32 CPUs,
	// 256Gi of memory and 1100 pods.
	NodeCapacity corev1.ResourceList
	// ControlPlaneNode registers a (kwok-simulated) control-plane node, as a
	// kubeadm cluster has, labelled and tainted like one.
	ControlPlaneNode bool
	// Detach lets the processes outlive the caller; stop them with StopDir.
	Detach bool
	// CPUs, when set, pins every process of the cluster (those Launch
	// starts too) to these CPUs: benchmarks give each cluster its own
	// cores, as separate machines have.
	CPUs []int
	// Profiling serves the API server's /debug/pprof to its
	// administrators (benchmarks profile it); off otherwise.
	Profiling bool
	// APIServerOnly starts etcd and kube-apiserver alone: no controller
	// manager, scheduler, kwok or node. Controller-level tests run one
	// reconciler against it in seconds (nothing else acts: a namespace
	// deleted stays Terminating, no quota is counted).
	APIServerOnly bool
	// StartTimeout bounds the whole start; defaults to 3 minutes.
	StartTimeout time.Duration
	// PodCIDR is the cluster's pod range, an IPv4 prefix of at most 14
	// bits (every node gets a /20 of it, in order); defaults to PodCIDR.
	// Clusters given ranges apart reach each other's pods at their own
	// addresses, with nothing remapped.
	PodCIDR string
	// RealNodes is the number of real nodes: a kubelet, containerd and
	// kube-proxy each, running real containers, in a network and mount
	// namespace of its own (root only; see RealNodesSupported).
	RealNodes int
	// Network is the underlay the real nodes attach to; clusters that
	// must reach each other share one. Nil: the cluster makes its own.
	Network *Network
	// NodeImages are OCI archives imported into every real node's
	// containerd (pods use them with imagePullPolicy Never or
	// IfNotPresent: nothing can be pulled).
	NodeImages []string
	// ClusterDNSImage, when set, is a CoreDNS image among NodeImages: the
	// cluster gets a DNS, as kubeadm's (kube-system/kube-dns at
	// ClusterDNSAddress, on the first real node), and the kubelets give
	// pods its address. Needs RealNodes.
	ClusterDNSImage string
	// Supervisor, when set, is the command every process of the cluster
	// runs under (as `liqoctl playground supervise`), followed by
	// --restarts FILE -- BIN ARGS: it restarts the process with backoff
	// when it exits, as a kubelet would (see Supervise).
	Supervisor []string
	// Log receives progress messages.
	Log logr.Logger
}

// Cluster is a running local cluster.
type Cluster struct {
	// Name is the cluster's name.
	Name string
	// Dir is the cluster's directory.
	Dir string
	// KubeconfigPath is the admin kubeconfig (system:masters).
	KubeconfigPath string
	// APIServerURL is the API server's https URL on 127.0.0.1.
	APIServerURL string
	// CACertPath is the cluster CA, which also signs CSRs.
	CACertPath string
	// RESTConfig is an admin client configuration.
	RESTConfig *rest.Config
	// StartDuration is how long Start took.
	StartDuration time.Duration

	opts      Options
	stateMu   sync.Mutex // serialises writes of the state file
	mu        sync.Mutex
	processes []*Process
	stopOnce  sync.Once

	// Real nodes (realnode.go).
	network      *Network
	ownNetwork   bool
	networkIndex int
	realNodes    []*realNode
	netns        []string // guarded by stateMu
	cgroups      []string // guarded by stateMu
}

// state is what a cluster directory records so that another process can
// find and stop what this one started.
type state struct {
	Name           string         `json:"name"`
	KubeconfigPath string         `json:"kubeconfig"`
	APIServerURL   string         `json:"apiServerURL"`
	Processes      []stateProcess `json:"processes"`
	// What the real nodes made, removed after the processes stop.
	NetNS        []string `json:"netns,omitempty"`
	Cgroups      []string `json:"cgroups,omitempty"`
	EgressSocket string   `json:"egressSocket,omitempty"`
}

type stateProcess struct {
	Name    string `json:"name"`
	PID     int    `json:"pid"`
	LogPath string `json:"log"`
}

const stateFile = "cluster.json"

// Start brings up one cluster and returns once its nodes are Ready. On error
// everything it started is stopped again; the directory is kept for its
// logs, whose paths the error names.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	begin := time.Now()
	if err := opts.complete(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	c := &Cluster{Name: opts.Name, Dir: opts.Dir, opts: opts}
	if err := c.start(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("starting cluster %q (logs in %s): %w", opts.Name, c.LogDir(), err), c.Stop())
	}
	c.StartDuration = time.Since(begin)
	opts.Log.Info("Cluster ready", "cluster", c.Name, "apiServer", c.APIServerURL, "kubeconfig", c.KubeconfigPath, "took", c.StartDuration.Round(time.Millisecond))
	return c, nil
}

func (o *Options) complete() error {
	if o.Name == "" {
		return errors.New("options: Name is required")
	}
	if strings.ContainsAny(o.Name, "/ ") {
		return fmt.Errorf("options: Name %q must not contain '/' or spaces", o.Name)
	}
	if o.Nodes < 0 || o.RealNodes < 0 {
		return fmt.Errorf("options: Nodes and RealNodes must not be negative, got %d and %d", o.Nodes, o.RealNodes)
	}
	if o.RealNodes >= 200 {
		return fmt.Errorf("options: at most 199 real nodes, got %d", o.RealNodes)
	}
	if o.RealNodes > 0 && o.APIServerOnly {
		return errors.New("options: RealNodes needs the whole control plane, not APIServerOnly")
	}
	if o.PodCIDR == "" {
		o.PodCIDR = PodCIDR
	}
	if p, err := netip.ParsePrefix(o.PodCIDR); err != nil || !p.Addr().Is4() || p.Bits() > 14 || p.Masked() != p {
		return fmt.Errorf("options: PodCIDR %q must be an IPv4 prefix of at most 14 bits, with no host bits (each node takes a /20 of it)", o.PodCIDR)
	}
	if o.ClusterDNSImage != "" && o.RealNodes == 0 {
		return errors.New("options: ClusterDNSImage needs RealNodes: the DNS runs in a real container")
	}
	if o.Dir == "" {
		dir, err := os.MkdirTemp("", "liqo-"+o.Name+"-")
		if err != nil {
			return fmt.Errorf("creating cluster directory: %w", err)
		}
		o.Dir = dir
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	o.Dir = abs
	if o.BinDir == "" {
		if o.BinDir, err = FindBinDir(); err != nil {
			return err
		}
	}
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return fmt.Errorf("binary %s not found in %s (run `make tools`): %w", b, o.BinDir, err)
		}
	}
	if o.NodeCapacity == nil {
		o.NodeCapacity = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("32"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   resource.MustParse("1100"),
		}
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 3 * time.Minute
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	return nil
}

// FindBinDir locates the control-plane binaries: $LIQO_BIN_DIR, else the
// directory of the running executable when it holds them (liqoctl is built
// into bin/ next to them), else bin/ at the root of the source tree
// containing the working directory.
func FindBinDir() (string, error) {
	if d := os.Getenv("LIQO_BIN_DIR"); d != "" {
		return d, nil
	}
	if exe, err := os.Executable(); err == nil {
		d := filepath.Dir(exe)
		if _, err := os.Stat(filepath.Join(d, KubeAPIServer)); err == nil {
			return d, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "hack", "tools", "go.mod")); err == nil {
			return filepath.Join(d, "bin"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("cannot find the binaries: set LIQO_BIN_DIR or run from the source tree after `make tools`")
		}
	}
}

// LogDir is where the components' logs are.
func (c *Cluster) LogDir() string { return filepath.Join(c.Dir, "logs") }

// Processes returns the running components.
func (c *Cluster) Processes() []*Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Process(nil), c.processes...)
}

// Client returns an admin clientset.
func (c *Cluster) Client() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(c.RESTConfig)
}

func (c *Cluster) start(ctx context.Context) error {
	log := c.opts.Log.WithValues("cluster", c.Name)
	pkiDir := filepath.Join(c.Dir, "pki")
	for _, d := range []string{c.Dir, pkiDir, c.LogDir(), filepath.Join(c.Dir, "etcd")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}

	if c.opts.RealNodes > 0 {
		log.Info("Preparing real nodes", "nodes", c.opts.RealNodes)
		if err := c.prepareRealNodes(); err != nil {
			return err
		}
	}

	log.Info("Generating certificates")
	pki, err := c.writePKI(pkiDir)
	if err != nil {
		return err
	}

	log.Info("Starting etcd")
	etcdURL, err := c.startEtcd(ctx)
	if err != nil {
		return err
	}

	log.Info("Starting kube-apiserver")
	if err := c.startAPIServer(ctx, etcdURL, pki); err != nil {
		return err
	}

	if c.opts.APIServerOnly {
		return nil
	}
	if err := c.startHarnessNet(ctx); err != nil {
		return err
	}

	log.Info("Starting kube-controller-manager, kube-scheduler and kwok")
	errs := make(chan error, 3)
	go func() { errs <- c.startControllerManager(ctx, pki) }()
	go func() { errs <- c.startScheduler(ctx) }()
	go func() { errs <- c.startKwok(ctx) }()
	var all []error
	for range 3 {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		return err
	}

	log.Info("Registering nodes", "workers", c.opts.Nodes, "controlPlane", c.opts.ControlPlaneNode)
	if err := c.registerNodes(ctx); err != nil {
		return err
	}
	if len(c.realNodes) > 0 {
		log.Info("Starting real nodes", "nodes", len(c.realNodes))
	}
	if err := c.startRealNodes(ctx); err != nil {
		return err
	}
	if c.opts.ClusterDNSImage != "" {
		log.Info("Starting the cluster DNS", "image", c.opts.ClusterDNSImage, "address", ClusterDNSAddress)
	}
	return c.startClusterDNS(ctx)
}

type pkiPaths struct {
	caCert, caKey        string
	servingCert, servKey string
	adminCert, adminKey  string
	saKey, saPub         string
	caPEM, adminCertPEM  []byte
	adminKeyPEM          []byte
	// The aggregation layer's: the CA of the requests the API server
	// hands on to an aggregated API server (metrics-server), and its
	// client certificate for them.
	frontProxyCA, proxyCert, proxyKey string
}

// frontProxyClient is the user the API server hands requests on to
// aggregated API servers as.
const frontProxyClient = "front-proxy-client"

func (c *Cluster) writePKI(dir string) (*pkiPaths, error) {
	p := &pkiPaths{}
	ca, err := newCA(c.Name + "-ca")
	if err != nil {
		return nil, err
	}
	if p.caCert, p.caKey, err = ca.write(dir, "ca"); err != nil {
		return nil, err
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}
	if len(c.realNodes) > 0 {
		ips = append(ips, net.IP(apiServerVIP(c.networkIndex).AsSlice()))
	}
	serving, err := ca.issue("kube-apiserver", nil, ips,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	if p.servingCert, p.servKey, err = serving.write(dir, "apiserver"); err != nil {
		return nil, err
	}
	admin, err := ca.issue("liqo-harness-admin", []string{"system:masters"}, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	if p.adminCert, p.adminKey, err = admin.write(dir, "admin"); err != nil {
		return nil, err
	}
	if p.saKey, p.saPub, err = writeServiceAccountKeys(dir); err != nil {
		return nil, err
	}
	frontProxy, err := newCA(c.Name + "-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	if p.frontProxyCA, _, err = frontProxy.write(dir, "front-proxy-ca"); err != nil {
		return nil, err
	}
	proxy, err := frontProxy.issue(frontProxyClient, nil, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	if p.proxyCert, p.proxyKey, err = proxy.write(dir, "front-proxy-client"); err != nil {
		return nil, err
	}
	p.caPEM = ca.certPEM()
	p.adminCertPEM = admin.certPEM()
	if p.adminKeyPEM, err = admin.keyPEM(); err != nil {
		return nil, err
	}
	c.CACertPath = p.caCert
	return p, nil
}

func (c *Cluster) bin(name string) string { return filepath.Join(c.opts.BinDir, name) }

func (c *Cluster) launch(name string, args []string) (*Process, error) {
	return c.Launch(name, c.bin(name), args)
}

// Launch starts another process as part of the cluster, under the same
// rules as its components: own process group, log in LogDir, recorded in
// the state file, stopped by Stop and StopDir. Its arguments must mention
// the cluster directory (a kubeconfig inside it, say) for Reap to find it.
func (c *Cluster) Launch(name, bin string, args []string) (*Process, error) {
	return c.launchProcess(name, bin, args, true)
}

// launchProcess is Launch; supervised false runs the process without the
// supervisor even when the cluster has one (a real node's processes
// cannot be restarted one by one: they share a mount namespace).
func (c *Cluster) launchProcess(name, bin string, args []string, supervised bool) (*Process, error) {
	if c.process(name) != nil {
		return nil, fmt.Errorf("a process named %s is already running in cluster %q", name, c.Name)
	}
	runBin, runArgs := bin, args
	if len(c.opts.Supervisor) > 0 && supervised {
		runBin = c.opts.Supervisor[0]
		runArgs = append(append(append([]string{}, c.opts.Supervisor[1:]...), "--restarts", c.RestartsFile(name), "--", bin), args...)
	}
	p, err := startProcess(name, runBin, runArgs, c.LogDir(), c.opts.Detach, c.opts.CPUs)
	if err != nil {
		return nil, err
	}
	p.bin, p.args = bin, append([]string(nil), args...)
	c.mu.Lock()
	c.processes = append(c.processes, p)
	c.mu.Unlock()
	if err := c.writeState(); err != nil {
		return p, err
	}
	return p, nil
}

func (c *Cluster) startEtcd(ctx context.Context) (string, error) {
	clientPort, err := FreePort()
	if err != nil {
		return "", err
	}
	peerPort, err := FreePort()
	if err != nil {
		return "", err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	p, err := c.launch(Etcd, []string{
		"--name=" + c.Name,
		"--data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=" + c.Name + "=" + peerURL,
		// The data is thrown away with the cluster: durability buys nothing.
		"--unsafe-no-fsync",
		"--quota-backend-bytes=8589934592",
		"--log-level=warn",
	})
	if err != nil {
		return "", err
	}
	client := &http.Client{Timeout: time.Second}
	err = waitFor(ctx, p, func() bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
		if err != nil {
			return false
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct {
			Health string `json:"health"`
		}
		return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Health == "true"
	})
	return clientURL, err
}

func (c *Cluster) startAPIServer(ctx context.Context, etcdURL string, pki *pkiPaths) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	c.APIServerURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	extra, err := c.apiServerRealNodeArgs()
	if err != nil {
		return err
	}
	p, err := c.launch(KubeAPIServer, append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// The default reconciler refuses a loopback address, and nothing
		// in these clusters needs the kubernetes Service's endpoints.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(c.Dir, "pki", "apiserver-generated"),
		"--tls-cert-file=" + pki.servingCert,
		"--tls-private-key-file=" + pki.servKey,
		"--client-ca-file=" + pki.caCert,
		"--kubelet-client-certificate=" + pki.adminCert,
		"--kubelet-client-key=" + pki.adminKey,
		// The aggregation layer (metrics-server, StartMetricsServer).
		"--requestheader-client-ca-file=" + pki.frontProxyCA,
		"--requestheader-allowed-names=" + frontProxyClient,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + pki.proxyCert,
		"--proxy-client-key-file=" + pki.proxyKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.saPub,
		"--service-account-signing-key-file=" + pki.saKey,
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--authorization-mode=" + c.authorizationModes(),
		"--allow-privileged=true",
		"--max-requests-inflight=1000",
		"--max-mutating-requests-inflight=500",
		"--profiling=" + strconv.FormatBool(c.opts.Profiling),
		"--v=1",
	}, extra...))
	if err != nil {
		return err
	}
	if err := c.writeKubeconfig(pki); err != nil {
		return err
	}
	client, err := c.Client()
	if err != nil {
		return err
	}
	return waitFor(ctx, p, func() bool {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok"
	})
}

func (c *Cluster) writeKubeconfig(pki *pkiPaths) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.APIServerURL, CertificateAuthorityData: pki.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: pki.adminCertPEM, ClientKeyData: pki.adminKeyPEM}
	cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: "admin"}
	cfg.CurrentContext = c.Name
	c.KubeconfigPath = filepath.Join(c.Dir, "admin.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, c.KubeconfigPath); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		return err
	}
	// The harness creates nodes and waits on them; tests derive their own
	// clients from this and often create hundreds of objects.
	rc.QPS, rc.Burst = 200, 400
	c.RESTConfig = rc
	return c.writeState()
}

func (c *Cluster) startControllerManager(ctx context.Context, pki *pkiPaths) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	p, err := c.launch(KubeControllerManager, []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--authentication-kubeconfig=" + c.KubeconfigPath,
		"--authorization-kubeconfig=" + c.KubeconfigPath,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(c.Dir, "pki", "kcm-generated"),
		// The CSR signer signs with the cluster CA, so the certificates the
		// CSR API issues authenticate against this API server.
		"--cluster-signing-cert-file=" + pki.caCert,
		"--cluster-signing-key-file=" + pki.caKey,
		"--root-ca-file=" + pki.caCert,
		"--service-account-private-key-file=" + pki.saKey,
		"--use-service-account-credentials=false",
		"--kube-api-qps=500",
		"--kube-api-burst=1000",
		"--concurrent-replicaset-syncs=10",
		"--v=1",
	})
	if err != nil {
		return err
	}
	return waitHealthz(ctx, p, port)
}

func (c *Cluster) startScheduler(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	configPath := filepath.Join(c.Dir, "scheduler.yaml")
	config := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
`, c.KubeconfigPath)
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return fmt.Errorf("writing scheduler configuration: %w", err)
	}
	p, err := c.launch(KubeScheduler, []string{
		"--config=" + configPath,
		"--authentication-kubeconfig=" + c.KubeconfigPath,
		"--authorization-kubeconfig=" + c.KubeconfigPath,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(c.Dir, "pki", "scheduler-generated"),
		"--v=1",
	})
	if err != nil {
		return err
	}
	return waitHealthz(ctx, p, port)
}

// waitFor polls ready until it holds, the process exits, or ctx ends.
func waitFor(ctx context.Context, p *Process, ready func() bool) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready() {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("%s exited during start-up; last lines of %s:\n%s", p.Name, p.LogPath, p.Tail(20))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w; last lines of %s:\n%s", p.Name, ctx.Err(), p.LogPath, p.Tail(20))
		case <-tick.C:
		}
	}
}

// waitHealthz waits for a component's /healthz on its self-signed port.
func waitHealthz(ctx context.Context, p *Process, port int) error {
	client := &http.Client{
		Timeout: time.Second,
		// The component serves a self-signed certificate it generated; this
		// probe only asks whether it is up, on loopback.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // a loopback liveness probe of a self-signed endpoint
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	return waitFor(ctx, p, func() bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// stateLocked is the state without its processes; stateMu is held.
func (c *Cluster) stateLocked() state {
	s := state{Name: c.Name, KubeconfigPath: c.KubeconfigPath, APIServerURL: c.APIServerURL,
		NetNS: append([]string(nil), c.netns...), Cgroups: append([]string(nil), c.cgroups...)}
	if len(c.realNodes) > 0 {
		s.EgressSocket = c.egressSocket()
	}
	return s
}

func (c *Cluster) writeState() error {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	c.mu.Lock()
	s := c.stateLocked()
	for _, p := range c.processes {
		s.Processes = append(s.Processes, stateProcess{Name: p.Name, PID: p.PID, LogPath: p.LogPath})
	}
	c.mu.Unlock()
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(c.Dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing cluster state: %w", err)
	}
	return os.Rename(tmp, filepath.Join(c.Dir, stateFile))
}

// Stop stops every component, newest first, then reaps anything that still
// mentions the cluster directory. The directory is kept (it holds the
// logs); RemoveAll it when done. Stop is safe to call more than once.
func (c *Cluster) Stop() error {
	var err error
	c.stopOnce.Do(func() {
		c.stopProcesses()
		if n, rerr := Reap(c.Dir); rerr != nil {
			err = rerr
		} else if n > 0 {
			err = fmt.Errorf("reaped %d stray processes of cluster %q", n, c.Name)
		}
		c.stateMu.Lock()
		s := c.stateLocked()
		c.stateMu.Unlock()
		err = errors.Join(err, removeRealNodes(&s))
	})
	return err
}

// StopProcess stops the named process (a component or one started with
// Launch) and forgets it, so that it can be launched again.
func (c *Cluster) StopProcess(name string) error {
	p := c.process(name)
	if p == nil {
		return fmt.Errorf("no process named %s in cluster %q", name, c.Name)
	}
	p.Stop(10 * time.Second)
	c.mu.Lock()
	for i, q := range c.processes {
		if q == p {
			c.processes = append(c.processes[:i], c.processes[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	return c.writeState()
}

func (c *Cluster) stopProcesses() {
	procs := c.Processes()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(3 * time.Second)
	}
}

// StopDir stops the cluster whose directory is dir, from any process: the
// way `liqoctl playground down` stops what `up` started.
func StopDir(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("reading cluster state: %w", err)
	}
	if err == nil {
		var s state
		if err := json.Unmarshal(data, &s); err != nil {
			return fmt.Errorf("parsing %s: %w", filepath.Join(dir, stateFile), err)
		}
		for i := len(s.Processes) - 1; i >= 0; i-- {
			p := s.Processes[i]
			if processInDir(p.PID, dir) {
				killGroup(p.PID, 3*time.Second, nil)
			}
		}
		_, err = Reap(dir)
		return errors.Join(err, removeRealNodes(&s))
	}
	_, err = Reap(dir)
	return err
}

// processInDir guards against a recycled PID: the process must still be
// one whose command line mentions dir.
func processInDir(pid int, dir string) bool {
	pids, err := ProcessesReferencing(dir)
	if err != nil {
		return false
	}
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}
