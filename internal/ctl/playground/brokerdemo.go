// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package playground

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker"
	ctlbroker "github.com/liqo-go/liqo/internal/ctl/broker"
	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/playground"
)

// brokerNamespace is the namespace the broker demo offloads to the
// broker alone.
const brokerNamespace = "brokered"

// runBrokerDemo shows the broker: the catalog; the first cluster enabling
// two providers (liqoctl broker enable); a Deployment offloaded to the
// broker alone, orchestrated over them; disabling one moving its pods to
// the other.
func runBrokerDemo(ctx context.Context, out io.Writer, p *playground.Playground) error {
	consumer, b := p.Members[0], p.Broker
	fmt.Fprintf(out, "\nThe broker's catalog (GET %s/api/v1/clusters):\n", b.BrokerURL)
	if err := printCatalog(ctx, out, b.BrokerURL); err != nil {
		return err
	}
	providers := p.Members[1:min(3, len(p.Members))]
	o := &ctlbroker.Options{Kubeconfig: consumer.Kubeconfig, Namespace: install.DefaultNamespace, Broker: b.ClusterID, URL: b.BrokerURL,
		TTL: time.Hour, Timeout: 30 * time.Second}
	// The broker keeps the consumer's login a moment after the peering.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := o.Login(ctx)
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("logging in to the broker as %s: %w", consumer.Name, err)
	}
	for _, pr := range providers {
		fmt.Fprintf(out, "\n$ liqoctl broker enable %s --broker %s --url %s   # on %s\n", pr.ClusterID, b.ClusterID, b.BrokerURL, consumer.Name)
		if err := o.Toggle(ctx, pr.ClusterID, true, out); err != nil {
			return err
		}
	}

	c, _, err := kubeclient.New(consumer.Kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nNamespace %s of %s offloaded to the broker alone, a Deployment of %d pods in it:\n", brokerNamespace, consumer.Name, demoReplicas)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: brokerNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	no := &offloadingv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: brokerNamespace, Name: offloadingv1alpha1.NamespaceOffloadingName},
		Spec: offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote,
			ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{b.ClusterID}},
			}}}}}}
	if err := c.Create(ctx, no); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	labels := map[string]string{"app": "brokered"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: brokerNamespace, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](demoReplicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}}},
	}}
	if err := c.Create(ctx, d); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	bc, _, err := kubeclient.New(b.Kubeconfig, 30*time.Second)
	if err != nil {
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
	fmt.Fprintf(out, "Running in %s, as the broker placed them: %s\n", time.Since(start).Round(100*time.Millisecond), describePlacement(placed, names))

	moved := providers[0]
	fmt.Fprintf(out, "\n$ liqoctl broker disable %s --broker %s --url %s   # on %s\n", moved.ClusterID, b.ClusterID, b.BrokerURL, consumer.Name)
	start = time.Now()
	if err := o.Toggle(ctx, moved.ClusterID, false, out); err != nil {
		return err
	}
	placed, err = waitPlacement(ctx, c, bc, consumer.ClusterID, func(by map[string]int) bool {
		return by[moved.ClusterID] == 0 && sum(by) == demoReplicas
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Every pod moved off %s in %s, under the same names in %s: %s\n", moved.Name, time.Since(start).Round(100*time.Millisecond),
		consumer.Name, describePlacement(placed, names))
	fmt.Fprintf(out, "(The consumer's pods reaching orchestrated pods directly, through its own tunnels, is not built yet: docs/broker.md.)\n")
	return nil
}

// waitPlacement waits, for at most two minutes, until the consumer's
// brokered pods all run and the broker's placement of them, by provider,
// satisfies done.
func waitPlacement(ctx context.Context, consumer, b client.Client, consumerID string, done func(map[string]int) bool) (map[string]int, error) {
	var by map[string]int
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := consumer.List(ctx, &pods, client.InNamespace(brokerNamespace)); err != nil {
			return false, nil //nolint:nilerr // asked again
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		var nodes corev1.NodeList
		if err := b.List(ctx, &nodes, client.MatchingLabels{offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue}); err != nil {
			return false, nil //nolint:nilerr // asked again
		}
		providerOf := map[string]string{}
		for _, n := range nodes.Items {
			providerOf[n.Name] = n.Labels[offloadingv1alpha1.RemoteClusterLabel]
		}
		var placed corev1.PodList
		if err := b.List(ctx, &placed, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumerID}); err != nil {
			return false, nil //nolint:nilerr // asked again
		}
		by = map[string]int{}
		for _, p := range placed.Items {
			if strings.HasPrefix(p.Namespace, brokerNamespace+"-") && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				by[providerOf[p.Spec.NodeName]]++
			}
		}
		return running == demoReplicas && done(by), nil
	})
	if err != nil {
		return nil, fmt.Errorf("the brokered pods (%v by provider): %w", by, err)
	}
	return by, nil
}

func sum(by map[string]int) int {
	n := 0
	for _, v := range by {
		n += v
	}
	return n
}

func describePlacement(by map[string]int, names map[string]string) string {
	var parts []string
	for id, n := range by {
		parts = append(parts, fmt.Sprintf("%d on %s", n, names[id]))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// printCatalog prints the broker's v1 catalog as a table.
func printCatalog(ctx context.Context, out io.Writer, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/clusters", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var list broker.ClusterList
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
		return fmt.Errorf("the catalog: %w", err)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CLUSTER\tPROVIDER\tCONSUMER\tOFFERED CPU\tOFFERED PODS\tFREE PODS")
	for _, c := range list.Items {
		cpu, pods, free := "-", "-", "-"
		if c.Offer != nil {
			cpu, pods = c.Offer.Resources.Cpu().String(), c.Offer.Resources.Pods().String()
			free = c.Free.Pods().String()
		}
		fmt.Fprintf(w, "%s\t%v\t%v\t%s\t%s\t%s\n", c.ClusterName, c.Provider, c.Consumer, cpu, pods, free)
	}
	return w.Flush()
}
