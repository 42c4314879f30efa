// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package localcluster

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// What real nodes need next to the control plane's binaries (`make
// node-tools`), and the sandbox image they run.
const (
	Kubelet        = "kubelet"
	KubeProxy      = "kube-proxy"
	HarnessNet     = "harness-net"
	PauseImageFile = "pause-image.tar"
	PauseImage     = "registry.k8s.io/pause:3.10"
	// ProbeImage is the tests' workload (hack/tools/cmd/probe): serve
	// HTTP, fetch a URL, ask the API server as a pod.
	ProbeImageFile = "probe-image.tar"
	ProbeImage     = "liqo.test/probe:v1"
	// RealNodeType is the NodeTypeLabel value of real nodes.
	RealNodeType = "real"
	cniBinDir    = "/usr/lib/cni"
)

// RealNodeBinaries lists what real nodes need in BinDir.
var RealNodeBinaries = []string{Kubelet, KubeProxy, HarnessNet, PauseImageFile, ProbeImageFile}

// RealNodesSupported says why this machine cannot run real nodes (not
// root, a missing package or binary, cgroup v2 alone), or nil.
func RealNodesSupported(binDir string) error { return realNodePrerequisites(binDir) }

func realNodePrerequisites(binDir string) error {
	if os.Geteuid() != 0 {
		return errors.New("real nodes need root: they make network namespaces, mounts and cgroups")
	}
	var missing []string
	for _, tool := range []string{"containerd", "runc", "ctr", "nft", "ip", "nsenter", "unshare", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, plugin)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, plugin))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("real nodes need %s (Debian: apt-get install containerd runc containernetworking-plugins nftables iproute2 util-linux; or make system-deps)",
			strings.Join(missing, ", "))
	}
	if fi, err := os.Stat("/sys/fs/cgroup/memory"); err != nil || !fi.IsDir() {
		return errors.New("real nodes need the cgroup v1 hierarchies under /sys/fs/cgroup (this machine has cgroup v2 only)")
	}
	if binDir != "" {
		for _, b := range RealNodeBinaries {
			if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
				return fmt.Errorf("%s not found in %s (run `make node-tools`)", b, binDir)
			}
		}
	}
	return nil
}

// realNode is one kubelet with its containerd, kube-proxy, network
// namespace, mount namespace and cgroups.
type realNode struct {
	name    string
	dir     string
	netns   string
	ip      netip.Addr
	podCIDR string
	// cgroup is the node's cgroup in every v1 hierarchy: the node's
	// processes in system/, its pods under pods/.
	cgroup string
}

// RealNodeName is the name of the i-th real node.
func (c *Cluster) RealNodeName(i int) string { return fmt.Sprintf("%s-node-%d", c.Name, i) }

// RealNodes is how many real nodes the cluster has.
func (c *Cluster) RealNodes() int { return len(c.realNodes) }

// RealNodeNetns is the network namespace of real node i, under /run/netns:
// what runs with the node's network (the gateway) is in it.
func (c *Cluster) RealNodeNetns(i int) string { return c.realNodes[i].netns }

// PodCIDR is the cluster's pod range (Options.PodCIDR).
func (c *Cluster) PodCIDR() string { return c.opts.PodCIDR }

// podCIDR is the pod range of the node with index (0: the control plane,
// then the kwok workers, then the real nodes): the index-th /20 of the
// cluster's range.
func (c *Cluster) podCIDR(index int) string {
	base := netip.MustParsePrefix(c.opts.PodCIDR).Addr().As4() // checked by Options.complete
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], binary.BigEndian.Uint32(base[:])+uint32(index)<<12) //nolint:gosec // index counts the cluster's nodes
	return netip.PrefixFrom(netip.AddrFrom4(a), 20).String()
}

