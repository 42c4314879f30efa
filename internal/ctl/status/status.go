// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package status implements `liqoctl status`: the known clusters and the
// phases of their peerings, in a table like kubectl's.
package status

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
	"github.com/liqo-go/liqo/internal/ctl/printer"
)

// Options of `liqoctl status`.
type Options struct {
	// Kubeconfig is this cluster's kubeconfig; empty means the usual rules.
	Kubeconfig string
	// Verbose adds the message of every condition that is not True.
	Verbose bool
	// Now is injectable for tests.
	Now func() time.Time
}

// NewCommand returns `liqoctl status`.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the known clusters and the phases of their peerings",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.Run(ctx, cmd.OutOrStdout()) },
	}
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of this cluster")
	cmd.Flags().BoolVarP(&o.Verbose, "verbose", "v", false, "Explain every phase that is not done")
	return cmd
}

// phases are the condition columns, in peering order.
var phases = []string{
	discoveryv1alpha1.ConditionAuthenticated,
	discoveryv1alpha1.ConditionPeeringRequested,
	discoveryv1alpha1.ConditionAdvertisementAccepted,
	discoveryv1alpha1.ConditionNetworkEstablished,
	discoveryv1alpha1.ConditionVirtualNodeReady,
}

// Run prints the table.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	c, _, err := kubeclient.New(o.Kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	var list discoveryv1alpha1.ForeignClusterList
	if err := c.List(ctx, &list); err != nil {
		return fmt.Errorf("listing ForeignClusters: %w", err)
	}
	return o.Print(out, list.Items)
}

// Print writes the table of fcs.
func (o *Options) Print(out io.Writer, fcs []discoveryv1alpha1.ForeignCluster) error {
	if len(fcs) == 0 {
		_, err := fmt.Fprintln(out, "No clusters known.")
		return err
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	sort.Slice(fcs, func(i, j int) bool { return fcs[i].Name < fcs[j].Name })
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "NAME\tCLUSTER NAME\tDISCOVERY\tJOIN\tREACHABLE\tAUTHENTICATED\tOUTGOING\tINCOMING\tOFFER\tVIRTUAL NODE\tAGE")
	var notes []string
	for i := range fcs {
		fc := &fcs[i]
		// The names and the conditions' reasons and messages come, some
		// of them, from the peer: made safe for the terminal.
		printer.Row(w,
			fc.Name, orNone(fc.Spec.ClusterIdentity.ClusterName), orNone(fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel]), fmt.Sprint(fc.Spec.Join),
			cell(fc, discoveryv1alpha1.ConditionReachable), cell(fc, discoveryv1alpha1.ConditionAuthenticated),
			cell(fc, discoveryv1alpha1.ConditionPeeringRequested), fmt.Sprint(fc.Status.IncomingPeering),
			cell(fc, discoveryv1alpha1.ConditionAdvertisementAccepted), cell(fc, discoveryv1alpha1.ConditionVirtualNodeReady),
			duration.HumanDuration(now().Sub(fc.CreationTimestamp.Time)))
		if o.Verbose {
			for _, t := range append([]string{discoveryv1alpha1.ConditionReachable, discoveryv1alpha1.ConditionCATrusted}, phases...) {
				if cond := meta.FindStatusCondition(fc.Status.Conditions, t); cond != nil && (cond.Status != "True" || cordoned(cond)) {
					notes = append(notes, fmt.Sprintf("%s %s: %s", printer.Safe(fc.Name), t, printer.Safe(cond.Message)))
				}
			}
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(notes) > 0 {
		_, err := fmt.Fprintln(out, "\n"+strings.Join(notes, "\n"))
		return err
	}
	return nil
}

// cell shows a condition as kubectl shows one: its status, and the reason
// when it is not True.
func cell(fc *discoveryv1alpha1.ForeignCluster, t string) string {
	cond := meta.FindStatusCondition(fc.Status.Conditions, t)
	switch {
	case cond == nil:
		return "-"
	case cordoned(cond):
		return "True (Cordoned)"
	case cond.Status == "True":
		return "True"
	default:
		return string(cond.Status) + " (" + cond.Reason + ")"
	}
}

// cordoned says whether cond is a virtual node Ready but cordoned: an
// operator stopped scheduling on it.
func cordoned(cond *metav1.Condition) bool {
	return cond.Type == discoveryv1alpha1.ConditionVirtualNodeReady && cond.Status == metav1.ConditionTrue &&
		cond.Reason == discoveryv1alpha1.ReasonVirtualNodeCordoned
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
