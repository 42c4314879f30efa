// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package install

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/ctl/generateaddcommand"
	"github.com/liqo-go/liqo/internal/ctl/install"
	"github.com/liqo-go/liqo/internal/ctl/uninstall"
	liqoinstall "github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/testenv"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestInstallOnRealNodes is the path an operator takes, on two clusters
// with a real node each: liqoctl install runs the controller manager as a
// pod from the image make images builds, with only the chart's
// ServiceAccount and rights; the clusters peer through
// generate-add-command and add; a pod offloaded from one runs in a real
// container on the other's node, and the kubectl verbs reach it
// (kubectlVerbs), kubectl top among them, with metrics-server installed in
// both clusters (topThroughMetricsServer); a claim of class liqo is kept
// by the provider, and what a pod wrote to it outlives the pod
// (volumeKeptByProvider); and liqoctl uninstall leaves nothing.
func TestInstallOnRealNodes(t *testing.T) {
	skipWithoutRealNodes(t)
	dir := t.TempDir()
	archives, ref, err := framework.BuildImages(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	metricsServer, metricsServerRef, err := metricsServerImage()
	if err != nil {
		t.Fatal(err)
	}
	e := startRealEnv(t, dir, append(archives, metricsServer)...)
	for i, c := range e.clusters {
		out, err := e.install(c, e.names[i], ref, "")
		if err != nil {
			t.Fatalf("install on %s: %v\n%s", e.names[i], err, out)
		}
		t.Logf("liqoctl install on %s:\n%s", e.names[i], out)
		e.checkControllerManager(c, ref)
		checkRights(t, clientset(t, c))
	}
	e.peer()
	pod := e.offload()
	e.logsThroughVirtualNode(pod)
	e.kubectlVerbs(pod)
	e.topThroughMetricsServer(pod, metricsServerRef)
	e.volumeKeptByProvider(pod.Namespace)
	e.uninstallAll()
}

// TestUpgradeKeepsPeeringsAndPods installs the chart and image of the
// previous commit (LIQO_UPGRADE_FROM, default HEAD~1) with that commit's
// liqoctl, peers and offloads, then upgrades both clusters with this
// liqoctl: the peering stays, and the offloaded pod keeps running, the
// same pod, while the controller managers roll to the new image.
func TestUpgradeKeepsPeeringsAndPods(t *testing.T) {
	skipWithoutRealNodes(t)
	ctx := t.Context()
	dir := t.TempDir()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	from := os.Getenv("LIQO_UPGRADE_FROM")
	if from == "" {
		from = "HEAD~1"
	}
	base := filepath.Join(dir, "base")
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "worktree", "add", "--detach", base, from).CombinedOutput(); err != nil {
		t.Fatalf("checking out %s: %v\n%s", from, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("git", "-C", root, "worktree", "remove", "--force", base).Run() }) //nolint:noctx // cleanup after the test's context ended
	if _, err := os.Stat(filepath.Join(base, "deployments", "liqo", "Chart.yaml")); err != nil {
		t.Skipf("%s has no chart to upgrade from", from)
	}
	baseLiqoctl := filepath.Join(dir, "liqoctl-base")
	build := exec.CommandContext(ctx, "go", "build", "-o", baseLiqoctl, "./cmd/liqoctl")
	build.Dir = base
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building liqoctl of %s: %v\n%s", from, err, out)
	}
	baseArchives, baseRef, err := framework.BuildImagesFrom(ctx, base, dir, "base")
	if err != nil {
		t.Fatal(err)
	}
	archives, ref, err := framework.BuildImages(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}

	e := startRealEnv(t, dir, append(baseArchives, archives...)...)
	for i, c := range e.clusters {
		if out, err := e.install(c, e.names[i], baseRef, baseLiqoctl); err != nil {
			t.Fatalf("install of %s on %s: %v\n%s", from, e.names[i], err, out)
		}
	}
	providerID := e.peer()
	pod := e.offload()
	remote, err := e.remoteProbe()
	if err != nil {
		t.Fatal(err)
	}

	for i, c := range e.clusters {
		out, err := e.install(c, e.names[i], ref, "")
		if err != nil {
			t.Fatalf("upgrade on %s: %v\n%s", e.names[i], err, out)
		}
		if !strings.Contains(out, "Upgrading release liqo (revision 1") || !strings.Contains(out, "Release liqo revision 2 deployed") {
			t.Errorf("upgrade on %s:\n%s", e.names[i], out)
		}
		e.checkControllerManager(c, ref)
	}
	cc := ctrlClient(t, e.consumer)
	framework.Eventually(t, 2*time.Minute, func() error {
		var fc discoveryv1alpha1.ForeignCluster
		if err := cc.Get(ctx, client.ObjectKey{Name: providerID}, &fc); err != nil {
			return err
		}
		for _, cond := range []string{discoveryv1alpha1.ConditionPeeringRequested, discoveryv1alpha1.ConditionVirtualNodeReady} {
			if !meta.IsStatusConditionTrue(fc.Status.Conditions, cond) {
				return fmt.Errorf("after the upgrade, ForeignCluster %s %s is not True: %+v", fc.Name, cond, fc.Status.Conditions)
			}
		}
		if err := cc.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("after the upgrade, the offloaded pod is %s", pod.Status.Phase)
		}
		return nil
	})
	framework.Consistently(t, 5*time.Second, func() error {
		now, err := e.remoteProbe()
		if err != nil {
			return err
		}
		if now.UID != remote.UID || now.Status.ContainerStatuses[0].RestartCount != 0 {
			return fmt.Errorf("the provider's pod changed: %s (restarts %d), was %s", now.UID, now.Status.ContainerStatuses[0].RestartCount, remote.UID)
		}
		return nil
	})
	e.logsThroughVirtualNode(pod)
	e.uninstallAll()
}