// prepareRealNodes attaches the cluster to its network and makes each real
// node's network namespace, link and cgroups, before the control plane
// starts (the API server's egress goes through them).
func (c *Cluster) prepareRealNodes() error {
	if err := realNodePrerequisites(c.opts.BinDir); err != nil {
		return err
	}
	c.network = c.opts.Network
	if c.network == nil {
		n, err := NewNetwork()
		if err != nil {
			return err
		}
		c.network, c.ownNetwork = n, true
		c.recordNetns(n.Name)
	}
	k, err := c.network.attach()
	if err != nil {
		return err
	}
	c.networkIndex = k
	vip := apiServerVIP(k)
	if err := run("ip", "-n", c.network.Name, "addr", "add", vip.String()+"/16", "dev", "br0"); err != nil {
		return err
	}
	id := strings.TrimPrefix(filepath.Base(c.network.Name), NetnsPrefix+"net-")
	for i := range c.opts.RealNodes {
		n := &realNode{
			name:    c.RealNodeName(i),
			dir:     filepath.Join(c.Dir, "nodes", c.RealNodeName(i)),
			netns:   fmt.Sprintf("%sn%s-%d-%d", NetnsPrefix, id, k, i),
			ip:      realNodeIP(k, i),
			podCIDR: c.podCIDR(c.opts.Nodes + 1 + i),
			cgroup:  fmt.Sprintf("%sn%s-%d-%d", NetnsPrefix, id, k, i),
		}
		c.realNodes = append(c.realNodes, n)
		c.recordNetns(n.netns)
		c.recordCgroup(n.cgroup)
		peer := fmt.Sprintf("n%d-%d", k, i)
		if err := runAll(
			[]string{"ip", "netns", "add", n.netns},
			[]string{"ip", "-n", n.netns, "link", "set", "lo", "up"},
			[]string{"ip", "-n", c.network.Name, "link", "add", peer, "type", "veth", "peer", "name", "eth0", "netns", n.netns},
			[]string{"ip", "-n", c.network.Name, "link", "set", peer, "master", "br0", "up"},
			[]string{"ip", "-n", n.netns, "addr", "add", n.ip.String() + "/16", "dev", "eth0"},
			[]string{"ip", "-n", n.netns, "link", "set", "eth0", "up"},
			// A connection the node opens to a Service (the API
			// server's egress lands here) needs a route before
			// kube-proxy's DNAT sends it elsewhere.
			[]string{"ip", "-n", n.netns, "route", "add", ServiceCIDR, "dev", "eth0"},
		); err != nil {
			return err
		}
		if err := makeCgroup(n.cgroup); err != nil {
			return err
		}
	}
	// Each node reaches its siblings' pods through them.
	for _, n := range c.realNodes {
		for _, s := range c.realNodes {
			if s != n {
				if err := run("ip", "-n", n.netns, "route", "add", s.podCIDR, "via", s.ip.String()); err != nil {
					return err
				}
			}
		}
	}
	return c.writeState()
}

