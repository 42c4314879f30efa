// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package install implements `liqoctl install`: Liqo's Helm chart
// installed (or upgraded) with the Helm SDK, with values fitting the
// cluster's distribution, and a wait until the controller manager runs
// and the cluster has its ClusterID.
package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"helm.sh/helm/v4/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker"
	"github.com/liqo-go/liqo/internal/ctl/generateaddcommand"
	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
	"github.com/liqo-go/liqo/internal/ctl/version"
	liqoinstall "github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/install/chart"
)

// Options of `liqoctl install`.
type Options struct {
	// Kubeconfig is the cluster's kubeconfig; empty means the usual rules.
	Kubeconfig string
	// Namespace is where Liqo and its Helm release live.
	Namespace string
	// Distribution is one of Distributions' keys.
	Distribution string
	// ClusterName is the name the cluster announces to its peers.
	ClusterName string
	// APIServerURL is where peers reach the API server; detected when
	// empty.
	APIServerURL string
	// AuthURL is where peers reach the auth service; derived from the
	// auth Service when empty.
	AuthURL string
	// AuthServiceType exposes the auth service (ClusterIP, NodePort,
	// LoadBalancer); the distribution's default when empty.
	AuthServiceType string
	// PodCIDR and ServiceCIDR are the cluster's ranges; detected when
	// empty.
	PodCIDR, ServiceCIDR string
	// ImageRepository, ImageTag and PullPolicy choose the controller
	// manager's image; the chart's defaults when empty.
	ImageRepository, ImageTag, PullPolicy string
	// ValuesFiles and Set are Helm values given as with helm install -f
	// and --set; they win over what liqoctl chose.
	ValuesFiles, Set []string
	// Timeout bounds the installation and the wait.
	Timeout time.Duration
	// DryRun prints the manifests instead of installing them.
	DryRun bool
	// Broker, when set, runs liqo-broker with these modes
	// (comma-separated: catalog, orchestrator).
	Broker string
}

// NewCommand returns `liqoctl install`.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &Options{Namespace: liqoinstall.DefaultNamespace, Timeout: 5 * time.Minute}
	cmd := &cobra.Command{
		Use:   "install [k3s|kind|kubeadm|generic] --cluster-name NAME",
		Short: "Install or upgrade Liqo in a cluster",
		Long: `Install Liqo's Helm chart (or upgrade an existing release) with values that
fit the cluster's distribution: its pod and service CIDRs (detected, or the
distribution's defaults, or --pod-cidr and --service-cidr), the URL peers
reach its API server at, and how its auth service is exposed (NodePort for
k3s, kind and kubeadm, LoadBalancer otherwise). Waits until the controller
manager is Ready and the cluster has its ClusterID, then prints the command
another cluster runs to peer with this one.

The release is an ordinary Helm release: helm list, helm get values and
helm upgrade see it; -f and --set pass chart values as they do in helm.`,
		Example: `  liqoctl install k3s --cluster-name provider
  liqoctl install kind --cluster-name consumer
  liqoctl install generic --cluster-name eu-1 --api-server-url https://api.eu-1.example.com:6443 \
      --pod-cidr 10.0.0.0/16 --service-cidr 10.1.0.0/16`,
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: slices.Sorted(maps.Keys(Distributions)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Distribution = "generic"
			if len(args) == 1 {
				o.Distribution = args[0]
			}
			return o.Run(ctx, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the cluster")
	f.StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "Namespace of Liqo and of its Helm release")
	f.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "Name this cluster announces to its peers (required)")
	f.StringVar(&o.APIServerURL, "api-server-url", o.APIServerURL, "URL peers reach this cluster's API server at (default: detected)")
	f.StringVar(&o.AuthURL, "auth-url", o.AuthURL, "URL peers reach the auth service at (default: derived from the auth Service)")
	f.StringVar(&o.AuthServiceType, "auth-service-type", o.AuthServiceType, "How peers reach the auth service: ClusterIP, NodePort or LoadBalancer (default: by distribution)")
	f.StringVar(&o.PodCIDR, "pod-cidr", o.PodCIDR, "The cluster's pod CIDR (default: detected)")
	f.StringVar(&o.ServiceCIDR, "service-cidr", o.ServiceCIDR, "The cluster's service CIDR (default: detected)")
	f.StringVar(&o.ImageRepository, "image-repository", o.ImageRepository, "Repository of the liqo-controller-manager image (the gateway's, liqo-gateway, is taken beside it)")
	f.StringVar(&o.ImageTag, "image-tag", o.ImageTag, "Tag of the liqo-controller-manager image (default: liqoctl's version, else the chart's appVersion)")
	f.StringVar(&o.PullPolicy, "image-pull-policy", o.PullPolicy, "Pull policy of the image: Always, IfNotPresent or Never (for images imported into the nodes)")
	f.StringArrayVarP(&o.ValuesFiles, "values", "f", nil, "Chart values from a YAML file (can repeat)")
	f.StringArrayVar(&o.Set, "set", nil, "A chart value, key=value as in helm --set (can repeat)")
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "How long to wait for the installation")
	f.BoolVar(&o.DryRun, "dry-run", false, "Print the manifests instead of installing them")
	f.StringVar(&o.Broker, "broker", o.Broker, "Make this cluster a broker offering these services, comma-separated: catalog, orchestrator, aggregator (docs/broker.md)")
	return cmd
}

