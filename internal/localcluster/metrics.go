// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MetricsServer is the binary StartMetricsServer runs (the tools
// module's sigs.k8s.io/metrics-server).
const MetricsServer = "metrics-server"

// metricsAPIService is the APIService metrics-server serves.
const metricsAPIService = "v1beta1.metrics.k8s.io"

// StartMetricsServer runs metrics-server for the cluster, as a process on
// 127.0.0.1 beside the control plane, and registers it with the API
// server's aggregation layer (the APIService v1beta1.metrics.k8s.io, whose
// Service is an ExternalName of 127.0.0.1: the API server, on the host,
// reaches it on loopback). It scrapes every node's kubelet API at the
// node's InternalIP and status port, with the admin's credentials, every
// 10 s, and returns once the metrics API answers. It runs only where every
// node is on loopback (kwok's, and the virtual nodes of a playground
// without real nodes): a process on the host must not dial a real node's
// address, which the host does not route. It stops with the cluster, or
// with StopMetricsServer; calling it again while it runs does nothing.
func (c *Cluster) StartMetricsServer(ctx context.Context) error {
	if len(c.realNodes) > 0 {
		return fmt.Errorf("cluster %s has real nodes, which metrics-server on the host cannot reach", c.Name)
	}
	cs, err := c.Client()
	if err != nil {
		return err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if ip := net.ParseIP(a.Address); a.Type == corev1.NodeInternalIP && (ip == nil || !ip.IsLoopback()) {
				return fmt.Errorf("node %s is at %s: metrics-server on the host scrapes nodes on loopback only", n.Name, a.Address)
			}
		}
	}
	if c.process(MetricsServer) != nil {
		return nil
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	p, err := c.launch(MetricsServer, []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--authentication-kubeconfig=" + c.KubeconfigPath,
		"--authorization-kubeconfig=" + c.KubeconfigPath,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(c.Dir, "pki", "metrics-server-generated"),
		"--kubelet-preferred-address-types=InternalIP",
		// The kubelets' serving certificates are their own (self-signed,
		// a virtual kubelet's signed by its controller manager).
		"--kubelet-insecure-tls",
		"--metric-resolution=10s",
		"--kubelet-request-timeout=5s",
		// Each virtual node has a port of its own.
		"--kubelet-use-node-status-port",
		"--v=1",
	})
	if err != nil {
		return err
	}
	if err := c.registerMetricsServer(ctx, p, port); err != nil {
		_ = c.StopMetricsServer(context.WithoutCancel(ctx))
		return err
	}
	return nil
}

// registerMetricsServer registers metrics-server, on port, with the
// aggregation layer and waits until the metrics API answers.
func (c *Cluster) registerMetricsServer(ctx context.Context, p *Process, port int) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: metricsServerNamespace, Name: MetricsServer},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1"},
	}
	if _, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	apiService, err := json.Marshal(map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": metricsAPIService},
		"spec": map[string]any{
			"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
			"service": map[string]any{"namespace": svc.Namespace, "name": svc.Name, "port": port},
			// metrics-server serves a certificate it made itself.
			"insecureSkipTLSVerify": true,
		},
	})
	if err != nil {
		return err
	}
	if err := cs.Discovery().RESTClient().Post().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices").
		SetHeader("Content-Type", "application/json").Body(apiService).Do(ctx).Error(); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating APIService %s: %w", metricsAPIService, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return waitFor(ctx, p, func() bool {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes").DoRaw(ctx)
		return err == nil
	})
}

const metricsServerNamespace = "kube-system"

// StopMetricsServer stops what StartMetricsServer started and removes its
// APIService and Service.
func (c *Cluster) StopMetricsServer(ctx context.Context) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	var errs []error
	if err := cs.Discovery().RESTClient().Delete().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices", metricsAPIService).Do(ctx).Error(); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting APIService %s: %w", metricsAPIService, err))
	}
	if err := cs.CoreV1().Services(metricsServerNamespace).Delete(ctx, MetricsServer, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting Service %s/%s: %w", metricsServerNamespace, MetricsServer, err))
	}
	if c.process(MetricsServer) != nil {
		errs = append(errs, c.StopProcess(MetricsServer))
	}
	return errors.Join(errs...)
}
