// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package install tests `liqoctl install`, `version` and `uninstall`
// against a real cluster: the chart goes in as a Helm release, an
// upgrade makes a new revision, and uninstall refuses while a peering
// exists and otherwise leaves no object behind.
//
// The cluster's nodes are kwok's, which run no container: the controller
// manager's pods are marked Ready without running, and the test runs the
// controller manager as a process on the host, with the ServiceAccount
// the chart created.
package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/liqo-go/liqo/api"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/ctl/install"
	"github.com/liqo-go/liqo/internal/ctl/uninstall"
	"github.com/liqo-go/liqo/internal/ctl/version"
	liqoinstall "github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/install/chart"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

func TestInstallUpgradeUninstall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := t.Context()
	dir := t.TempDir()
	bin, err := framework.BuildControllerManager(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := localcluster.Start(ctx, localcluster.Options{Name: "install", Dir: filepath.Join(dir, "cluster"), Nodes: 1, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})
	c, err := client.New(cluster.RESTConfig, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := cluster.KubeconfigPath

	// Install, with the controller manager started on the host once the
	// chart made its ServiceAccount.
	var out strings.Builder
	installed := make(chan error, 1)
	o := &install.Options{
		Kubeconfig: kubeconfig, Namespace: liqoinstall.DefaultNamespace, Distribution: "generic", ClusterName: "edge",
		PodCIDR: "10.100.0.0/16", AuthServiceType: "NodePort", Timeout: 2 * time.Minute,
	}
	go func() { installed <- o.Run(ctx, &out) }()
	startControllerManager(t, cluster, c, bin)
	if err := <-installed; err != nil {
		t.Fatalf("install: %v\n%s", err, out.String())
	}
	t.Logf("liqoctl install:\n%s", out.String())
	for _, want := range []string{
		"Service CIDR 10.96.0.0/16 (ServiceCIDR kubernetes)", // what the harness's API server allocates from
		"Pod CIDR 10.100.0.0/16 (--pod-cidr)",
		"only peers on this machine reach it", // the harness's API server is on loopback
		"Release liqo revision 1 deployed",
		"Liqo is running: cluster edge, ClusterID ",
		"liqoctl add --auth-url https://",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output of install does not say %q", want)
		}
	}
	releases, err := chart.NewReleases(kubeconfig, "", liqoinstall.DefaultNamespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := releases.Current(chart.DefaultReleaseName)
	if err != nil || rel == nil {
		t.Fatalf("the Helm release: %v, %v", rel, err)
	}
	if rel.Config["networking"].(map[string]any)["podCIDR"] != "10.100.0.0/16" {
		t.Errorf("the release's values %v do not hold the pod CIDR", rel.Config)
	}

	// An upgrade: a new revision with the new values, the cluster
	// keeps its identity.
	out.Reset()
	o.Set = []string{"controllerManager.verbosity=1"}
	if err := o.Run(ctx, &out); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "Upgrading release liqo (revision 1") || !strings.Contains(out.String(), "Release liqo revision 2 deployed") {
		t.Errorf("the output of the upgrade:\n%s", out.String())
	}
	out.Reset()
	if err := (&version.Options{Kubeconfig: kubeconfig, Namespace: liqoinstall.DefaultNamespace}).Run(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Server: chart liqo-0.1.0") || !strings.Contains(out.String(), "revision 2 deployed") {
		t.Errorf("liqoctl version:\n%s", out.String())
	}

	// Uninstall refuses while a cluster peers with this one.
	stopControllerManager(t, cluster)
	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "peer"},
		Spec: discoveryv1alpha1.ForeignClusterSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: "0123456789abcdef0123456789abcdef", ClusterName: "peer"},
			ForeignAuthURL:  "https://127.0.0.1:1",
		},
	}
	if err := c.Create(ctx, fc); err != nil {
		t.Fatal(err)
	}
	setIncomingPeering(ctx, t, c, fc, true)
	un := &uninstall.Options{Kubeconfig: kubeconfig, Namespace: liqoinstall.DefaultNamespace, Timeout: 2 * time.Minute}
	err = un.Run(ctx, &out)
	if err == nil || !strings.Contains(err.Error(), "peers with peer") || !strings.Contains(err.Error(), "--purge") {
		t.Fatalf("uninstall with a peering: %v, want a refusal naming the peer and --purge", err)
	}
	if rel, err := releases.Current(chart.DefaultReleaseName); err != nil || rel == nil {
		t.Fatalf("a refused uninstall removed the release: %v", err)
	}
	setIncomingPeering(ctx, t, c, fc, false)

	// Uninstall leaves nothing: no release, CRD, namespace, object
	// the controller manager made, or cluster-scoped object of the chart.
	out.Reset()
	if err := un.Run(ctx, &out); err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out.String())
	}
	t.Logf("liqoctl uninstall:\n%s", out.String())
	if rel, err := releases.Current(chart.DefaultReleaseName); err != nil || rel != nil {
		t.Errorf("after uninstall, the release: %v, %v", rel, err)
	}
	for _, left := range leftovers(t, cluster.RESTConfig) {
		t.Errorf("left behind: %s", left)
	}
}

