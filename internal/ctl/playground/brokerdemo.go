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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker"
	ctlbroker "github.com/liqo-go/liqo/internal/ctl/broker"
	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
	"github.com/liqo-go/liqo/internal/ctl/offload"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/network/netcheck"
	"github.com/liqo-go/liqo/internal/playground"
)

// brokerNamespace is the namespace the broker demo offloads to the
// broker alone.
const brokerNamespace = "brokered"

// runBrokerDemo shows the broker: the catalog; the first cluster enabling
// up to two providers (liqoctl broker enable); a Deployment offloaded to
// the broker alone, orchestrated over them; with two, disabling one
// moving its pods to the other; with network, the consumer reaching the
// orchestrated pods directly, through its own tunnels with their
// providers, not through the broker.
func runBrokerDemo(ctx context.Context, out io.Writer, p *playground.Playground, network bool) error {
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
	if network {
		// A provider lets a consumer reach the pods a broker runs there
		// for it only when it accepts that broker's introductions.
		for _, pr := range providers {
			fmt.Fprintf(out, "\n$ kubectl patch clusterconfig %s --type merge -p '{\"spec\":{\"peeringConfig\":{\"introducers\":[\"%s\"]}}}'   # on %s\n",
				configv1alpha1.ClusterConfigName, b.ClusterID, pr.Name)
			if err := acceptIntroductions(ctx, pr, b.ClusterID); err != nil {
				return err
			}
		}
	}
	for _, pr := range providers {
		fmt.Fprintf(out, "\n$ liqoctl broker enable %s --broker %s --url %s   # on %s\n", pr.ClusterID, b.ClusterID, b.BrokerURL, consumer.Name)
		if err := o.Toggle(ctx, pr.ClusterID, true, out); err != nil {
			return err
		}
	}

	c, cfg, err := kubeclient.New(consumer.Kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: brokerNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	selector := offloadingv1alpha1.RemoteClusterLabel + "=" + b.ClusterID
	fmt.Fprintf(out, "\n$ liqoctl offload namespace %s --strategy %s --selector %s   # on %s\n", brokerNamespace,
		offloadingv1alpha1.PodOffloadingRemote, selector, consumer.Name)
	// liqoctl offload waits until the namespace is offloaded: a pod made
	// before would run here.
	if err := (&offload.Options{Kubeconfig: consumer.Kubeconfig, Namespace: brokerNamespace, Strategy: string(offloadingv1alpha1.PodOffloadingRemote),
		Selector: selector, Mapping: string(offloadingv1alpha1.DefaultNameMapping), Timeout: time.Minute}).Run(ctx, out); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nA Deployment of %d pods in %s:\n", demoReplicas, brokerNamespace)
	labels := map[string]string{"app": "brokered"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: brokerNamespace, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](demoReplicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{demoContainer(brokerNamespace, "web", network)}}},
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

	if len(providers) > 1 {
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
	}
	if !network {
		fmt.Fprintf(out, "(With a network, as root, the demo also shows %s's pods reaching the orchestrated ones directly: docs/broker.md.)\n", consumer.Name)
		return nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return showDirect(ctx, out, p, c, bc, cs, names)
}

// Of the direct data plane's demonstration: how much a client fetches,
// and how many times netcheck asks (a first answer, then timed ones).
const (
	directBytes   = 200_000
	directFetches = 6
)

// showDirect shows the direct data plane: where the consumer reaches
// each orchestrated pod, then a pod on the consumer's node fetching from
// one of them, with what crossed the consumer's tunnel and the broker's
// meanwhile.
func showDirect(ctx context.Context, out io.Writer, p *playground.Playground, c, bc client.Client, cs kubernetes.Interface, names map[string]string) error {
	consumer, b := p.Members[0], p.Broker
	var target *corev1.Pod
	var pods corev1.PodList
	// The consumer shows a pod at its direct address once its own tunnel
	// with that pod's provider is up.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, &pods, client.InNamespace(brokerNamespace)); err != nil {
			return false, nil //nolint:nilerr // asked again
		}
		for i := range pods.Items {
			if !direct(&pods.Items[i]) {
				return false, nil
			}
		}
		return len(pods.Items) > 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to show the orchestrated pods at direct addresses: %w", consumer.Name, err)
	}
	placed, err := placedOn(ctx, bc, consumer.ClusterID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nThe orchestrated pods, at the addresses %s reaches them at through its own tunnel with their provider:\n", consumer.Name)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tIP\tPROVIDER")
	for i := range pods.Items {
		pod := &pods.Items[i]
		fmt.Fprintf(w, "%s\t%s\t%s\n", pod.Name, pod.Status.PodIP, names[placed[pod.Name]])
		if target == nil {
			target = pod
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}

	const clientNS = "brokered-client"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clientNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = c.Delete(cctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clientNS}})
	}()
	url := fmt.Sprintf("http://%s:8080/bytes/%d", target.Status.PodIP, directBytes)
	brokerRX, brokerTX, err := b.TunnelBytes(ctx)
	if err != nil {
		return err
	}
	consumerRX, _, err := consumer.TunnelBytes(ctx)
	if err != nil {
		return err
	}
	result, err := fetchFrom(ctx, c, cs, clientNS, consumer.RealNodeName(0), url)
	if err != nil {
		return err
	}
	brokerRX2, brokerTX2, err := b.TunnelBytes(ctx)
	if err != nil {
		return err
	}
	consumerRX2, _, err := consumer.TunnelBytes(ctx)
	if err != nil {
		return err
	}
	if !result.OK || len(result.Answer) != directBytes {
		return fmt.Errorf("a pod of %s fetching %s: %d bytes, %s", consumer.Name, url, len(result.Answer), result.Error)
	}
	fmt.Fprintf(out, "A pod on %s's node fetched %d x %d bytes from %s (%s, round trip %s): %d bytes came in through %s's tunnel, %d crossed the broker's.\n",
		consumer.Name, directFetches, directBytes, target.Name, url, result.Latency.Round(10*time.Microsecond), consumerRX2-consumerRX, consumer.Name,
		(brokerRX2-brokerRX)+(brokerTX2-brokerTX))
	return nil
}

