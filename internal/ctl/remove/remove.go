// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package remove implements `liqoctl remove`: unpeer from a cluster.
package remove

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
	"github.com/liqo-go/liqo/internal/foreigncluster"
)

// Options of `liqoctl remove`.
type Options struct {
	// Kubeconfig is this cluster's kubeconfig; empty means the usual rules.
	Kubeconfig string
	// Cluster is the remote cluster's ID or ForeignCluster name.
	Cluster string
	// Incoming also refuses the remote cluster's peering with this one.
	Incoming bool
	// Timeout bounds the wait for the teardown; 0 does not wait.
	Timeout time.Duration
}

// NewCommand returns `liqoctl remove`.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &Options{Timeout: 2 * time.Minute}
	cmd := &cobra.Command{
		Use:   "remove CLUSTER",
		Short: "Unpeer from a cluster (its ClusterID or ForeignCluster name)",
		Long: `Unpeer from a cluster: set join=false on its ForeignCluster and wait until
the PeeringRequest in the remote cluster and everything local are gone. When
the remote cluster is unreachable the local side is removed anyway after a
bounded time, and the ForeignCluster says so.

With --incoming, also end the peering the remote cluster has with this one,
and refuse it from now on (incomingPeeringEnabled=No).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Cluster = args[0]
			return o.Run(ctx, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of this cluster")
	cmd.Flags().BoolVar(&o.Incoming, "incoming", false, "Also end and refuse the remote cluster's peering with this one")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "How long to wait for the teardown (0: do not wait)")
	return cmd
}

// Run unpeers.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	c, _, err := kubeclient.New(o.Kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	fc, err := foreigncluster.Lookup(ctx, c, o.Cluster)
	if err != nil {
		return err
	}
	patch := client.MergeFrom(fc.DeepCopy())
	fc.Spec.Join = false
	if fc.Spec.OutgoingPeeringEnabled == discoveryv1alpha1.PeeringEnabledYes {
		fc.Spec.OutgoingPeeringEnabled = discoveryv1alpha1.PeeringEnabledAuto
	}
	if o.Incoming {
		fc.Spec.IncomingPeeringEnabled = discoveryv1alpha1.PeeringEnabledNo
	}
	if err := c.Patch(ctx, fc, patch); err != nil {
		return fmt.Errorf("updating ForeignCluster %s: %w", fc.Name, err)
	}
	if o.Timeout == 0 {
		_, err := fmt.Fprintf(out, "Unpeering from %s requested; follow it with: liqoctl status\n", fc.Name)
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, o.Timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return !controllerutil.ContainsFinalizer(fc, discoveryv1alpha1.PeeringFinalizer) &&
			(!o.Incoming || !fc.Status.IncomingPeering), nil
	})
	if err != nil {
		msg := ""
		if cond := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested); cond != nil {
			msg = ": " + cond.Message
		}
		return errors.Join(fmt.Errorf("the teardown of %s did not finish within %s%s", fc.Name, o.Timeout, msg), err)
	}
	result := "Unpeered from " + fc.Name
	if cond := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested); cond != nil && cond.Message != "" {
		result += ": " + cond.Message
	}
	_, err = fmt.Fprintln(out, result)
	return err
}
