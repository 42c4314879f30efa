// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package conformance builds bin/e2e.test: upstream Kubernetes' end-to-end
// suite, at the control plane's version, run against a consumer whose
// every test namespace is offloaded (make conformance). Only the groups
// the focus list reaches are linked in.
package conformance

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	testfixtures "k8s.io/kubernetes/test/fixtures"

	// The groups of the focus list.
	_ "k8s.io/kubernetes/test/e2e/apps"
	_ "k8s.io/kubernetes/test/e2e/common"
	_ "k8s.io/kubernetes/test/e2e/kubectl"
	_ "k8s.io/kubernetes/test/e2e/network"
	_ "k8s.io/kubernetes/test/e2e/node"

	// The framework's own set-up, as upstream's suite has it.
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
)

var (
	// mapping is the NamespaceOffloading's namespaceMappingStrategy.
	mapping = flag.String("liqo-namespace-mapping", "DefaultName", "namespaceMappingStrategy of the NamespaceOffloading each test namespace gets: DefaultName or EnforceSameName")
	// provider, when set, is the only provider the test namespaces go
	// to (their clusterSelector): a broker, for make conformance BROKER=1.
	provider = flag.String("liqo-provider", "", "offloading.liqo.io/remote-cluster-id of the only provider each test namespace goes to (default: every provider)")
	// offloadTimeout bounds the wait for a namespace's offloading.
	offloadTimeout = flag.Duration("liqo-offload-timeout", 2*time.Minute, "how long a test namespace's offloading may take to be Ready")
)

var namespaceOffloadings = schema.GroupVersionResource{Group: "offloading.liqo.io", Version: "v1alpha1", Resource: "namespaceoffloadings"}

// offloadedNamespace creates a test namespace as the framework does, then
// offloads it (its pods go to virtual nodes only) and waits for the
// offloading to be Ready, before the test's first pod.
func offloadedNamespace(ctx context.Context, baseName string, c clientset.Interface, labels map[string]string) (*corev1.Namespace, error) {
	ns, err := framework.CreateTestingNS(ctx, baseName, c, labels)
	if err != nil {
		return nil, err
	}
	cfg, err := framework.LoadConfig()
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	no := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "offloading.liqo.io/v1alpha1", "kind": "NamespaceOffloading",
		"metadata": map[string]any{"name": "offloading", "namespace": ns.Name},
		"spec":     map[string]any{"namespaceMappingStrategy": *mapping, "podOffloadingStrategy": "Remote"},
	}}
	if *provider != "" {
		spec, _ := no.Object["spec"].(map[string]any)
		spec["clusterSelector"] = map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{
			"key": "offloading.liqo.io/remote-cluster-id", "operator": "In", "values": []any{*provider},
		}}}}}
	}
	res := dyn.Resource(namespaceOffloadings).Namespace(ns.Name)
	if _, err := res.Create(ctx, no, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("offloading namespace %s: %w", ns.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, *offloadTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := res.Get(ctx, "offloading", metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // asked again until the timeout
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the offloading of namespace %s is not Ready: %w", ns.Name, err)
	}
	return ns, nil
}

func TestMain(m *testing.M) {
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(testfixtures.GetTestFixturesFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	framework.TestContext.CreateTestingNS = offloadedNamespace
	os.Exit(m.Run())
}

func TestE2E(t *testing.T) {
	e2e.RunE2ETests(t)
}
