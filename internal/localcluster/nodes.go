// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package localcluster

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KwokStagesFile is the file, next to the binaries, holding kwok's default
// node and pod stages (written by `make tools`).
const KwokStagesFile = "kwok-stages.yaml"

func (c *Cluster) startKwok(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	// kwok serves the kubelet API (logs, exec) for its nodes; the API server
	// reaches it at the node's address and port, over TLS.
	ca, err := loadCA(filepath.Join(c.Dir, "pki"))
	if err != nil {
		return err
	}
	serving, err := ca.issue("kwok", nil, []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return err
	}
	certPath, keyPath, err := serving.write(filepath.Join(c.Dir, "pki"), "kwok")
	if err != nil {
		return err
	}
	debugging, err := c.writeKwokDebugging()
	if err != nil {
		return err
	}
	p, err := c.launch(Kwok, []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--config=" + filepath.Join(c.opts.BinDir, KwokStagesFile),
		"--config=" + debugging,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		"--node-ip=127.0.0.1",
		"--node-port=" + strconv.Itoa(port),
		"--server-address=127.0.0.1:" + strconv.Itoa(port),
		"--tls-cert-file=" + certPath,
		"--tls-private-key-file=" + keyPath,
		"--cidr=10.0.0.1/16",
		"--node-lease-duration-seconds=40",
	})
	if err != nil {
		return err
	}
	return waitHealthz(ctx, p, port)
}

// KwokExecClusterEnv is set, in the commands `kubectl exec` runs in a
// kwok pod, to the name of the cluster the pod runs in.
const KwokExecClusterEnv = "KWOK_CLUSTER_NAME"

// KwokLogLine is the log line every container kwok simulates in cluster
// name shows to `kubectl logs`.
func KwokLogLine(name string) string {
	return "simulated container running in cluster " + name
}

// KwokAttachFile is the file, in CRI log format, whose lines written after
// `kubectl attach` starts every container kwok simulates in the cluster
// shows to it (empty at first).
func (c *Cluster) KwokAttachFile() string { return filepath.Join(c.Dir, "kwok", "attach.log") }

// writeKwokDebugging writes the kwok configuration that makes its kubelet
// API answer `kubectl logs` (every container shows KwokLogLine, from a
// file in CRI log format), `kubectl attach` (what is written to
// KwokAttachFile after it starts), `kubectl exec` (the command
// runs on this machine, in the cluster directory, with KwokExecClusterEnv
// set) and `kubectl port-forward` (every port echoes what it is sent,
// through cat, on this machine): what a pod of this cluster answers names
// the cluster, so a test can tell which cluster answered. It returns the
// file's path.
func (c *Cluster) writeKwokDebugging() (string, error) {
	dir := filepath.Join(c.Dir, "kwok")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	logs := filepath.Join(dir, "container.log")
	line := time.Now().UTC().Format(time.RFC3339Nano) + " stdout F " + KwokLogLine(c.Name) + "\n"
	if err := os.WriteFile(logs, []byte(line), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(c.KwokAttachFile(), nil, 0o600); err != nil {
		return "", err
	}
	config := fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: liqo-harness
spec:
  logs:
  - logsFile: %q
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterExec
metadata:
  name: liqo-harness
spec:
  execs:
  - local:
      workDir: %q
      envs:
      - name: %s
        value: %q
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterAttach
metadata:
  name: liqo-harness
spec:
  attaches:
  - logsFile: %q
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterPortForward
metadata:
  name: liqo-harness
spec:
  forwards:
  - command: ["cat"]
`, logs, dir, KwokExecClusterEnv, c.Name, c.KwokAttachFile())
	path := filepath.Join(dir, "debugging.yaml")
	return path, os.WriteFile(path, []byte(config), 0o600)
}

// IssueClientCertificate signs, with the cluster's CA, a client
// certificate for user in groups, as the API server authenticates them
// (PEM certificate and key).
func (c *Cluster) IssueClientCertificate(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	ca, err := loadCA(filepath.Join(c.Dir, "pki"))
	if err != nil {
		return nil, nil, err
	}
	kp, err := ca.issue(user, groups, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = kp.keyPEM()
	return kp.certPEM(), keyPEM, err
}

// WorkerNodeName is the name of the i-th kwok worker node.
func (c *Cluster) WorkerNodeName(i int) string { return fmt.Sprintf("%s-worker-%d", c.Name, i) }

// ControlPlaneNodeName is the name of the control-plane node, when present.
func (c *Cluster) ControlPlaneNodeName() string { return c.Name + "-control-plane" }

// AddNodes registers n more kwok worker nodes, numbered after the existing
// ones, and waits for them to be Ready.
func (c *Cluster) AddNodes(ctx context.Context, first, n int) error {
	client, err := c.Client()
	if err != nil {
		return err
	}
	var names []string
	for i := first; i < first+n; i++ {
		node := c.kwokNode(c.WorkerNodeName(i), i+1)
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", node.Name, err)
		}
		names = append(names, node.Name)
	}
	return c.waitNodesReady(ctx, names)
}

func (c *Cluster) registerNodes(ctx context.Context) error {
	if c.opts.ControlPlaneNode {
		client, err := c.Client()
		if err != nil {
			return err
		}
		node := c.kwokNode(c.ControlPlaneNodeName(), 0)
		node.Labels[ControlPlaneLabel] = ""
		node.Spec.Taints = []corev1.Taint{{Key: ControlPlaneLabel, Effect: corev1.TaintEffectNoSchedule}}
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", node.Name, err)
		}
		if err := c.waitNodesReady(ctx, []string{node.Name}); err != nil {
			return err
		}
	}
	return c.AddNodes(ctx, 0, c.opts.Nodes)
}

// kwokNode builds a node that kwok simulates. index picks the node's pod
// range, so that simulated pod IPs are unique within the cluster.
func (c *Cluster) kwokNode(name string, index int) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KwokNodeAnnotation: "fake"},
			Labels: map[string]string{
				NodeTypeLabel:                  "kwok",
				corev1.LabelHostname:           name,
				corev1.LabelOSStable:           "linux",
				corev1.LabelArchStable:         "amd64",
				"localcluster.liqo.io/cluster": c.Name,
			},
		},
		Spec: corev1.NodeSpec{PodCIDR: c.podCIDR(index)},
		Status: corev1.NodeStatus{
			Capacity:    c.opts.NodeCapacity.DeepCopy(),
			Allocatable: c.opts.NodeCapacity.DeepCopy(),
			NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: "kwok", OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
}

func (c *Cluster) waitNodesReady(ctx context.Context, names []string) error {
	client, err := c.Client()
	if err != nil {
		return err
	}
	kwok := c.process(Kwok)
	return waitFor(ctx, kwok, func() bool {
		for _, name := range names {
			node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !NodeReady(node) {
				return false
			}
		}
		return true
	})
}

// NodeReady reports whether a node's Ready condition is True.
func NodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (c *Cluster) process(name string) *Process {
	for _, p := range c.Processes() {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Process returns the running component called name, or nil.
func (c *Cluster) Process(name string) *Process { return c.process(name) }