// startControllerManager waits until the chart made the controller
// manager's ServiceAccount and Deployment, and runs the controller manager
// on the host as that ServiceAccount with the Deployment's arguments, only
// its addresses changed to free loopback ports (and the webhook reached by
// URL: this cluster's API server cannot reach a Service).
func startControllerManager(t *testing.T, cluster *localcluster.Cluster, c client.Client, bin string) {
	t.Helper()
	var d appsv1.Deployment
	framework.Eventually(t, time.Minute, func() error {
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: liqoinstall.DefaultNamespace, Name: liqoinstall.ControllerManagerName}, &corev1.ServiceAccount{}); err != nil {
			return err
		}
		return c.Get(t.Context(), client.ObjectKey{Namespace: liqoinstall.DefaultNamespace, Name: liqoinstall.ControllerManagerName}, &d)
	})
	kc, err := liqoinstall.ControllerManagerKubeconfig(t.Context(), cluster.RESTConfig, liqoinstall.Options{}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kcPath := filepath.Join(cluster.Dir, "liqo-controller-manager.kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	var ports [4]int
	for i := range ports {
		if ports[i], err = localcluster.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	// pflag keeps the last value of a flag given twice.
	args := append(append([]string{}, d.Spec.Template.Spec.Containers[0].Args...),
		"--kubeconfig="+kcPath,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[0]),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", ports[1]),
		fmt.Sprintf("--auth-bind-address=127.0.0.1:%d", ports[2]),
		fmt.Sprintf("--auth-url=https://127.0.0.1:%d", ports[2]),
		fmt.Sprintf("--webhook-bind-address=127.0.0.1:%d", ports[3]),
		"--webhook-service=",
		"--kubelet-bind-address=0",
	)
	if _, err := cluster.Launch(playground.ControllerManager, bin, args); err != nil {
		t.Fatal(err)
	}
}

func stopControllerManager(t *testing.T, cluster *localcluster.Cluster) {
	t.Helper()
	if err := cluster.StopProcess(playground.ControllerManager); err != nil {
		t.Fatal(err)
	}
}

// leftovers lists what Liqo left in the cluster: its CRDs, its namespace,
// and any object labelled as made by Liqo (managed-by=liqo) or by the
// chart (part-of=liqo).
func leftovers(t *testing.T, cfg *rest.Config) []string {
	t.Helper()
	ctx := t.Context()
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	framework.Eventually(t, time.Minute, func() error {
		left = nil
		lists, err := dc.ServerPreferredResources()
		if err != nil {
			return err
		}
		for _, l := range lists {
			gv, err := schema.ParseGroupVersion(l.GroupVersion)
			if err != nil {
				return err
			}
			if strings.HasSuffix(gv.Group, ".liqo.io") {
				left = append(left, "API group "+gv.Group)
				continue
			}
			for _, r := range l.APIResources {
				if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || r.Name == "events" {
					continue
				}
				for _, selector := range []string{
					discoveryv1alpha1.ManagedByLabel + "=" + discoveryv1alpha1.ManagedByValue,
					"app.kubernetes.io/part-of=liqo",
				} {
					items, err := mc.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{LabelSelector: selector})
					if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
						continue
					}
					if err != nil {
						return err
					}
					for _, item := range items.Items {
						left = append(left, fmt.Sprintf("%s %s/%s", r.Name, item.Namespace, item.Name))
					}
				}
			}
		}
		ns, err := mc.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).Get(ctx, liqoinstall.DefaultNamespace, metav1.GetOptions{})
		if err == nil {
			left = append(left, "namespace "+ns.Name)
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("left behind: %v", left)
		}
		return nil
	})
	return left
}

func init() {
	// liqoctl's verbs run in this process; controller-runtime wants a
	// logger set before its clients log.
	ctrllog.SetLogger(logr.Discard())
}

// setIncomingPeering sets a ForeignCluster's status.incomingPeering; the
// peering controller writes that status too, so a conflict reads again.
func setIncomingPeering(ctx context.Context, t *testing.T, c client.Client, fc *discoveryv1alpha1.ForeignCluster, incoming bool) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			return err
		}
		fc.Status.IncomingPeering = incoming
		return c.Status().Update(ctx, fc)
	}); err != nil {
		t.Fatalf("setting incomingPeering=%t on %s: %v", incoming, fc.Name, err)
	}
}
