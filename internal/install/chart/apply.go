// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package chart

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
)

// fieldOwner is the field manager of what Apply writes.
const fieldOwner = "liqo-playground"

// Apply renders the chart for r and applies what it renders to the
// cluster of cfg with server-side apply, without a Helm release: the
// namespace, then the CRDs (waiting until they are served), then the
// rest, leaving out what skip names: a kind, or one object as
// "Kind/name". The playground installs so,
// skipping the Deployments and the DaemonSet, because it runs the
// controller manager as a process on the host with the ServiceAccount and
// rights the chart created, and its nodes have no network to program.
func Apply(ctx context.Context, cfg *rest.Config, r Release, skip ...string) error {
	c, err := Load()
	if err != nil {
		return err
	}
	if r.KubeVersion == "" {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return err
		}
		v, err := dc.ServerVersion()
		if err != nil {
			return fmt.Errorf("reaching the API server: %w", err)
		}
		r.KubeVersion = v.GitVersion
	}
	objs, err := Objects(c, r)
	if err != nil {
		return err
	}
	cl, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		return err
	}
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(r.Namespace)
	ns.SetLabels(map[string]string{"app.kubernetes.io/part-of": "liqo"})
	crds := []*unstructured.Unstructured{ns}
	var rest []*unstructured.Unstructured
	for _, o := range objs {
		switch {
		case slices.Contains(skip, o.GetKind()) || slices.Contains(skip, o.GetKind()+"/"+o.GetName()):
		case o.GetKind() == "CustomResourceDefinition":
			crds = append(crds, o)
		default:
			rest = append(rest, o)
		}
	}
	for _, o := range crds {
		if err := apply(ctx, cl, o); err != nil {
			return err
		}
	}
	if err := waitEstablished(ctx, cl, crds[1:]); err != nil {
		return err
	}
	// The REST mapper must learn the new kinds.
	if cl, err = client.New(cfg, client.Options{Scheme: api.NewScheme()}); err != nil {
		return err
	}
	for _, o := range rest {
		if err := apply(ctx, cl, o); err != nil {
			return err
		}
	}
	return nil
}

func apply(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	o.SetManagedFields(nil)
	o.SetResourceVersion("")
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}

func waitEstablished(ctx context.Context, c client.Client, crds []*unstructured.Unstructured) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, want := range crds {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: want.GetName()}, &crd); err != nil {
				last = err
				return false, nil //nolint:nilerr // polled again; the last error is returned on timeout
			}
			established := false
			for _, cond := range crd.Status.Conditions {
				established = established || (cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue)
			}
			if !established {
				last = fmt.Errorf("CRD %s is not Established yet", crd.Name)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return errors.Join(fmt.Errorf("waiting for CRDs: %w", err), last)
	}
	return nil
}