func skipWithoutRealNodes(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts clusters with real nodes")
	}
	bin, err := localcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.RealNodesSupported(bin); err != nil {
		testenv.Unsupported(t, "no real nodes: "+err.Error())
	}
}

// realEnv is two clusters, a consumer and a provider, with a real node
// each on one underlay.
type realEnv struct {
	t                  *testing.T
	network            *localcluster.Network
	clusters           []*localcluster.Cluster
	names              []string
	consumer, provider *localcluster.Cluster
}

func startRealEnv(t *testing.T, dir string, images ...string) *realEnv {
	t.Helper()
	return startClusters(t, dir, []string{"consumer", "provider"}, nil, images...)
}

// startClusters starts a cluster of each name (the first the consumer,
// the second a provider) with realNodes[i] real nodes (one when not
// given), on one underlay.
func startClusters(t *testing.T, dir string, names []string, realNodes []int, images ...string) *realEnv {
	t.Helper()
	network, err := localcluster.NewNetwork()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := network.Close(); err != nil {
			t.Error(err)
		}
	})
	e := &realEnv{t: t, network: network, names: names, clusters: make([]*localcluster.Cluster, len(names))}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range e.names {
		wg.Go(func() {
			e.clusters[i], errs[i] = localcluster.Start(t.Context(), localcluster.Options{
				Name: name, Dir: filepath.Join(dir, name), RealNodes: max(1, at(realNodes, i)), Network: network,
				NodeImages: images, Log: testr.New(t),
			})
		})
	}
	wg.Wait()
	for i, c := range e.clusters {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		t.Cleanup(func() {
			if err := c.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	e.consumer, e.provider = e.clusters[0], e.clusters[1]
	// On failure, what Liqo's pods said (their logs go with the clusters).
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i, c := range e.clusters {
			cs, err := c.Client()
			if err != nil {
				continue
			}
			pods, err := cs.CoreV1().Pods(liqoinstall.DefaultNamespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, p := range pods.Items {
				logs, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr.To[int64](300)}).DoRaw(ctx)
				if err == nil {
					t.Logf("%s: logs of %s:\n%s", e.names[i], p.Name, logs)
				}
			}
		}
	})
	return e
}

// install runs liqoctl install on c with the image ref: this liqoctl, or
// the binary liqoctl names.
func (e *realEnv) install(c *localcluster.Cluster, name, ref, liqoctl string) (string, error) {
	repo, tag, _ := strings.Cut(ref, ":")
	if liqoctl != "" {
		out, err := exec.CommandContext(e.t.Context(), liqoctl, "install", "generic", "--kubeconfig", c.KubeconfigPath, "--cluster-name", name,
			"--api-server-url", c.UnderlayAPIServerURL(), "--pod-cidr", localcluster.PodCIDR, "--auth-service-type", "NodePort",
			"--image-repository", repo, "--image-tag", tag, "--image-pull-policy", "Never", "--timeout", "3m").CombinedOutput()
		return string(out), err
	}
	var out bytes.Buffer
	o := &install.Options{
		Kubeconfig: c.KubeconfigPath, Namespace: liqoinstall.DefaultNamespace, Distribution: "generic", ClusterName: name,
		APIServerURL: c.UnderlayAPIServerURL(), PodCIDR: localcluster.PodCIDR, ServiceCIDR: localcluster.ServiceCIDR, AuthServiceType: "NodePort",
		ImageRepository: repo, ImageTag: tag, PullPolicy: "Never", Timeout: 3 * time.Minute,
	}
	err := o.Run(e.t.Context(), &out)
	return out.String(), err
}

