// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package chart

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// DefaultReleaseName is the Helm release liqoctl installs.
const DefaultReleaseName = "liqo"

// FieldManager is the server-side apply manager of what liqoctl installs,
// whatever its binary is called (Helm names it after the binary).
const FieldManager = "liqoctl"

// Releases installs, upgrades and removes the chart as a Helm release in
// one namespace, as the helm CLI does (release records in Secrets), so
// that `helm list`, `helm upgrade` and `helm uninstall` see what liqoctl
// did.
type Releases struct {
	cfg       *action.Configuration
	namespace string
}

// NewReleases returns Releases for the cluster of kubeconfig (empty: the
// usual rules of kubectl) and its context (empty: the current one), in
// namespace. Helm's own logs go to log (nil: discarded).
func NewReleases(kubeconfig, kubecontext, namespace string, log *slog.Logger) (*Releases, error) {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	flags.Context = &kubecontext
	flags.Namespace = &namespace
	kube.ManagedFieldsManager = FieldManager
	cfg := action.NewConfiguration()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.SetLogger(log.Handler())
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		return nil, fmt.Errorf("configuring Helm: %w", err)
	}
	return &Releases{cfg: cfg, namespace: namespace}, nil
}

// Current returns the deployed release called name, or nil when there is
// none.
func (r *Releases) Current(name string) (*releasev1.Release, error) {
	rel, err := action.NewGet(r.cfg).Run(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Helm release %s/%s: %w", r.namespace, name, err)
	}
	return asV1(rel)
}

// Apply installs the chart as release name with values, or upgrades the
// release when it exists (helm upgrade --install). It does not wait for
// the workloads: the caller reports their progress.
func (r *Releases) Apply(ctx context.Context, name string, values map[string]any, timeout time.Duration) (*releasev1.Release, error) {
	c, err := Load()
	if err != nil {
		return nil, err
	}
	current, err := r.Current(name)
	if err != nil {
		return nil, err
	}
	var rel any
	if current == nil {
		in := action.NewInstall(r.cfg)
		in.ReleaseName = name
		in.Namespace = r.namespace
		in.CreateNamespace = true
		in.Timeout = timeout
		in.WaitStrategy = kube.HookOnlyStrategy
		rel, err = in.RunWithContext(ctx, c, values)
	} else {
		up := action.NewUpgrade(r.cfg)
		up.Namespace = r.namespace
		up.Timeout = timeout
		up.WaitStrategy = kube.HookOnlyStrategy
		// The values of this run replace the previous ones: liqoctl
		// always passes the whole set.
		up.ResetValues = true
		// The chart owns what it renders: a field another manager set
		// (an earlier helm, kubectl edit) is taken back, as
		// helm upgrade --force-conflicts does.
		up.ForceConflicts = true
		rel, err = up.RunWithContext(ctx, name, c, values)
	}
	if err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	return asV1(rel)
}

// Uninstall removes release name. It does not wait for what the release
// created to be gone: a CRD stays until its custom resources' finalizers
// are processed, which the caller does (liqoctl uninstall drops them once
// the controller manager is gone). A missing release is not an error.
func (r *Releases) Uninstall(name string, timeout time.Duration) error {
	un := action.NewUninstall(r.cfg)
	un.IgnoreNotFound = true
	un.Timeout = timeout
	un.WaitStrategy = kube.HookOnlyStrategy
	un.DeletionPropagation = "background"
	if _, err := un.Run(name); err != nil {
		return fmt.Errorf("helm uninstall %s/%s: %w", r.namespace, name, err)
	}
	return nil
}

func asV1(rel any) (*releasev1.Release, error) {
	if v, ok := rel.(*releasev1.Release); ok {
		return v, nil
	}
	return nil, fmt.Errorf("unexpected Helm release type %T", rel)
}
