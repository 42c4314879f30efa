// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package kubeclient builds the client every liqoctl verb talks to its
// cluster with, following kubectl's rules for finding the kubeconfig.
package kubeclient

import (
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
)

// New returns a client and its configuration for the kubeconfig at path;
// an empty path means $KUBECONFIG, then ~/.kube/config, as kubectl does.
// Requests time out after timeout (0: no limit), so that a command never
// hangs on an unreachable cluster.
func New(path string, timeout time.Duration) (client.Client, *rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	cfg.Timeout = timeout
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		return nil, nil, fmt.Errorf("creating a client for %s: %w", cfg.Host, err)
	}
	return c, cfg, nil
}