// apiServerRealNodeArgs are the API server's flags when the cluster has
// real nodes: kubelets authorized as nodes, and traffic to nodes, pods and
// services sent through harness-net into the nodes' namespaces.
func (c *Cluster) apiServerRealNodeArgs() ([]string, error) {
	if len(c.realNodes) == 0 {
		return nil, nil
	}
	config := fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %q
`, c.egressSocket())
	path := filepath.Join(c.Dir, "egress-selector.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return nil, err
	}
	return []string{
		"--egress-selector-config-file=" + path,
		"--enable-admission-plugins=NodeRestriction",
		// A node's name resolves nowhere: call the kubelet at its address.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
	}, nil
}

// authorizationModes are RBAC's, and the Node authorizer's for kubelets
// when the cluster has real nodes.
func (c *Cluster) authorizationModes() string {
	if len(c.realNodes) > 0 {
		return "Node,RBAC"
	}
	return "RBAC"
}

// HostAddress is, for a cluster with real nodes, the address its API
// server's egress reaches the host's loopback services at, port for port
// (harness-net's --host-address): one the API server proxies to (it
// proxies to no loopback address), for a virtual kubelet's API on the
// host. Invalid without real nodes.
func (c *Cluster) HostAddress() netip.Addr {
	if len(c.realNodes) == 0 {
		return netip.Addr{}
	}
	return apiServerVIP(c.networkIndex)
}

// egressSocket is harness-net's socket; a Unix socket path is short, so a
// deep cluster directory gets one in the temporary directory instead.
func (c *Cluster) egressSocket() string {
	if p := filepath.Join(c.Dir, "egress.sock"); len(p) < 100 {
		return p
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("%segress-%s.sock", NetnsPrefix, filepath.Base(c.realNodes[0].netns)))
}

// startHarnessNet starts the relay between the host's loopback and the
// nodes: the API server at its underlay address, and the API server's
// egress into the nodes.
func (c *Cluster) startHarnessNet(ctx context.Context) error {
	if len(c.realNodes) == 0 {
		return nil
	}
	apiPort := strings.TrimPrefix(c.APIServerURL, "https://127.0.0.1:")
	p, err := c.launch(HarnessNet, []string{
		"--cluster-dir=" + c.Dir,
		"--underlay=" + c.network.Path(),
		"--underlay-cidr=" + UnderlayCIDR,
		"--node=/run/netns/" + c.realNodes[0].netns,
		"--forward=" + net.JoinHostPort(apiServerVIP(c.networkIndex).String(), "6443") + "=127.0.0.1:" + apiPort,
		"--egress=" + c.egressSocket(),
		"--host-address=" + apiServerVIP(c.networkIndex).String(),
	})
	if err != nil {
		return err
	}
	if err := waitFor(ctx, p, func() bool {
		_, err := os.Stat(c.egressSocket())
		return err == nil
	}); err != nil {
		return err
	}
	// Pods reach the API server through the kubernetes Service: its
	// endpoint is the relay on the underlay.
	cs, err := c.Client()
	if err != nil {
		return err
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "kubernetes", Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes", discoveryv1.LabelManagedBy: "localcluster.liqo.io"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{apiServerVIP(c.networkIndex).String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](6443), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the kubernetes EndpointSlice: %w", err)
	}
	return nil
}

// startRealNodes starts every real node and waits until each is Ready.
func (c *Cluster) startRealNodes(ctx context.Context) error {
	if len(c.realNodes) == 0 {
		return nil
	}
	cs, err := c.Client()
	if err != nil {
		return err
	}
	for _, n := range c.realNodes {
		script, err := c.writeRealNode(n)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		// A private mount namespace, in the node's network namespace:
		// not `ip netns exec`, which remounts /sys and hides the cgroups.
		if _, err := c.launchProcess(n.name, "/usr/bin/unshare", []string{
			"--mount", "--propagation", "private", "--",
			"nsenter", "--net=/run/netns/" + n.netns, "--", "/bin/sh", script,
		}, false); err != nil {
			return err
		}
	}
	for _, n := range c.realNodes {
		p := c.process(n.name)
		err := waitFor(ctx, p, func() bool {
			node, err := cs.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
			return err == nil && NodeReady(node)
		})
		if err != nil {
			return fmt.Errorf("node %s did not become Ready (log %s): %w", n.name, p.LogPath, err)
		}
		// No controller hands out node ranges here: record the one
		// the node's CNI uses.
		patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, n.podCIDR, n.podCIDR)
		if _, err := cs.CoreV1().Nodes().Patch(ctx, n.name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("recording the pod range of node %s: %w", n.name, err)
		}
	}
	return nil
}

// kernelDefaults are the values the kubelet checks (protectKernelDefaults)
// and would otherwise set machine-wide; the node's mount namespace sees
// these files over the real entries, and nothing on the host changes.
var kernelDefaults = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// kubeletClusterDNS is the kubelets' clusterDNS: the cluster DNS's
// address when the cluster has one; none otherwise (with resolvConf ""
// too, a pod then has no name server at all).
func (c *Cluster) kubeletClusterDNS() string {
	if c.opts.ClusterDNSImage == "" {
		return "[]"
	}
	return "[" + ClusterDNSAddress + "]"
}

// writeRealNode writes the node's configuration and start script, and
// returns the script's path.
func (c *Cluster) writeRealNode(n *realNode) (string, error) {
	for _, d := range []string{"sysctl", "cni", "containerd", "kubelet-pki", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o700); err != nil {
			return "", err
		}
	}
	pki := filepath.Join(c.Dir, "pki")
	ca, err := loadCA(pki)
	if err != nil {
		return "", err
	}
	write := func(name string, data []byte) (string, error) {
		p := filepath.Join(n.dir, name)
		return p, os.WriteFile(p, data, 0o600)
	}
	kubeconfig := func(name, user string, groups []string) (string, error) {
		kp, err := ca.issue(user, groups, nil, nil, x509.ExtKeyUsageClientAuth)
		if err != nil {
			return "", err
		}
		key, err := kp.keyPEM()
		if err != nil {
			return "", err
		}
		// The API server as the node sees it: the relay on the underlay.
		server := "https://" + net.JoinHostPort(apiServerVIP(c.networkIndex).String(), "6443")
		return write(name, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: local
  context: {cluster: local, user: %s}
current-context: local
`, server, filepath.Join(pki, "ca.crt"), user, b64(kp.certPEM()), b64(key), user)))
	}
	kubeletKC, err := kubeconfig("kubelet.kubeconfig", "system:node:"+n.name, []string{"system:nodes"})
	if err != nil {
		return "", err
	}
	proxyKC, err := kubeconfig("kube-proxy.kubeconfig", "system:kube-proxy", nil)
	if err != nil {
		return "", err
	}
	serving, err := ca.issue(n.name, nil, []net.IP{net.IP(n.ip.AsSlice())}, []string{n.name}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return "", err
	}
	servingCert, servingKey, err := serving.write(n.dir, "kubelet-serving")
	if err != nil {
		return "", err
	}
	for entry, value := range kernelDefaults {
		if _, err := write(filepath.Join("sysctl", strings.ReplaceAll(entry, "/", ".")), []byte(value+"\n")); err != nil {
			return "", err
		}
	}
	if _, err := write(filepath.Join("cni", "10-harness.conflist"), []byte(fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "harness",
  "plugins": [{
    "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
`, n.podCIDR))); err != nil {
		return "", err
	}
	containerdConfig, err := write("containerd.toml", []byte(fmt.Sprintf(`version = 2
root = %q
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "/run/containerd/containerd.sock"
[ttrpc]
  address = "/run/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # root here lacks CAP_SYS_RESOURCE: a negative OOM score is refused.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, filepath.Join(n.dir, "containerd", "root"), filepath.Join(n.dir, "containerd", "opt"), PauseImage, cniBinDir, filepath.Join(n.dir, "cni"))))
	if err != nil {
		return "", err
	}
	kubeletConfig, err := write("kubelet.yaml", []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /%s/pods
failCgroupV1: false
failSwapOn: false
protectKernelDefaults: true
resolvConf: ""
clusterDomain: cluster.local
clusterDNS: %s
podLogsDir: %s
staticPodPath: ""
serializeImagePulls: false
# Imported images cannot be pulled again: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {"memory.available": "1Mi", "nodefs.available": "1%%", "imagefs.available": "1%%", "nodefs.inodesFree": "1%%"}
rotateCertificates: false
registerNode: true
maxPods: 110
kubeAPIQPS: 50
kubeAPIBurst: 100
`, n.ip, servingCert, servingKey, filepath.Join(pki, "ca.crt"), n.cgroup, c.kubeletClusterDNS(), filepath.Join(n.dir, "pod-logs"))))
	if err != nil {
		return "", err
	}
	proxyConfig, err := write("kube-proxy.yaml", []byte(fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: %s}
hostnameOverride: %s
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: %s
# Service traffic leaves with the node's address, so that replies come
# back through the node whatever the path.
nftables: {masqueradeAll: true}
# The conntrack table is the machine's: leave its size and timeouts alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, proxyKC, n.name, c.opts.PodCIDR)))
	if err != nil {
		return "", err
	}
	nftRules, err := write("node.nft", []byte(fmt.Sprintf(`table ip liqo-harness-node {
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    oifname "eth0" ip saddr %s masquerade
  }
}
`, n.podCIDR)))
	if err != nil {
		return "", err
	}
	images := append([]string{filepath.Join(c.opts.BinDir, PauseImageFile), filepath.Join(c.opts.BinDir, ProbeImageFile)}, c.opts.NodeImages...)
	var mounts strings.Builder
	for entry := range kernelDefaults {
		fmt.Fprintf(&mounts, "mount --bind %q /proc/sys/%s\n", filepath.Join(n.dir, "sysctl", strings.ReplaceAll(entry, "/", ".")), entry)
	}
	var imports strings.Builder
	for _, img := range images {
		fmt.Fprintf(&imports, "ctr -a /run/containerd/containerd.sock -n k8s.io images import %q\n", img)
	}
	logs := c.LogDir()
	return write("node.sh", []byte(fmt.Sprintf(`# Real node %[1]s: run in a private mount namespace, inside the node's
# network namespace (see localcluster/realnode.go).
set -eu
# Everything this node runs, containerd's shims included, is in its cgroup.
for h in /sys/fs/cgroup/*/; do
  if [ -d "${h}%[2]s/system" ]; then echo $$ > "${h}%[2]s/system/cgroup.procs"; fi
done
# A private /run, /var/lib and /var/log: sockets, CNI state and log links
# stay in this namespace and go with it.
mount -t tmpfs -o mode=0755 liqo-node /run
mount -t tmpfs -o mode=0755 liqo-node /var/lib
mount -t tmpfs -o mode=0755 liqo-node /var/log
%[3]s
# Per network namespace: pods' traffic is routed by this node.
echo 1 > /proc/sys/net/ipv4/ip_forward
nft -f %[4]q
containerd --config %[5]q >> %[6]q 2>&1 &
i=0
until [ -S /run/containerd/containerd.sock ]; do
  i=$((i + 1))
  if [ "$i" -gt 600 ]; then echo "containerd did not start: see %[6]s" >&2; exit 1; fi
  sleep 0.05
done
%[7]s
%[8]q --config %[9]q >> %[10]q 2>&1 &
# The kubelet's root is in this namespace's /var/lib: its sockets' paths
# stay short, and its volumes go with the namespace.
exec %[11]q --config %[12]q --kubeconfig %[13]q --root-dir %[14]q --cert-dir %[15]q \
  --hostname-override %[1]s --node-ip %[16]s --v 1
`, n.name, n.cgroup, mounts.String(), nftRules, containerdConfig, filepath.Join(logs, n.name+"-containerd.log"),
		imports.String(), c.bin(KubeProxy), proxyConfig, filepath.Join(logs, n.name+"-kube-proxy.log"),
		c.bin(Kubelet), kubeletConfig, kubeletKC, "/var/lib/kubelet", filepath.Join(n.dir, "kubelet-pki"), n.ip)))
}

// cgroupHierarchies are the mounted cgroup hierarchies: the v1 ones, and
// with unified also the v2 one beside them, where runc adds its own
// cgroups in a hybrid setup.
func cgroupHierarchies(unified bool) ([]string, error) {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, err
	}
	var hs []string
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if (e.Name() == "unified" && !unified) || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err == nil {
			hs = append(hs, p)
		}
	}
	return hs, nil
}

// makeCgroup makes name, name/system and name/pods in every v1 hierarchy;
// a new cpuset starts empty, so it gets its parent's CPUs and memory nodes.
func makeCgroup(name string) error {
	hs, err := cgroupHierarchies(false)
	if err != nil {
		return err
	}
	for _, h := range hs {
		for _, rel := range []string{name, filepath.Join(name, "system"), filepath.Join(name, "pods")} {
			dir := filepath.Join(h, rel)
			if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
				return fmt.Errorf("making cgroup %s: %w", dir, err)
			}
			if filepath.Base(h) == "cpuset" {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
					if err != nil {
						return err
					}
					if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
						return fmt.Errorf("writing %s of %s: %w", f, dir, err)
					}
				}
			}
		}
	}
	return nil
}

// removeCgroup kills every process left in name's cgroups (containers,
// containerd's shims), then removes the cgroups, deepest first.
func removeCgroup(name string) error {
	if !strings.HasPrefix(name, NetnsPrefix) {
		return fmt.Errorf("refusing to remove cgroup %q: not the harness's", name)
	}
	hs, err := cgroupHierarchies(true)
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		root := filepath.Join(h, name)
		if _, err := os.Stat(root); os.IsNotExist(err) {
			continue
		}
		// Bounded: a process cannot escape a cgroup it is killed in, so
		// a few rounds empty it; a cgroup whose last task just exited
		// can still be busy for a moment (cgroup v1 on a loaded machine:
		// EBUSY), so removing is tried again too, for up to 10 s.
		var left []error
		for range 500 {
			if killCgroupTasks(root) > 0 {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if left = removeCgroupDirs(root); len(left) == 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := os.Stat(root); err == nil && len(left) == 0 {
			left = removeCgroupDirs(root) // tasks never went: say what stays
		}
		errs = append(errs, left...)
	}
	return errors.Join(errs...)
}

// removeCgroupDirs removes root and the cgroups under it, deepest first,
// and returns what it could not remove.
func removeCgroupDirs(root string) []error {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil && !os.IsNotExist(err) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dirs[i], err))
		}
	}
	return errs
}

// killCgroupTasks sends SIGKILL to every task under root and returns how
// many there were.
func killCgroupTasks(root string) int {
	n := 0
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil //nolint:nilerr // a cgroup that went away meanwhile
		}
		data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil //nolint:nilerr // likewise
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				n++
			}
		}
		return nil
	})
	return n
}

// removeRealNodes undoes prepareRealNodes and what the nodes made, after
// their processes are stopped: cgroups (killing what is left in them),
// network namespaces, the egress socket. Used by Stop and StopDir.
func removeRealNodes(s *state) error {
	var errs []error
	for _, cg := range s.Cgroups {
		errs = append(errs, removeCgroup(cg))
	}
	for i := len(s.NetNS) - 1; i >= 0; i-- {
		errs = append(errs, deleteNetns(s.NetNS[i]))
	}
	if s.EgressSocket != "" {
		if err := os.Remove(s.EgressSocket); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) recordNetns(name string) {
	c.stateMu.Lock()
	c.netns = append(c.netns, name)
	c.stateMu.Unlock()
}

func (c *Cluster) recordCgroup(name string) {
	c.stateMu.Lock()
	c.cgroups = append(c.cgroups, name)
	c.stateMu.Unlock()
}

func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }

// UnderlayAPIServerURL is the API server's URL as real nodes, their pods
// and the real nodes of clusters on the same Network reach it; empty
// without real nodes.
func (c *Cluster) UnderlayAPIServerURL() string {
	if len(c.realNodes) == 0 {
		return ""
	}
	return "https://" + net.JoinHostPort(apiServerVIP(c.networkIndex).String(), "6443")
}
