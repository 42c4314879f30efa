// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package playground

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
	"github.com/liqo-go/liqo/internal/ctl/offload"
	"github.com/liqo-go/liqo/internal/localcluster"
)

// The demo workload: a Deployment in an offloaded namespace of the first
// cluster, spread over the virtual nodes.
const (
	demoNamespace = "demo"
	demoReplicas  = 6
)

// demoContainer is the demo's workload: with network, a real container
// that serves HTTP on port 8080 (the probe image the nodes have), else a
// pause container for kwok's nodes.
func demoContainer(ns, name string, network bool) corev1.Container {
	if !network {
		return corev1.Container{Name: name, Image: "registry.k8s.io/pause:3.10"}
	}
	return corev1.Container{Name: name, Image: localcluster.ProbeImage, ImagePullPolicy: corev1.PullNever,
		Command: []string{"/probe"}, Args: []string{"serve", ":8080", "hello from " + ns + "/" + name},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}}
}

// runDemoWorkload offloads the demo namespace of the cluster behind
// kubeconfig (Remote strategy) and runs the demo Deployment there, then
// prints where its pods run. With network, the pods are real (the
// providers' nodes are) and serve HTTP on port 8080, at the addresses the
// list shows.
func runDemoWorkload(ctx context.Context, out io.Writer, kubeconfig string, network bool) error {
	c, cfg, err := kubeclient.New(kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := (&offload.Options{
		Kubeconfig: kubeconfig, Namespace: demoNamespace, Strategy: string(offloadingv1alpha1.PodOffloadingRemote),
		Mapping: string(offloadingv1alpha1.DefaultNameMapping), Timeout: time.Minute,
	}).Run(ctx, out); err != nil {
		return err
	}
	labels := map[string]string{"app": "hello"}
	container := demoContainer(demoNamespace, "hello", network)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: "hello"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(demoReplicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{container},
					// One pod per virtual node in turn: the Deployment spreads
					// over the providers.
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
				},
			},
		},
	}
	if err := c.Create(ctx, dep); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	start := time.Now()
	var pods corev1.PodList
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, &pods, client.InNamespace(demoNamespace), client.MatchingLabels(labels)); err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == demoReplicas && len(pods.Items) == demoReplicas, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the %d pods of %s/hello to run (see kubectl get pods -n %s): %w", demoReplicas, demoNamespace, demoNamespace, err)
	}
	fmt.Fprintf(out, "\nDeployment %s/hello, offloaded (pods Running after %s):\n", demoNamespace, time.Since(start).Round(100*time.Millisecond))
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tIP\tNODE")
	for _, p := range pods.Items {
		ip := p.Status.PodIP
		if ip == "" {
			ip = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, p.Status.Phase, ip, p.Spec.NodeName)
	}
	if err := tw.Flush(); err != nil || len(pods.Items) == 0 {
		return err
	}
	if network {
		fmt.Fprintln(out, "The providers' pods are listed at the addresses the consumer reaches them at, through the tunnels\n"+
			"(a provider's range that overlaps the consumer's, as the playground's do by default, remapped as the consumer chose).")
	} else {
		fmt.Fprintln(out, "Without the network, no address is shown for the providers' pods: nothing here could reach them.")
	}
	// What `kubectl logs` shows: the consumer's API server asks the virtual
	// node's kubelet API, which asks the provider's API server.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	first := pods.Items[0]
	logs, err := cs.CoreV1().Pods(demoNamespace).GetLogs(first.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("logs of %s/%s: %w", demoNamespace, first.Name, err)
	}
	fmt.Fprintf(out, "\nLogs of %s (on %s), read through %s's API server as kubectl logs does:\n  %s\n",
		first.Name, first.Spec.NodeName, "the consumer", strings.TrimSpace(string(logs)))
	return nil
}