// checkControllerManager: the chart's two controller-manager pods run the
// image on c's real node, as the chart's ServiceAccount.
func (e *realEnv) checkControllerManager(c *localcluster.Cluster, image string) {
	t := e.t
	t.Helper()
	framework.Eventually(t, 2*time.Minute, func() error {
		pods, err := clientset(t, c).CoreV1().Pods(liqoinstall.DefaultNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controller-manager"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 2 {
			return fmt.Errorf("%s: %d controller-manager pods, want the chart's 2", c.Name, len(pods.Items))
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != c.RealNodeName(0) || p.Status.Phase != corev1.PodRunning || p.Spec.ServiceAccountName != liqoinstall.ControllerManagerName ||
				p.Spec.Containers[0].Image != image || p.DeletionTimestamp != nil {
				return fmt.Errorf("%s: pod %s on %q, %s, ServiceAccount %s, image %s", c.Name, p.Name, p.Spec.NodeName, p.Status.Phase, p.Spec.ServiceAccountName, p.Spec.Containers[0].Image)
			}
		}
		return nil
	})
}

// peer runs, on the consumer, the add command the provider generates, and
// waits for the virtual node; it returns the provider's ClusterID.
func (e *realEnv) peer() string {
	e.t.Helper()
	return e.peerWith(e.provider)
}

// peerWith peers the consumer with provider, as peer does.
func (e *realEnv) peerWith(provider *localcluster.Cluster) string {
	t := e.t
	t.Helper()
	var line bytes.Buffer
	if err := (&generateaddcommand.Options{Kubeconfig: provider.KubeconfigPath, Namespace: liqoinstall.DefaultNamespace}).Run(t.Context(), &line); err != nil {
		t.Fatal(err)
	}
	f := regexp.MustCompile(`--auth-url (\S+) --id (\S+) --token (\S+)`).FindStringSubmatch(line.String())
	if f == nil {
		t.Fatalf("generate-add-command printed %q", line.String())
	}
	if !strings.HasPrefix(f[1], "https://10.254.") {
		t.Errorf("the provider's auth URL %s is not its node's address on the underlay", f[1])
	}
	// liqoctl add asks the provider's auth service first: it runs where
	// an operator would, on the clusters' network (the underlay), never
	// from the host's namespace, which has no route there.
	if out, err := liqoctlOnUnderlay(t, e.network, e.consumer, "add", "--auth-url", f[1], "--id", f[2], "--token", f[3], "--timeout", "10s", "--wait", "2m"); err != nil {
		t.Fatalf("liqoctl add: %v\n%s", err, out)
	}
	cc := ctrlClient(t, e.consumer)
	framework.Eventually(t, 2*time.Minute, func() error {
		var fc discoveryv1alpha1.ForeignCluster
		if err := cc.Get(t.Context(), client.ObjectKey{Name: f[2]}, &fc); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(fc.Status.Conditions, discoveryv1alpha1.ConditionVirtualNodeReady) {
			return fmt.Errorf("ForeignCluster %s: %+v", fc.Name, fc.Status.Conditions)
		}
		return nil
	})
	return f[2]
}

// offload offloads namespace work of the consumer and runs a probe pod
// there: it runs in a real container on the provider's node.
func (e *realEnv) offload() *corev1.Pod {
	t := e.t
	t.Helper()
	ctx := t.Context()
	cc := ctrlClient(t, e.consumer)
	ns := "work"
	if err := cc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := cc.Create(ctx, &offloadingv1alpha1.NamespaceOffloading{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName},
		Spec:       offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote},
	}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		var no offloadingv1alpha1.NamespaceOffloading
		if err := cc.Get(ctx, client.ObjectKey{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(no.Status.Conditions, offloadingv1alpha1.ConditionReady) {
			return fmt.Errorf("NamespaceOffloading not Ready: %+v", no.Status)
		}
		return nil
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "probe", Image: localcluster.ProbeImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/probe"}, Args: []string{"serve", ":8080", "hello from the provider"},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	if err := cc.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		if err := cc.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("offloaded pod %s on %q: %s", pod.Name, pod.Spec.NodeName, pod.Status.Phase)
		}
		_, err := e.remoteProbe()
		return err
	})
	return pod
}

