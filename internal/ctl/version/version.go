// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package version implements `liqoctl version`: liqoctl's own version and
// the version of Liqo installed in the cluster.
package version

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
	liqoinstall "github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/install/chart"
)

// Options of `liqoctl version`.
type Options struct {
	// Kubeconfig is the cluster's kubeconfig; empty means the usual rules.
	Kubeconfig string
	// Namespace is where Liqo and its Helm release live.
	Namespace string
	// Client prints only liqoctl's version, without asking the cluster.
	Client bool
}

// NewCommand returns `liqoctl version`.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &Options{Namespace: liqoinstall.DefaultNamespace}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print liqoctl's version and the version of Liqo in the cluster",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.Run(ctx, cmd.OutOrStdout()) },
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the cluster")
	f.StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "Namespace of Liqo and of its Helm release")
	f.BoolVar(&o.Client, "client", false, "Print only liqoctl's version")
	return cmd
}

// version is set at build time (make build: -X with git describe); it
// is also the tag of the images built from the same commit, which
// liqoctl install deploys by default.
var version string

// Version is the version liqoctl was built as, empty when the build did
// not say.
func Version() string { return version }

// Client is liqoctl's version: the one the build set, else the module
// version, and the commit it was built from when the Go toolchain
// recorded it.
func Client() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	if version != "" {
		v = version
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "-dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += " (" + rev + modified + ")"
	}
	c, err := chart.Load()
	if err == nil {
		v += ", chart " + c.Metadata.Version
	}
	return v + ", " + info.GoVersion
}

// Run prints the versions.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	if _, err := fmt.Fprintf(out, "Client: liqoctl %s\n", Client()); err != nil || o.Client {
		return err
	}
	c, _, err := kubeclient.New(o.Kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	releases, err := chart.NewReleases(o.Kubeconfig, "", o.Namespace, nil)
	if err != nil {
		return err
	}
	rel, err := releases.Current(chart.DefaultReleaseName)
	if err != nil {
		return err
	}
	server := "Liqo is not installed by Helm in namespace " + o.Namespace
	if rel != nil {
		server = fmt.Sprintf("chart %s-%s (app %s), release %s/%s revision %d %s", rel.Chart.Metadata.Name, rel.Chart.Metadata.Version,
			rel.Chart.Metadata.AppVersion, rel.Namespace, rel.Name, rel.Version, rel.Info.Status)
	}
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: liqoinstall.ControllerManagerName}, &d); err == nil && len(d.Spec.Template.Spec.Containers) > 0 {
		server += fmt.Sprintf(", controller manager %s (%d/%d ready)", d.Spec.Template.Spec.Containers[0].Image, d.Status.ReadyReplicas, d.Status.Replicas)
	} else if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("reading Deployment %s/%s: %w", o.Namespace, liqoinstall.ControllerManagerName, err)
	}
	_, err = fmt.Fprintf(out, "Server: %s\n", server)
	return err
}
