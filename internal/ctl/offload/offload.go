// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package offload implements `liqoctl offload namespace`: enable offloading
// for a namespace.
package offload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
)

// Options of `liqoctl offload namespace`.
type Options struct {
	// Kubeconfig is this cluster's kubeconfig; empty means the usual rules.
	Kubeconfig string
	// Namespace is the namespace to offload.
	Namespace string
	// Strategy is the pod offloading strategy.
	Strategy string
	// Selector selects providers by their virtual nodes' labels, in label
	// selector syntax (k=v,k2 in (a,b),!k3).
	Selector string
	// Mapping is the namespace mapping strategy; RemoteName goes with
	// SelectedName.
	Mapping, RemoteName string
	// Timeout bounds the wait for the provider namespaces; 0 does not wait.
	Timeout time.Duration
}

// NewCommand returns `liqoctl offload`.
func NewCommand(ctx context.Context) *cobra.Command {
	cmd := &cobra.Command{Use: "offload", Short: "Offload workloads to peered clusters"}
	o := &Options{Strategy: string(offloadingv1alpha1.PodOffloadingLocalAndRemote), Mapping: string(offloadingv1alpha1.DefaultNameMapping), Timeout: time.Minute}
	ns := &cobra.Command{
		Use:   "namespace NAME",
		Short: "Offload a namespace: its pods may run on the selected providers' virtual nodes",
		Long: `Create (or update) the namespace's NamespaceOffloading, then wait until every
selected provider has created the namespace that receives its pods.

Strategies: LocalAndRemote (pods run here or on virtual nodes), Remote (on
virtual nodes only), Local (here only; objects are still reflected).
Undo it with: kubectl delete namespaceoffloading offloading -n NAME`,
		Example: `  liqoctl offload namespace demo
  liqoctl offload namespace demo --strategy Remote --selector 'topology.kubernetes.io/region=eu'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Namespace = args[0]
			return o.Run(ctx, cmd.OutOrStdout())
		},
	}
	ns.Flags().StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of this cluster")
	ns.Flags().StringVar(&o.Strategy, "strategy", o.Strategy, "Pod offloading strategy: Local, Remote or LocalAndRemote")
	ns.Flags().StringVar(&o.Selector, "selector", "", "Select providers by virtual-node labels (label selector syntax)")
	ns.Flags().StringVar(&o.Mapping, "namespace-mapping", o.Mapping, "Remote namespace name: DefaultName, EnforceSameName or SelectedName")
	ns.Flags().StringVar(&o.RemoteName, "remote-namespace", "", "Remote namespace name, with --namespace-mapping SelectedName")
	ns.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "How long to wait for the provider namespaces (0: do not wait)")
	cmd.AddCommand(ns)
	return cmd
}

// ClusterSelector turns a label selector into a node selector on virtual
// nodes' labels.
func ClusterSelector(s string) (*corev1.NodeSelector, error) {
	if s == "" {
		return nil, nil
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("--selector %q: %w", s, err)
	}
	reqs, _ := sel.Requirements()
	term := corev1.NodeSelectorTerm{}
	for _, r := range reqs {
		nr := corev1.NodeSelectorRequirement{Key: r.Key(), Values: r.ValuesUnsorted()}
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			nr.Operator = corev1.NodeSelectorOpIn
		case selection.NotEquals, selection.NotIn:
			nr.Operator = corev1.NodeSelectorOpNotIn
		case selection.Exists:
			nr.Operator, nr.Values = corev1.NodeSelectorOpExists, nil
		case selection.DoesNotExist:
			nr.Operator, nr.Values = corev1.NodeSelectorOpDoesNotExist, nil
		case selection.GreaterThan:
			nr.Operator = corev1.NodeSelectorOpGt
		case selection.LessThan:
			nr.Operator = corev1.NodeSelectorOpLt
		default:
			return nil, fmt.Errorf("--selector %q: operator %s is not supported", s, r.Operator())
		}
		term.MatchExpressions = append(term.MatchExpressions, nr)
	}
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}, nil
}

// Run offloads the namespace.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	selector, err := ClusterSelector(o.Selector)
	if err != nil {
		return err
	}
	c, _, err := kubeclient.New(o.Kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	if err := c.Get(ctx, client.ObjectKey{Name: o.Namespace}, &corev1.Namespace{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s does not exist: create it first (kubectl create namespace %s)", o.Namespace, o.Namespace)
		}
		return err
	}
	no := &offloadingv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: offloadingv1alpha1.NamespaceOffloadingName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, no, func() error {
		no.Spec.PodOffloadingStrategy = offloadingv1alpha1.PodOffloadingStrategy(o.Strategy)
		no.Spec.NamespaceMappingStrategy = offloadingv1alpha1.NamespaceMappingStrategy(o.Mapping)
		no.Spec.RemoteNamespaceName = o.RemoteName
		no.Spec.ClusterSelector = selector
		return nil
	}); err != nil {
		// The API server names the invalid field.
		return fmt.Errorf("offloading namespace %s: %w", o.Namespace, err)
	}
	if o.Timeout == 0 {
		_, err := fmt.Fprintf(out, "Namespace %s offloading requested; follow it with: kubectl get namespaceoffloading -n %s\n", o.Namespace, o.Namespace)
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, o.Timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(no), no); err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(no.Status.Conditions, offloadingv1alpha1.ConditionReady)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == no.Generation, nil
	})
	if err != nil {
		msg := ""
		if cond := meta.FindStatusCondition(no.Status.Conditions, offloadingv1alpha1.ConditionReady); cond != nil {
			msg = ": " + cond.Reason + ": " + cond.Message
		}
		return errors.Join(fmt.Errorf("namespace %s is not offloaded after %s%s", o.Namespace, o.Timeout, msg), err)
	}
	fmt.Fprintf(out, "Namespace %s offloaded (%s)\n", o.Namespace, no.Spec.PodOffloadingStrategy)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tREMOTE NAMESPACE\tPHASE")
	for _, st := range no.Status.RemoteNamespaces {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", st.ClusterID, st.Namespace, st.Phase)
	}
	return tw.Flush()
}
