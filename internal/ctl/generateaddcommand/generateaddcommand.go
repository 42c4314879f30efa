// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package generateaddcommand implements `liqoctl generate-add-command`: it
// prints the `liqoctl add` line another cluster runs to peer with this one.
package generateaddcommand

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
	"github.com/liqo-go/liqo/internal/install"
)

// Options are the command's settings.
type Options struct {
	// Kubeconfig is the cluster's kubeconfig; empty means the usual rules
	// ($KUBECONFIG, then ~/.kube/config).
	Kubeconfig string
	// Namespace is the Liqo namespace.
	Namespace string
}

// NewCommand returns `liqoctl generate-add-command`.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &Options{Namespace: install.DefaultNamespace}
	cmd := &cobra.Command{
		Use:   "generate-add-command",
		Short: "Print the command another cluster runs to peer with this one",
		Long: `Print a ready 'liqoctl add' command carrying this cluster's auth URL,
ClusterID and peering token. Whoever runs it can ask this cluster for a
peering: share it like a password.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(ctx, cmd.OutOrStdout()) },
	}
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of this cluster")
	cmd.Flags().StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "The Liqo namespace")
	return cmd
}

// Run prints the command.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	c, _, err := kubeclient.New(o.Kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	var cc configv1alpha1.ClusterConfig
	if err := c.Get(ctx, client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cc); err != nil {
		return fmt.Errorf("reading the ClusterConfig (is Liqo installed?): %w", err)
	}
	if cc.Status.ClusterID == "" || cc.Status.AuthURL == "" {
		return errors.New("the ClusterConfig status has no ClusterID or auth URL yet: is liqo-controller-manager running?")
	}
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: auth.TokenSecret}, &secret); err != nil {
		return fmt.Errorf("reading the peering token from Secret %s/%s: %w", o.Namespace, auth.TokenSecret, err)
	}
	token := string(secret.Data[auth.TokenKey])
	if token == "" {
		return fmt.Errorf("secret %s/%s has no %q key", o.Namespace, auth.TokenSecret, auth.TokenKey)
	}
	_, err = fmt.Fprintf(out, "liqoctl add --auth-url %s --id %s --token %s\n", cc.Status.AuthURL, cc.Status.ClusterID, token)
	return err
}