// remoteProbe is the provider's Running probe pod on its real node.
func (e *realEnv) remoteProbe() (*corev1.Pod, error) {
	remote, err := clientset(e.t, e.provider).CoreV1().Pods("").List(e.t.Context(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + e.provider.RealNodeName(0)})
	if err != nil {
		return nil, err
	}
	for _, p := range remote.Items {
		if p.Spec.Containers[0].Image == localcluster.ProbeImage && p.Status.Phase == corev1.PodRunning {
			ip, err := netip.ParseAddr(p.Status.PodIP)
			if err != nil || !netip.MustParsePrefix("10.100.0.0/14").Contains(ip) {
				return nil, fmt.Errorf("the provider's pod %s has IP %q", p.Name, p.Status.PodIP)
			}
			return &p, nil
		}
	}
	return nil, fmt.Errorf("no Running probe pod on the provider's real node")
}

// logsThroughVirtualNode reads the offloaded pod's logs in the consumer:
// the API server asks the virtual kubelet, which asks the provider.
func (e *realEnv) logsThroughVirtualNode(pod *corev1.Pod) {
	t := e.t
	t.Helper()
	framework.Eventually(t, time.Minute, func() error {
		logs, err := clientset(t, e.consumer).CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(t.Context())
		if err != nil {
			return err
		}
		if !strings.Contains(string(logs), "serving on :8080") {
			return fmt.Errorf("logs %q", logs)
		}
		return nil
	})
}

// uninstallAll deletes the offloaded namespace, then uninstalls: the
// consumer with --purge (it unpeers first), then the provider; nothing of
// Liqo, and no pod, is left in either.
func (e *realEnv) uninstallAll() {
	t := e.t
	t.Helper()
	ctx := t.Context()
	if err := ctrlClient(t, e.consumer).Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}}); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	for i, c := range e.clusters {
		var out bytes.Buffer
		un := &uninstall.Options{Kubeconfig: c.KubeconfigPath, Namespace: liqoinstall.DefaultNamespace, Purge: i == 0, Timeout: 3 * time.Minute}
		if err := un.Run(ctx, &out); err != nil {
			t.Fatalf("uninstall on %s: %v\n%s", e.names[i], err, out.String())
		}
		t.Logf("liqoctl uninstall on %s:\n%s", e.names[i], out.String())
		for _, left := range leftovers(t, c.RESTConfig) {
			t.Errorf("%s: left behind: %s", e.names[i], left)
		}
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		for _, c := range e.clusters {
			pods, err := clientset(t, c).CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, p := range pods.Items {
				return fmt.Errorf("%s: pod %s/%s still there", c.Name, p.Namespace, p.Name)
			}
		}
		return nil
	})
}

// checkRights: the controller manager can do what it needs and no more
// than the chart granted; a SubjectAccessReview asks the API server as it
// would decide for the pod's ServiceAccount.
func checkRights(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	sa := "system:serviceaccount:" + liqoinstall.DefaultNamespace + ":" + liqoinstall.ControllerManagerName
	for _, tc := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "discovery.liqo.io", Resource: "foreignclusters"}, true},
		{authorizationv1.ResourceAttributes{Verb: "delete", Group: "apps", Resource: "deployments", Namespace: "kube-system"}, false},
		// The volumes of the claims of class liqo (package claims), but
		// no class of storage.
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "persistentvolumes"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "storage.k8s.io", Resource: "storageclasses"}, false},
	} {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: sa, Groups: []string{"system:serviceaccounts"}, ResourceAttributes: &tc.attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.want {
			t.Errorf("the controller manager may %s %s/%s: %v, want %v", tc.attrs.Verb, tc.attrs.Group, tc.attrs.Resource, sar.Status.Allowed, tc.want)
		}
	}
}

// liqoctlOnUnderlay runs bin/liqoctl inside the underlay namespace, with
// the cluster's admin credentials and its API server at its underlay
// address.
func liqoctlOnUnderlay(t *testing.T, network *localcluster.Network, c *localcluster.Cluster, args ...string) (string, error) {
	t.Helper()
	bin, err := localcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.LoadFromFile(c.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range kc.Clusters {
		cl.Server = c.UnderlayAPIServerURL()
	}
	path := filepath.Join(c.Dir, "underlay.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "nsenter", append([]string{"--net=" + network.Path(), "--", filepath.Join(bin, "liqoctl")},
		append(args, "--kubeconfig", path)...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func clientset(t *testing.T, c *localcluster.Cluster) kubernetes.Interface {
	t.Helper()
	cs, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func ctrlClient(t *testing.T, c *localcluster.Cluster) client.Client {
	t.Helper()
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// at is s[i], or zero past its end.
func at(s []int, i int) int {
	if i < len(s) {
		return s[i]
	}
	return 0
}
