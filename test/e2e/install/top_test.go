// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package install

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// metricsServerImageFile is the image of metrics-server make builds from
// its Go module (make bin/metrics-server-image.tar, a test-e2e
// prerequisite), for the real nodes' containerd.
const metricsServerImageFile = "metrics-server-image.tar"

// metricsServerImage is the archive of metrics-server's image and its
// name: registry.k8s.io/metrics-server/metrics-server at the version the
// tools module pins.
func metricsServerImage() (archive, ref string, err error) {
	bin, err := localcluster.FindBinDir()
	if err != nil {
		return "", "", err
	}
	archive = filepath.Join(bin, metricsServerImageFile)
	if _, err := os.Stat(archive); err != nil {
		return "", "", fmt.Errorf("%s not found in %s (run make %s)", metricsServerImageFile, bin, archive)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return "", "", err
	}
	mod, err := os.ReadFile(filepath.Join(root, "hack", "tools", "go.mod"))
	if err != nil {
		return "", "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(mod))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "sigs.k8s.io/metrics-server" {
			return archive, "registry.k8s.io/metrics-server/metrics-server:" + f[1], nil
		}
	}
	return "", "", errors.New("hack/tools/go.mod requires no sigs.k8s.io/metrics-server")
}

// topThroughMetricsServer installs metrics-server in both clusters as an
// operator does (testdata/metrics-server.yaml: a Deployment on the real
// node with its ServiceAccount's rights, the metrics API through its
// Service): kubectl top pod in the consumer shows the offloaded pod with
// the memory the provider's metrics-server measured of its container on
// the provider's real kubelet, read through the virtual kubelet (which
// metrics-server calls with its token); a user who may read the pods but
// not their metrics is refused. metrics-server is removed after.
func (e *realEnv) topThroughMetricsServer(pod *corev1.Pod, image string) {
	t := e.t
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join(root, "test", "e2e", "install", "testdata", "metrics-server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "metrics-server.yaml")
	if err := os.WriteFile(manifest, bytes.ReplaceAll(tmpl, []byte("image: IMAGE"), []byte("image: "+image)), 0o600); err != nil {
		t.Fatal(err)
	}
	vnode, err := framework.VirtualNode(ctrlClient(t, e.consumer), clusterID(t, ctrlClient(t, e.provider)))
	if err != nil {
		t.Fatal(err)
	}
	remove := func() {
		for i, c := range e.clusters {
			if out, err := framework.KubectlAt(t, c.KubeconfigPath, "", "delete", "--ignore-not-found", "--wait", "-f", manifest); err != nil {
				t.Errorf("removing metrics-server from %s: %v\n%s", e.names[i], err, out)
			}
		}
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		out, err := framework.KubectlAt(t, e.provider.KubeconfigPath, "", "get", "--raw", "/apis/metrics.k8s.io/v1beta1/pods")
		t.Logf("provider: the metrics API's pods: %v\n%s", err, out)
		for _, path := range []string{"/api/v1/nodes/" + vnode.Name + "/proxy/metrics/resource", "/apis/metrics.k8s.io/v1beta1/nodes"} {
			out, err := framework.KubectlAt(t, e.consumer.KubeconfigPath, "", "get", "--raw", path)
			t.Logf("consumer: %s: %v\n%s", path, err, out)
		}
		for i, c := range e.clusters {
			for _, args := range [][]string{
				{"get", "pods,endpointslices", "--namespace", "kube-system", "-o", "wide"},
				{"get", "apiservice", "v1beta1.metrics.k8s.io", "-o", "yaml"},
				{"logs", "deployment/metrics-server", "--namespace", "kube-system", "--tail", "300"},
			} {
				out, err := framework.KubectlAt(t, c.KubeconfigPath, "", args...)
				if args[0] == "logs" {
					// Its messages, not the usage it prints after an error.
					var msgs []string
					for l := range strings.Lines(out) {
						if !strings.HasPrefix(l, " ") && strings.TrimSpace(l) != "" && !strings.HasSuffix(strings.TrimSpace(l), "flags:") {
							msgs = append(msgs, l)
						}
					}
					out = strings.Join(msgs, "")
				}
				t.Logf("%s: kubectl %s: %v\n%s", e.names[i], strings.Join(args, " "), err, out)
			}
		}
		remove()
	})
	for i, c := range e.clusters {
		if out, err := framework.KubectlAt(t, c.KubeconfigPath, "", "apply", "-f", manifest); err != nil {
			t.Fatalf("installing metrics-server on %s: %v\n%s", e.names[i], err, out)
		}
	}
	remote, err := e.remoteProbe()
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	framework.Eventually(t, 3*time.Minute, func() error {
		out, err := framework.KubectlAt(t, e.provider.KubeconfigPath, "", "top", "pod", remote.Name, "--namespace", remote.Namespace, "--no-headers")
		if err != nil {
			return fmt.Errorf("in the provider: %w", err)
		}
		want = strings.Fields(out)
		out, err = framework.KubectlAt(t, e.consumer.KubeconfigPath, "", "top", "pod", pod.Name, "--namespace", pod.Namespace, "--no-headers")
		if err != nil {
			return fmt.Errorf("in the consumer: %w", err)
		}
		got = strings.Fields(out)
		if len(got) != 3 || len(want) != 3 || got[0] != pod.Name {
			return fmt.Errorf("kubectl top pod printed %q in the consumer and %q in the provider", got, want)
		}
		// The same sample: the consumer's metrics-server scraped the
		// virtual kubelet after the provider's scraped its kubelet.
		if got[2] != want[2] {
			return fmt.Errorf("the consumer shows %s of memory, the provider %s", got[2], want[2])
		}
		return nil
	})
	mem, err := resource.ParseQuantity(got[2])
	if err != nil || mem.Value() == 0 {
		t.Fatalf("kubectl top pod shows %q of memory (%v), want the working set of a real container", got[2], err)
	}
	t.Logf("kubectl top pod in the consumer: %s; in the provider, of %s/%s: %s", strings.Join(got, " "), remote.Namespace, remote.Name, strings.Join(want, " "))

	viewer := e.viewerKubeconfig(pod.Namespace)
	if out, err := framework.KubectlAt(t, viewer, "", "top", "pod", pod.Name, "--namespace", pod.Namespace); err == nil || !strings.Contains(strings.ToLower(err.Error()+out), "forbidden") {
		t.Errorf("the viewer's kubectl top pod: %v\n%s; want Forbidden", err, out)
	}
	remove()
}
