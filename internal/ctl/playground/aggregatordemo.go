// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package playground

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
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

	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
	"github.com/liqo-go/liqo/internal/ctl/offload"
	"github.com/liqo-go/liqo/internal/playground"
)

// runAggregatorDemo shows the aggregator: the first cluster offloads a
// Deployment to the broker alone and sees one virtual node for it, its
// pods at addresses of the broker, while the broker (its operator's view)
// spreads them over providers the consumer never learns; with network,
// a pod on the consumer's node fetching from one of them through the
// broker's gateway, with what crossed the broker's tunnel.
func runAggregatorDemo(ctx context.Context, out io.Writer, p *playground.Playground, network bool) error {
	consumer, b := p.Members[0], p.Broker
	fmt.Fprintf(out, "\nThe broker's catalog (GET %s/api/v1/clusters):\n", b.BrokerURL)
	if err := printCatalog(ctx, out, b.BrokerURL); err != nil {
		return err
	}
	c, cfg, err := kubeclient.New(consumer.Kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	bc, _, err := kubeclient.New(b.Kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: brokerNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	selector := offloadingv1alpha1.RemoteClusterLabel + "=" + b.ClusterID
	fmt.Fprintf(out, "\n$ liqoctl offload namespace %s --strategy %s --selector %s   # on %s\n", brokerNamespace,
		offloadingv1alpha1.PodOffloadingRemote, selector, consumer.Name)
	if err := (&offload.Options{Kubeconfig: consumer.Kubeconfig, Namespace: brokerNamespace, Strategy: string(offloadingv1alpha1.PodOffloadingRemote),
		Selector: selector, Mapping: string(offloadingv1alpha1.DefaultNameMapping), Timeout: time.Minute}).Run(ctx, out); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nA Deployment of %d pods in %s:\n", demoReplicas, brokerNamespace)
	labels := map[string]string{"app": "aggregated"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: brokerNamespace, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](demoReplicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{demoContainer(brokerNamespace, "web", network)}}},
	}}
	if err := c.Create(ctx, d); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	names := map[string]string{}
	for _, m := range p.Members {
		names[m.ClusterID] = m.Name
	}
	start := time.Now()
	placed, err := waitPlacement(ctx, c, bc, consumer.ClusterID, func(by map[string]int) bool { return sum(by) == demoReplicas })
	if err != nil {
		return err
	}
	took := time.Since(start).Round(100 * time.Millisecond)

	// What the consumer sees: its pods on the broker's one virtual node,
	// at the broker's addresses (its external range, as the consumer sees
	// it) once they have them.
	var external netip.Prefix
	if network {
		var tep netv1alpha1.TunnelEndpoint
		if err := c.Get(ctx, client.ObjectKey{Name: b.ClusterID}, &tep); err != nil {
			return fmt.Errorf("%s's tunnel to the broker: %w", consumer.Name, err)
		}
		if external, err = netip.ParsePrefix(tep.Spec.RemoteSeenAs.ExternalCIDR); err != nil {
			return fmt.Errorf("%s's view of the broker's external range: %w", consumer.Name, err)
		}
	}
	inTransit := func(pod *corev1.Pod) bool {
		a, err := netip.ParseAddr(pod.Status.PodIP)
		return err == nil && external.Contains(a)
	}
	var pods corev1.PodList
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, &pods, client.InNamespace(brokerNamespace)); err != nil {
			return false, nil //nolint:nilerr // asked again
		}
		return !network || !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return !inTransit(&p) }), nil
	}); err != nil {
		return fmt.Errorf("waiting for %s to show its pods at the broker's addresses: %w", consumer.Name, err)
	}
	fmt.Fprintf(out, "Running in %s. What %s sees (kubectl get pods -n %s -o wide):\n", took, consumer.Name, brokerNamespace)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSTATUS\tIP\tNODE")
	for i := range pods.Items {
		pod := &pods.Items[i]
		ip := pod.Status.PodIP
		if ip == "" {
			ip = "<none>"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", pod.Name, pod.Status.Phase, ip, pod.Spec.NodeName)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "What the broker's operator sees: %s.\n", describePlacement(placed, names))
	if !network {
		fmt.Fprintf(out, "(With a network, as root, the demo also shows a pod of %s reaching them through the broker's gateway: docs/broker.md.)\n", consumer.Name)
		return nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return showTransit(ctx, out, p, c, cs, &pods.Items[0])
}

// showTransit has a pod on the consumer's node fetch from target through
// the broker, and tells what crossed the broker's tunnel meanwhile.
func showTransit(ctx context.Context, out io.Writer, p *playground.Playground, c client.Client, cs kubernetes.Interface, target *corev1.Pod) error {
	consumer, b := p.Members[0], p.Broker
	const clientNS = "aggregated-client"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clientNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = c.Delete(cctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clientNS}})
	}()
	url := fmt.Sprintf("http://%s:8080/bytes/%d", target.Status.PodIP, directBytes)
	rx, tx, err := b.TunnelBytes(ctx)
	if err != nil {
		return err
	}
	result, err := fetchFrom(ctx, c, cs, clientNS, consumer.RealNodeName(0), url)
	if err != nil {
		return err
	}
	rx2, tx2, err := b.TunnelBytes(ctx)
	if err != nil {
		return err
	}
	if !result.OK || len(result.Answer) != directBytes {
		return fmt.Errorf("a pod of %s fetching %s: %d bytes, %s", consumer.Name, url, len(result.Answer), result.Error)
	}
	fmt.Fprintf(out, "A pod on %s's node fetched %d x %d bytes from %s (%s, round trip %s) through the broker: its tunnel received %d bytes and sent %d meanwhile.\n",
		consumer.Name, directFetches, directBytes, target.Name, url, result.Latency.Round(10*time.Microsecond), rx2-rx, tx2-tx)
	return nil
}
