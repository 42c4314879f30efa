// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package testnetwork is `liqoctl test network`: for every peer whose
// virtual node is Ready, a pod of this cluster asks a pod offloaded to the
// peer by the address this cluster's API lists for it (its EndpointSlice:
// the peer's pod IP as this cluster sees it) and through a Service; a pod
// offloaded to the peer asks a pod of this cluster through the Service the
// peer holds a copy of. It prints a table of the results and round trips
// and fails when one failed.
package testnetwork

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/network/netcheck"
)

// Options are the flags of `liqoctl test network`.
type Options struct {
	Kubeconfig string
	// Namespace is the Liqo namespace, where the gateway's image is read.
	Namespace string
	// TestNamespace is made, offloaded, and removed after. Not liqo-*:
	// providers refuse to make namespaces of that name for a consumer.
	TestNamespace string
	// Image runs the test pods; the gateway's when empty.
	Image string
	// Timeout bounds the whole test.
	Timeout time.Duration
	// Keep leaves the test namespace, for a look at what failed.
	Keep bool
}

// NewCommand returns `liqoctl test`, with `network` under it.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &Options{Namespace: install.DefaultNamespace, TestNamespace: "test-liqo-network", Timeout: 5 * time.Minute}
	test := &cobra.Command{Use: "test", Short: "Check what Liqo set up"}
	network := &cobra.Command{
		Use:   "network",
		Short: "Check that pods of this cluster and of each peer reach each other through the network fabric",
		Long: `Runs, in a namespace offloaded to every peer with a Ready virtual node, a
server pod in each peer and in this cluster, and client pods that ask them:
this cluster's pod asks each peer's by the address this cluster lists for it
(the peer's pod IP as this cluster sees it) and through a Service; each
peer's pod asks this cluster's through the Service the peer holds a copy of.
Prints a table of results and round trips; fails when one failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(ctx, cmd.OutOrStdout()) },
	}
	f := network.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of this cluster")
	f.StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "The Liqo namespace")
	f.StringVar(&o.TestNamespace, "test-namespace", o.TestNamespace, "Namespace the test runs in (made and removed)")
	f.StringVar(&o.Image, "image", o.Image, "Image of the test pods (default: the gateway's)")
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "How long the whole test may take")
	f.BoolVar(&o.Keep, "keep", o.Keep, "Keep the test namespace after the test")
	test.AddCommand(network)
	return test
}

// row is one check of the table; skipped says why it was not run.
type row struct{ peer, from, to, by, skipped string }

const serverPort = 8080

// Run runs the test and prints the table to out.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	c, cfg, err := kubeclient.New(o.Kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	peers, err := readyPeers(ctx, c)
	if err != nil {
		return err
	}
	image, err := o.image(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "• Testing the network to %d peer(s) with %s in namespace %s\n", len(peers), image, o.TestNamespace)
	if err := o.offload(ctx, c, out); err != nil {
		return err
	}
	defer func() {
		if o.Keep {
			fmt.Fprintf(out, "• Kept namespace %s\n", o.TestNamespace)
			return
		}
		// The test's own context may be over: a fresh one to clean up.
		// It ends once the namespace is gone (its copies in the peers
		// with it), so that the next test can start at once.
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer ccancel()
		if err := c.Delete(cctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.TestNamespace}}); client.IgnoreNotFound(err) != nil {
			fmt.Fprintf(out, "• Namespace %s left: %v\n", o.TestNamespace, err)
			return
		}
		if err := o.gone(cctx, c); err != nil {
			fmt.Fprintf(out, "• Namespace %s still terminating: %v\n", o.TestNamespace, err)
			return
		}
		fmt.Fprintf(out, "• Removed namespace %s\n", o.TestNamespace)
	}()

	// Servers: one per peer, one here; a Service each.
	servers := map[string]*corev1.Pod{}
	local := o.pod("server-local", image, []string{"check", "serve", fmt.Sprintf(":%d", serverPort), "this cluster"}, "")
	servers[""] = local
	for _, p := range peers {
		servers[p.id] = o.pod("server-"+p.id, image, []string{"check", "serve", fmt.Sprintf(":%d", serverPort), p.name}, p.id)
	}
	for _, pod := range servers {
		if err := c.Create(ctx, pod); err != nil {
			return fmt.Errorf("creating the test pod %s: %w", pod.Name, err)
		}
		if err := c.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.TestNamespace, Name: pod.Name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": pod.Name},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(serverPort)}}},
		}); err != nil {
			return fmt.Errorf("creating the test Service %s: %w", pod.Name, err)
		}
	}
	for _, pod := range servers {
		if err := waitPod(ctx, c, pod, corev1.PodRunning); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "• Test servers running")

	// This cluster's client asks every peer's server, by address and by
	// Service.
	var urls []string
	var rows []row
	for _, p := range peers {
		addr, err := endpointAddress(ctx, c, o.TestNamespace, servers[p.id].Name)
		if err != nil {
			return err
		}
		svc, err := serviceIP(ctx, c, o.TestNamespace, servers[p.id].Name)
		if err != nil {
			return err
		}
		urls = append(urls, fmt.Sprintf("http://%s:%d/", addr, serverPort), "http://"+svc+"/")
		rows = append(rows, row{peer: p.name, from: "here", to: "peer", by: "address " + addr}, row{peer: p.name, from: "here", to: "peer", by: "Service " + svc})
	}
	clients := []*corev1.Pod{o.pod("client-local", image, append([]string{"check", "get"}, urls...), "")}
	// Each peer's client asks this cluster's server through its copy of
	// the Service, whose address the peer's kubelet gives it.
	env := strings.ToUpper(strings.ReplaceAll(local.Name, "-", "_")) + "_SERVICE_HOST"
	for _, p := range peers {
		if brokered(servers[p.id]) {
			// A broker runs the peer's pods in its providers: they reach
			// this cluster's Services only once the broker shows them
			// this cluster's endpoints, which it does not yet.
			rows = append(rows, row{peer: p.name, from: "peer", to: "here", by: "Service " + local.Name,
				skipped: "SKIPPED: the peer is a broker, whose providers do not reach this cluster's Services yet (docs/broker.md)"})
			continue
		}
		clients = append(clients, o.pod("client-"+p.id, image, []string{"check", "get", "http://$(" + env + ")/"}, p.id))
		rows = append(rows, row{peer: p.name, from: "peer", to: "here", by: "Service " + local.Name})
	}
	for _, pod := range clients {
		if err := c.Create(ctx, pod); err != nil {
			return fmt.Errorf("creating the test pod %s: %w", pod.Name, err)
		}
	}
	var results []netcheck.Result
	for _, pod := range clients {
		// A client that failed still says why, in its log.
		if err := waitPod(ctx, c, pod, corev1.PodSucceeded, corev1.PodFailed); err != nil {
			return err
		}
		got, err := readResults(ctx, cs, pod)
		if err != nil {
			return err
		}
		results = append(results, got...)
	}
	run := 0
	for _, r := range rows {
		if r.skipped == "" {
			run++
		}
	}
	if len(results) != run {
		return fmt.Errorf("%d results for %d checks", len(results), run)
	}
	failed := 0
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "PEER\tFROM\tTO\tBY\tRESULT\tROUND TRIP")
	next := 0
	for _, r := range rows {
		result, rtt := r.skipped, "-"
		if r.skipped == "" {
			res := results[next]
			next++
			result, rtt = "OK", res.Latency.Round(10*time.Microsecond).String()
			if !res.OK {
				failed++
				result, rtt = "FAILED: "+res.Error, "-"
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.peer, r.from, r.to, r.by, result, rtt)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d checks failed", failed, run)
	}
	return nil
}

// brokered says whether the peer that runs pod (a server of the test)
// runs it in turn in one of its providers: the peer is a broker.
func brokered(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == offloadingv1alpha1.ConditionProviderAddress
	})
}

type peer struct{ id, name string }

// readyPeers are the peers whose virtual node is Ready.
func readyPeers(ctx context.Context, c client.Client) ([]peer, error) {
	var fcs discoveryv1alpha1.ForeignClusterList
	if err := c.List(ctx, &fcs); err != nil {
		return nil, fmt.Errorf("listing ForeignClusters: %w", err)
	}
	var out []peer
	for _, fc := range fcs.Items {
		if meta.IsStatusConditionTrue(fc.Status.Conditions, discoveryv1alpha1.ConditionVirtualNodeReady) {
			out = append(out, peer{id: fc.Spec.ClusterIdentity.ClusterID, name: fc.Spec.ClusterIdentity.ClusterName})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no peer has a Ready virtual node here: nothing to test (liqoctl status says why)")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// image is the test pods' image: the flag, else the gateway's.
func (o *Options) image(ctx context.Context, c client.Client) (string, error) {
	if o.Image != "" {
		return o.Image, nil
	}
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: "liqo-gateway"}, &d); err != nil {
		return "", fmt.Errorf("reading the gateway's image (or pass --image): %w", err)
	}
	return d.Spec.Template.Spec.Containers[0].Image, nil
}

// gone waits until the test namespace no longer exists.
func (o *Options) gone(ctx context.Context, c client.Client) error {
	return poll(ctx, func() (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Name: o.TestNamespace}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}, "namespace "+o.TestNamespace+" to go")
}

// offload makes the test namespace, offloaded to every peer; each pod says
// where it runs. A namespace of that name that is going (an earlier
// test's) is waited for; one that stays is a test running, or kept.
func (o *Options) offload(ctx context.Context, c client.Client, out io.Writer) error {
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("creating namespace %s: %w", o.TestNamespace, ctx.Err())
		}
		err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.TestNamespace}})
		if err == nil {
			break
		}
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		var ns corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: o.TestNamespace}, &ns); client.IgnoreNotFound(err) != nil {
			return err
		} else if err == nil && ns.DeletionTimestamp == nil {
			return fmt.Errorf("namespace %s exists: a test is running, or one was kept (delete it)", o.TestNamespace)
		} else if err == nil {
			fmt.Fprintf(out, "• Waiting for namespace %s, an earlier test's, to go\n", o.TestNamespace)
			if err := o.gone(ctx, c); err != nil {
				return err
			}
		}
	}
	if err := c.Create(ctx, &offloadingv1alpha1.NamespaceOffloading{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.TestNamespace, Name: offloadingv1alpha1.NamespaceOffloadingName},
		Spec:       offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingLocalAndRemote},
	}); err != nil {
		return err
	}
	var no offloadingv1alpha1.NamespaceOffloading
	err := poll(ctx, func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: o.TestNamespace, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(no.Status.Conditions, offloadingv1alpha1.ConditionReady), nil
	}, "the test namespace to be offloaded")
	if err != nil {
		if cond := meta.FindStatusCondition(no.Status.Conditions, offloadingv1alpha1.ConditionReady); cond != nil {
			return fmt.Errorf("%w (%s: %s)", err, cond.Reason, cond.Message)
		}
	}
	return err
}

// pod runs the image with args, in the peer given ("" for this cluster),
// as Pod Security restricted allows.
func (o *Options) pod(name, image string, args []string, peerID string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.TestNamespace, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "check", Image: image, Args: args,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	req := corev1.NodeSelectorRequirement{Key: offloadingv1alpha1.VirtualNodeLabel, Operator: corev1.NodeSelectorOpNotIn, Values: []string{offloadingv1alpha1.VirtualNodeValue}}
	if peerID != "" {
		req = corev1.NodeSelectorRequirement{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{peerID}}
	}
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}},
	}}}
	return pod
}

// waitPod waits for pod to reach one of phases; when it does not, the
// error says where the pod stands and what its last warnings said, as
// kubectl describe would.
func waitPod(ctx context.Context, c client.Client, pod *corev1.Pod, phases ...corev1.PodPhase) error {
	err := poll(ctx, func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		for _, p := range phases {
			if pod.Status.Phase == p {
				return true, nil
			}
		}
		return false, nil
	}, fmt.Sprintf("pod %s to be %v", pod.Name, phases))
	if err != nil && ctx.Err() != nil {
		// The test's context is over: a fresh one to say why.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err = fmt.Errorf("%w; %s", err, describePod(dctx, c, pod))
	}
	return err
}

// describePod says where pod stands: its phase, the conditions not met,
// what its containers wait for or ended with, and its last warnings.
func describePod(ctx context.Context, c client.Client, pod *corev1.Pod) string {
	parts := []string{"phase " + string(pod.Status.Phase)}
	if pod.Status.Phase == "" {
		parts[0] = "no phase"
	}
	if pod.Spec.NodeName != "" {
		parts = append(parts, "on node "+pod.Spec.NodeName)
	}
	if pod.Status.Message != "" {
		parts = append(parts, pod.Status.Reason+": "+pod.Status.Message)
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			parts = append(parts, fmt.Sprintf("%s %s (%s: %s)", cond.Type, cond.Status, cond.Reason, cond.Message))
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("container %s waiting (%s: %s)", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
		case cs.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("container %s ended (%s, exit %d)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode))
		}
	}
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(pod.Namespace), client.MatchingFields{"involvedObject.name": pod.Name}); err != nil {
		return strings.Join(append(parts, "its events: "+err.Error()), "; ")
	}
	var warnings []corev1.Event
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == pod.Name && e.Type == corev1.EventTypeWarning {
			warnings = append(warnings, e)
		}
	}
	sort.Slice(warnings, func(i, j int) bool { return eventTime(&warnings[i]).Before(eventTime(&warnings[j])) })
	for _, e := range warnings[max(len(warnings)-3, 0):] {
		parts = append(parts, fmt.Sprintf("warning %s (x%d): %s", e.Reason, max(e.Count, 1), e.Message))
	}
	return strings.Join(parts, "; ")
}

// eventTime is when e last happened, whichever API wrote it.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// endpointAddress is the one ready address the EndpointSlices of Service
// name list, once there is one.
func endpointAddress(ctx context.Context, c client.Client, ns, name string) (string, error) {
	var addr string
	err := poll(ctx, func() (bool, error) {
		var slices discoveryv1.EndpointSliceList
		if err := c.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
			return false, err
		}
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready && len(ep.Addresses) > 0 {
					addr = ep.Addresses[0]
					return true, nil
				}
			}
		}
		return false, nil
	}, "an address of Service "+name)
	return addr, err
}

func serviceIP(ctx context.Context, c client.Client, ns, name string) (string, error) {
	var svc corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
		return "", err
	}
	return svc.Spec.ClusterIP, nil
}

// readResults reads the JSON lines a client printed.
func readResults(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod) ([]netcheck.Result, error) {
	logs, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the results of %s: %w", pod.Name, err)
	}
	return netcheck.ParseResults(logs), nil
}

// poll asks done every half second until it says so, fails, or ctx ends;
// the error then says what was awaited.
func poll(ctx context.Context, done func() (bool, error), what string) error {
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(context.Context) (bool, error) { return done() })
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
	}
	return err
}
