// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package uninstall implements `liqoctl uninstall`: Liqo removed from a
// cluster, with nothing left behind: the Helm release, its CRDs and
// custom resources, every object the controller manager created, and the
// namespace.
package uninstall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
	"github.com/liqo-go/liqo/internal/ctl/remove"
	liqoinstall "github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/install/chart"
)

// Options of `liqoctl uninstall`.
type Options struct {
	// Kubeconfig is the cluster's kubeconfig; empty means the usual rules.
	Kubeconfig string
	// Namespace is where Liqo and its Helm release live.
	Namespace string
	// Purge unpeers from every cluster first, instead of refusing.
	Purge bool
	// Timeout bounds each step.
	Timeout time.Duration
}

// NewCommand returns `liqoctl uninstall`.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &Options{Namespace: liqoinstall.DefaultNamespace, Timeout: 3 * time.Minute}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove Liqo from a cluster, leaving nothing behind",
		Long: `Remove Liqo from a cluster: its Helm release, its CRDs and every custom
resource, every object the controller manager created (labelled
app.kubernetes.io/managed-by=liqo), and the Liqo namespace.

Refuses while the cluster peers with another, in either direction: unpeer
first with liqoctl remove, or pass --purge to unpeer from every cluster
before removing Liqo.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(ctx, cmd.OutOrStdout()) },
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the cluster")
	f.StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "Namespace of Liqo and of its Helm release")
	f.BoolVar(&o.Purge, "purge", false, "Unpeer from every cluster first")
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "How long to wait for each step")
	return cmd
}

// Run uninstalls.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	c, cfg, err := kubeclient.New(o.Kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	peers, err := Peerings(ctx, c)
	if err != nil {
		return err
	}
	if len(peers) > 0 && !o.Purge {
		return fmt.Errorf("this cluster peers with %s: unpeer with liqoctl remove, or pass --purge to unpeer from every cluster first",
			strings.Join(peers, ", "))
	}
	for _, name := range peers {
		fmt.Fprintf(out, "Unpeering from %s\n", name)
		if err := (&remove.Options{Kubeconfig: o.Kubeconfig, Cluster: name, Incoming: true, Timeout: o.Timeout}).Run(ctx, out); err != nil {
			return fmt.Errorf("unpeering from %s: %w", name, err)
		}
	}

	releases, err := chart.NewReleases(o.Kubeconfig, "", o.Namespace, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Removing Helm release %s/%s\n", o.Namespace, chart.DefaultReleaseName)
	if err := releases.Uninstall(chart.DefaultReleaseName, o.Timeout); err != nil {
		return err
	}
	// With the controller manager gone, nothing will process the
	// finalizers of Liqo's objects: drop them so the CRDs go.
	if err := o.waitGone(ctx, "the controller manager", func(ctx context.Context) (bool, error) {
		var d appsv1.Deployment
		err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: liqoinstall.ControllerManagerName}, &d)
		if !apierrors.IsNotFound(err) {
			return false, err
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(o.Namespace), client.MatchingLabels{"app.kubernetes.io/component": "controller-manager"}); err != nil {
			return false, err
		}
		return len(pods.Items) == 0, nil
	}); err != nil {
		return err
	}
	removed, err := Cleanup(ctx, cfg, c, o.Namespace, out)
	if err != nil {
		return err
	}
	if err := o.waitGone(ctx, "Liqo's CRDs and namespace", func(ctx context.Context) (bool, error) {
		crds, err := liqoCRDs(ctx, c)
		if err != nil || len(crds) > 0 {
			return false, err
		}
		err = c.Get(ctx, client.ObjectKey{Name: o.Namespace}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "Liqo is uninstalled: %d objects it created removed, namespace %s gone\n", removed, o.Namespace)
	return err
}

func (o *Options) waitGone(ctx context.Context, what string, done func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, o.Timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := done(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		return errors.Join(fmt.Errorf("waiting for %s to go: %w", what, err), last)
	}
	return nil
}

// Peerings names the clusters this one peers with in either direction.
func Peerings(ctx context.Context, c client.Reader) ([]string, error) {
	var fcs discoveryv1alpha1.ForeignClusterList
	if err := c.List(ctx, &fcs); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil // no CRD: nothing peers
		}
		return nil, fmt.Errorf("listing ForeignClusters: %w", err)
	}
	var names []string
	for _, fc := range fcs.Items {
		if controllerutil.ContainsFinalizer(&fc, discoveryv1alpha1.PeeringFinalizer) || fc.Status.IncomingPeering {
			names = append(names, fc.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Cleanup removes what Helm does not know of: the finalizers of Liqo's
// custom resources (nothing processes them once the controller manager
// is gone), the CRDs, every object labelled managed-by=liqo in any
// namespace, and the Liqo namespace. It returns how many objects it
// deleted.
func Cleanup(ctx context.Context, cfg *rest.Config, c client.Client, namespace string, out io.Writer) (int, error) {
	// Listing every kind meets deprecated ones (v1 Endpoints,
	// ComponentStatus): their warnings are not the operator's concern.
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	crds, err := liqoCRDs(ctx, c)
	if err != nil {
		return 0, err
	}
	for _, crd := range crds {
		gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: storageVersion(&crd), Resource: crd.Spec.Names.Plural}
		list, err := mc.Resource(gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue // the CRD is gone already, with its resources
		}
		if err != nil {
			return 0, fmt.Errorf("listing %s: %w", gvr.Resource, err)
		}
		for _, item := range list.Items {
			if len(item.Finalizers) == 0 {
				continue
			}
			r := mc.Resource(gvr)
			var patchErr error
			patch := []byte(`{"metadata":{"finalizers":null}}`)
			if item.Namespace != "" {
				_, patchErr = r.Namespace(item.Namespace).Patch(ctx, item.Name, types.MergePatchType, patch, metav1.PatchOptions{})
			} else {
				_, patchErr = r.Patch(ctx, item.Name, types.MergePatchType, patch, metav1.PatchOptions{})
			}
			if client.IgnoreNotFound(patchErr) != nil {
				return 0, fmt.Errorf("removing the finalizers of %s %s: %w", gvr.Resource, item.Name, patchErr)
			}
		}
		if err := c.Delete(ctx, &crd); client.IgnoreNotFound(err) != nil {
			return 0, fmt.Errorf("deleting CRD %s: %w", crd.Name, err)
		}
	}

	removed, err := deleteManaged(ctx, cfg, mc)
	if err != nil {
		return removed, err
	}
	if removed > 0 {
		fmt.Fprintf(out, "Removed %d objects the controller manager created\n", removed)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := c.Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
		return removed, fmt.Errorf("deleting namespace %s: %w", namespace, err)
	}
	return removed, nil
}

// liqoCRDs are the CRDs of Liqo's API groups (*.liqo.io).
func liqoCRDs(ctx context.Context, c client.Reader) ([]apiextensionsv1.CustomResourceDefinition, error) {
	var list apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing CRDs: %w", err)
	}
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, crd := range list.Items {
		if strings.HasSuffix(crd.Spec.Group, ".liqo.io") {
			crds = append(crds, crd)
		}
	}
	return crds, nil
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return crd.Spec.Versions[0].Name
}

// deleteManaged deletes, in every resource type that can be listed and
// deleted, the objects labelled managed-by=liqo.
func deleteManaged(ctx context.Context, cfg *rest.Config, mc metadata.Interface) (int, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return 0, err
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		return 0, fmt.Errorf("discovering the API: %w", err)
	}
	selector := metav1.ListOptions{LabelSelector: discoveryv1alpha1.ManagedByLabel + "=" + discoveryv1alpha1.ManagedByValue}
	removed := 0
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			verbs := sets.New(r.Verbs...)
			if strings.Contains(r.Name, "/") || !verbs.HasAll("list", "delete") || r.Name == "events" {
				continue
			}
			res := mc.Resource(gv.WithResource(r.Name))
			items, err := res.List(ctx, selector)
			if err != nil {
				if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
					continue
				}
				return removed, fmt.Errorf("listing %s: %w", r.Name, err)
			}
			for _, item := range items.Items {
				if item.Namespace != "" {
					err = res.Namespace(item.Namespace).Delete(ctx, item.Name, metav1.DeleteOptions{})
				} else {
					err = res.Delete(ctx, item.Name, metav1.DeleteOptions{})
				}
				if client.IgnoreNotFound(err) != nil {
					return removed, fmt.Errorf("deleting %s %s: %w", r.Name, item.Name, err)
				}
				removed++
			}
		}
	}
	return removed, nil
}