// direct says whether the consumer shows pod at the address it reaches
// it at through its own tunnel with the pod's provider.
func direct(pod *corev1.Pod) bool {
	return pod.Status.PodIP != "" && slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == offloadingv1alpha1.ConditionPodAddress && c.Reason == offloadingv1alpha1.ReasonAddressDirect
	})
}

// fetchFrom runs `liqo-gateway check get url` in a pod of ns on node and
// returns its result.
func fetchFrom(ctx context.Context, c client.Client, cs kubernetes.Interface, ns, node, url string) (netcheck.Result, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fetch"},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			NodeSelector:    map[string]string{corev1.LabelHostname: node},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "check", Image: playground.GatewayImageRepository + ":" + playground.GatewayImageTag, ImagePullPolicy: corev1.PullNever,
				Args:            []string{"check", "get", url},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	if err := c.Create(ctx, pod); err != nil {
		return netcheck.Result{}, err
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, nil //nolint:nilerr // asked again
		}
		return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, nil
	})
	if err != nil {
		return netcheck.Result{}, fmt.Errorf("waiting for the pod fetching %s: %w", url, err)
	}
	logs, err := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return netcheck.Result{}, err
	}
	for _, r := range netcheck.ParseResults(logs) {
		if r.URL == url {
			return r, nil
		}
	}
	return netcheck.Result{}, fmt.Errorf("the pod fetching %s printed no result: %s", url, logs)
}

// acceptIntroductions adds broker to the introducers provider accepts.
func acceptIntroductions(ctx context.Context, provider *playground.Member, broker string) error {
	c, _, err := kubeclient.New(provider.Kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cc configv1alpha1.ClusterConfig
		if err := c.Get(ctx, client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cc); err != nil {
			return err
		}
		if slices.Contains(cc.Spec.PeeringConfig.Introducers, broker) {
			return nil
		}
		cc.Spec.PeeringConfig.Introducers = append(cc.Spec.PeeringConfig.Introducers, broker)
		return c.Update(ctx, &cc)
	})
}

// placedOn lists the provider of each Running pod the broker runs for
// the consumer's brokered namespace, by name.
func placedOn(ctx context.Context, b client.Client, consumerID string) (map[string]string, error) {
	var nodes corev1.NodeList
	if err := b.List(ctx, &nodes, client.MatchingLabels{offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue}); err != nil {
		return nil, err
	}
	providerOf := map[string]string{}
	for _, n := range nodes.Items {
		providerOf[n.Name] = n.Labels[offloadingv1alpha1.RemoteClusterLabel]
	}
	var placed corev1.PodList
	if err := b.List(ctx, &placed, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumerID}); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range placed.Items {
		if strings.HasPrefix(p.Namespace, brokerNamespace+"-") && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out[p.Name] = providerOf[p.Spec.NodeName]
		}
	}
	return out, nil
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
		providers, err := placedOn(ctx, b, consumerID)
		if err != nil {
			return false, nil //nolint:nilerr // asked again
		}
		by = map[string]int{}
		for _, provider := range providers {
			by[provider]++
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