// Run installs, or upgrades, and waits.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	profile, ok := Distributions[o.Distribution]
	if !ok {
		return fmt.Errorf("unknown distribution %q: want one of %s", o.Distribution, strings.Join(slices.Sorted(maps.Keys(Distributions)), ", "))
	}
	if o.ClusterName == "" {
		return errors.New("--cluster-name is required: the name this cluster announces to its peers")
	}
	c, cfg, err := kubeclient.New(o.Kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	kubeVersion, err := serverVersion(cfg)
	if err != nil {
		return err
	}
	values, err := o.Values(ctx, c, cfg.Host, profile, out)
	if err != nil {
		return err
	}
	if o.DryRun {
		return o.print(out, values, kubeVersion)
	}

	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	releases, err := chart.NewReleases(o.Kubeconfig, "", o.Namespace, nil)
	if err != nil {
		return err
	}
	current, err := releases.Current(chart.DefaultReleaseName)
	if err != nil {
		return err
	}
	verb := "Installing"
	if current != nil {
		verb = fmt.Sprintf("Upgrading release %s (revision %d, chart %s) with", current.Name, current.Version, current.Chart.Metadata.Version)
	}
	c0, err := chart.Load()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s Liqo chart %s into namespace %s (Kubernetes %s)\n", verb, c0.Metadata.Version, o.Namespace, kubeVersion)
	rel, err := releases.Apply(ctx, chart.DefaultReleaseName, values, o.Timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Release %s revision %d %s\n", rel.Name, rel.Version, rel.Info.Status)
	if err := waitReady(ctx, c, o.Namespace, out); err != nil {
		return err
	}
	var cc configv1alpha1.ClusterConfig
	if err := c.Get(ctx, client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cc); err != nil {
		return err
	}
	fmt.Fprintf(out, "Liqo is running: cluster %s, ClusterID %s, auth service at %s\n\nTo peer another cluster with this one, run there:\n  ",
		cc.Status.ClusterName, cc.Status.ClusterID, cc.Status.AuthURL)
	return (&generateaddcommand.Options{Kubeconfig: o.Kubeconfig, Namespace: o.Namespace}).Run(ctx, out)
}

// Values are the chart values for this cluster: what the distribution
// and the cluster say, the flags over them, then -f files and --set over
// everything, as helm merges them. What was detected is reported on out.
func (o *Options) Values(ctx context.Context, c client.Reader, server string, p Profile, out io.Writer) (map[string]any, error) {
	values := map[string]any{"clusterName": o.ClusterName}
	set := func(path string, v any) {
		m := values
		keys := strings.Split(path, ".")
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[keys[len(keys)-1]] = v
	}

	pod, podFrom, svc, svcFrom, err := detectedRanges(ctx, c, p)
	if err != nil {
		return nil, err
	}
	if o.PodCIDR != "" {
		pod, podFrom = o.PodCIDR, "--pod-cidr"
	}
	if o.ServiceCIDR != "" {
		svc, svcFrom = o.ServiceCIDR, "--service-cidr"
	}
	for _, r := range []struct{ name, flag, value, from string }{{"pod", "--pod-cidr", pod, podFrom}, {"service", "--service-cidr", svc, svcFrom}} {
		if r.value == "" {
			return nil, fmt.Errorf("cannot tell the cluster's %s CIDR: pass %s", r.name, r.flag)
		}
		if firstCIDR(r.value) != r.value {
			return nil, fmt.Errorf("%s %s: want a network such as 10.244.0.0/16", r.flag, r.value)
		}
		fmt.Fprintf(out, "• %s CIDR %s (%s)\n", titleCase(r.name), r.value, r.from)
	}
	set("networking.podCIDR", pod)
	set("networking.serviceCIDR", svc)

	apiURL := o.APIServerURL
	if apiURL == "" {
		var warning string
		if apiURL, warning, err = apiServerURL(ctx, c, server, p); err != nil {
			return nil, err
		}
		if warning != "" {
			fmt.Fprintf(out, "! %s\n", warning)
		}
	}
	fmt.Fprintf(out, "• API server for peers %s\n", apiURL)
	set("apiServer.url", apiURL)

	authType := o.AuthServiceType
	if authType == "" {
		authType = p.AuthServiceType
	}
	set("auth.service.type", authType)
	if o.AuthURL != "" {
		set("auth.url", o.AuthURL)
		fmt.Fprintf(out, "• Auth service for peers %s (Service type %s)\n", o.AuthURL, authType)
	} else {
		fmt.Fprintf(out, "• Auth service exposed as %s\n", authType)
	}
	tag := o.ImageTag
	if tag == "" {
		// The images of the commit liqoctl was built from.
		tag = version.Version()
	}
	for path, v := range map[string]string{"image.repository": o.ImageRepository, "image.tag": tag, "image.pullPolicy": o.PullPolicy} {
		if v != "" {
			set(path, v)
		}
	}
	// The gateway's and the broker's images are the controller manager's
	// siblings: the same registry and tag, their own names.
	if base, ok := strings.CutSuffix(o.ImageRepository, "/"+liqoinstall.ControllerManagerName); ok {
		set("gateway.image.repository", base+"/liqo-gateway")
		set("broker.image.repository", base+"/liqo-broker")
	}
	if o.Broker != "" {
		modes, err := broker.ParseModes(o.Broker)
		if err != nil {
			return nil, err
		}
		values := make([]any, len(modes))
		for i, m := range modes {
			values[i] = m
		}
		set("broker.enabled", true)
		set("broker.modes", values)
		fmt.Fprintf(out, "• Broker: %s\n", strings.Join(modes, ", "))
	}

	for _, f := range o.ValuesFiles {
		data, err := os.ReadFile(f) //nolint:gosec // the operator's own values file, named on the command line
		if err != nil {
			return nil, fmt.Errorf("reading values: %w", err)
		}
		var fromFile map[string]any
		if err := yaml.Unmarshal(data, &fromFile); err != nil {
			return nil, fmt.Errorf("values file %s: %w", f, err)
		}
		values = merge(values, fromFile)
	}
	for _, s := range o.Set {
		if err := strvals.ParseInto(s, values); err != nil {
			return nil, fmt.Errorf("--set %s: %w", s, err)
		}
	}
	return values, nil
}

// merge lays src over dst, map by map, as helm merges values files.
func merge(dst, src map[string]any) map[string]any {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				dst[k] = merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

func titleCase(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// print writes the manifests Liqo would install, as helm template does.
func (o *Options) print(out io.Writer, values map[string]any, kubeVersion string) error {
	c, err := chart.Load()
	if err != nil {
		return err
	}
	objs, err := chart.Objects(c, chart.Release{Name: chart.DefaultReleaseName, Namespace: o.Namespace, Values: values, KubeVersion: kubeVersion})
	if err != nil {
		return err
	}
	for _, obj := range objs {
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(out, "---\n%s", data); err != nil {
			return err
		}
	}
	return nil
}

func serverVersion(cfg *rest.Config) (string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("reaching the API server at %s: %w", cfg.Host, err)
	}
	return v.GitVersion, nil
}

// waitReady waits until the controller manager's Deployment is rolled out
// with a Ready pod and the ClusterConfig's status has the ClusterID and
// auth URL, printing each change of state.
func waitReady(ctx context.Context, c client.Client, namespace string, out io.Writer) error {
	last := ""
	report := func(state string) {
		if state != last {
			fmt.Fprintf(out, "  %s\n", state)
			last = state
		}
	}
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: liqoinstall.ControllerManagerName}, &d); err != nil {
			report(fmt.Sprintf("waiting for Deployment %s: %v", liqoinstall.ControllerManagerName, err))
			return false, nil
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < want || d.Status.ReadyReplicas < 1 {
			report(fmt.Sprintf("controller manager: %d/%d pods updated, %d ready%s", d.Status.UpdatedReplicas, want, d.Status.ReadyReplicas, podStates(ctx, c, namespace)))
			return false, nil
		}
		var cc configv1alpha1.ClusterConfig
		if err := c.Get(ctx, client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cc); err != nil {
			if !apierrors.IsNotFound(err) {
				report(fmt.Sprintf("reading the ClusterConfig: %v", err))
			}
			return false, nil
		}
		if cc.Status.ClusterID == "" || cc.Status.AuthURL == "" {
			report("controller manager ready; waiting for the ClusterID and the auth URL")
			return false, nil
		}
		report(fmt.Sprintf("controller manager: %d/%d pods ready", d.Status.ReadyReplicas, want))
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("liqo did not become ready (last: %s): %w", last, err)
	}
	return nil
}

// podStates says why the controller manager's pods are not ready, as
// kubectl get pods shows it.
func podStates(ctx context.Context, c client.Client, namespace string) string {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/component": "controller-manager"}); err != nil {
		return ""
	}
	var states []string
	for _, p := range pods.Items {
		state := string(p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
				state = cs.State.Waiting.Reason
			}
		}
		if p.Spec.NodeName == "" {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
					state = "Unschedulable: " + cond.Message
				}
			}
		}
		states = append(states, p.Name+" "+state)
	}
	if len(states) == 0 {
		return ""
	}
	slices.Sort(states)
	return " (" + strings.Join(states, ", ") + ")"
}
