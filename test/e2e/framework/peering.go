// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/ctl/add"
	"github.com/liqo-go/liqo/internal/ctl/generateaddcommand"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/playground"
)

// AddWithToken runs, on consumer, the command provider's
// generate-add-command prints, as an operator would.
func AddWithToken(t testing.TB, consumer, provider *playground.Member) {
	t.Helper()
	var out bytes.Buffer
	if err := (&generateaddcommand.Options{Kubeconfig: provider.Kubeconfig, Namespace: install.DefaultNamespace}).Run(t.Context(), &out); err != nil {
		t.Fatal(err)
	}
	f := regexp.MustCompile(`--auth-url (\S+) --id (\S+) --token (\S+)`).FindStringSubmatch(out.String())
	if f == nil {
		t.Fatalf("unexpected generate-add-command output %q", out.String())
	}
	o := &add.Options{Kubeconfig: consumer.Kubeconfig, Namespace: install.DefaultNamespace, AuthURL: f[1], ClusterID: f[2], Token: f[3], Timeout: 5 * time.Second}
	if err := o.Run(t.Context(), io.Discard); err != nil {
		t.Fatalf("liqoctl add on %s: %v", consumer.Name, err)
	}
}

// StopAPIServer stops m's API server and returns the function that starts
// it again as it was and waits until it serves; cleanup calls it too, so
// that the server is back (once) even when the test fails.
func StopAPIServer(t testing.TB, m *playground.Member) (restart func()) {
	t.Helper()
	bin, args := m.Process(localcluster.KubeAPIServer).Command()
	if err := m.StopProcess(localcluster.KubeAPIServer); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	restart = func() {
		once.Do(func() {
			if _, err := m.Launch(localcluster.KubeAPIServer, bin, args); err != nil {
				t.Error(err)
				return
			}
			// Until Liqo's own kinds are served again: a client's API
			// discovery fails while the CRDs are still being registered.
			Eventually(t, 60*time.Second, func() error {
				return Client(t, m).List(context.Background(), &discoveryv1alpha1.ForeignClusterList{})
			})
			// And until kube-controller-manager, whose watches back off
			// while the API server is away, signs certificates again: a
			// peering needs it, and the next test (in any order) may peer.
			_, csr, err := identity.NewKeyAndCSR("liqo-e2e-signer-probe")
			if err != nil {
				t.Error(err)
				return
			}
			Eventually(t, 90*time.Second, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_, err := identity.Issue(ctx, Client(t, m), nil, csr, "liqo-e2e-signer-probe", time.Hour)
				return err
			})
		})
	}
	t.Cleanup(restart)
	return restart
}

// VirtualNode returns the virtual node for providerID in c's cluster, or an
// error saying why there is not exactly one.
func VirtualNode(c client.Client, providerID string) (*corev1.Node, error) {
	var nodes corev1.NodeList
	if err := c.List(context.Background(), &nodes, client.MatchingLabels{offloadingv1alpha1.RemoteClusterLabel: providerID}); err != nil {
		return nil, err
	}
	if len(nodes.Items) != 1 {
		return nil, fmt.Errorf("%d virtual nodes for %s, want 1", len(nodes.Items), providerID)
	}
	return &nodes.Items[0], nil
}

// SetJoin sets join on m's ForeignCluster for clusterID.
func SetJoin(t testing.TB, m *playground.Member, clusterID string, join bool) {
	t.Helper()
	ctx := context.Background()
	c := Client(t, m)
	fc, err := foreigncluster.Find(ctx, c, clusterID)
	if err != nil || fc == nil {
		t.Fatalf("%s has no ForeignCluster for %s (%v)", m.Name, clusterID, err)
	}
	patch := client.MergeFrom(fc.DeepCopy())
	fc.Spec.Join = join
	if err := c.Patch(ctx, fc, patch); err != nil {
		t.Fatal(err)
	}
}

// SetClusterConfig changes a member's ClusterConfig spec (again on a
// conflict) and waits until its controller manager reports the new
// generation applied.
func SetClusterConfig(t testing.TB, m *playground.Member, change func(*configv1alpha1.ClusterConfigSpec)) {
	t.Helper()
	c := Client(t, m)
	ctx := context.Background()
	key := client.ObjectKey{Name: configv1alpha1.ClusterConfigName}
	var generation int64
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cc configv1alpha1.ClusterConfig
		if err := c.Get(ctx, key, &cc); err != nil {
			return err
		}
		change(&cc.Spec)
		if err := c.Update(ctx, &cc); err != nil {
			return err
		}
		generation = cc.Generation
		return nil
	}); err != nil {
		t.Fatalf("changing the ClusterConfig of %s: %v", m.Name, err)
	}
	// After an API server restart the controller's watch reconnects with
	// backoff: this can take more than a few seconds.
	Eventually(t, 30*time.Second, func() error {
		var cc configv1alpha1.ClusterConfig
		if err := c.Get(ctx, key, &cc); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(cc.Status.Conditions, configv1alpha1.ConditionReady)
		if ready == nil || ready.ObservedGeneration < generation {
			return fmt.Errorf("%s has not applied ClusterConfig generation %d yet", m.Name, generation)
		}
		return nil
	})
}

// StopControllerManager stops m's controller manager until the test ends,
// as a peer turned hostile stops what would repair its own writes (its
// reflectors, its publishing); cleanup starts it again.
func StopControllerManager(t testing.TB, m *playground.Member) {
	t.Helper()
	if err := m.StopControllerManager(); err != nil {
		t.Fatal(err)
	}
	Cleanup(t, func(ctx context.Context) {
		if err := m.StartControllerManager(ctx); err != nil {
			t.Errorf("restarting %s's controller manager: %v", m.Name, err)
		}
	})
}

// KubectlStream starts the harness's kubectl against m, for a command
// that runs until stopped (attach, port-forward), and returns the lines
// it prints, as they come; it is stopped, and waited for, when the test
// ends. What it printed on its standard error is logged if the test
// fails.
func KubectlStream(t testing.TB, m *playground.Member, args ...string) <-chan string {
	t.Helper()
	return KubectlStreamAt(t, m.Kubeconfig, args...)
}

// KubectlStreamAt is KubectlStream with the kubeconfig at path.
func KubectlStreamAt(t testing.TB, kubeconfig string, args ...string) <-chan string {
	t.Helper()
	bin, err := localcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads that far
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("kubectl %s: %s", strings.Join(args, " "), errOut.String())
		}
	})
	return lines
}

// Kubectl runs the harness's kubectl against m with stdin, as an operator
// would, and returns what it printed; its error carries its stderr. It
// runs from cleanups too, so it is bounded by a minute of its own, not by
// the test's context.
func Kubectl(t testing.TB, m *playground.Member, stdin string, args ...string) (string, error) {
	t.Helper()
	return KubectlAt(t, m.Kubeconfig, stdin, args...)
}

// KubectlAt is Kubectl with the kubeconfig at path.
func KubectlAt(t testing.TB, kubeconfig, stdin string, args ...string) (string, error) {
	t.Helper()
	bin, err := localcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig, "--request-timeout=30s"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// UserKubeconfig writes a kubeconfig of m for user, with a client
// certificate signed by m's CA, and returns its path.
func UserKubeconfig(t testing.TB, m *playground.Member, user string) string {
	t.Helper()
	certPEM, keyPEM, err := m.IssueClientCertificate(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(m.CACertPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[m.Name] = &clientcmdapi.Cluster{Server: m.APIServerURL, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: m.Name, AuthInfo: user}
	cfg.CurrentContext = user
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
