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

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
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
// node's InternalIP and status port every 10 s, and returns once the
// metrics API answers. It runs with the identity and rights of its
// upstream manifest (components.yaml): the token of the ServiceAccount
// kube-system/metrics-server, which it also calls the kubelets with. It runs only where every
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
	kubeconfig, err := c.metricsServerIdentity(ctx)
	if err != nil {
		_ = c.StopMetricsServer(context.WithoutCancel(ctx))
		return err
	}
	p, err := c.launch(MetricsServer, []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
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
		_ = c.StopMetricsServer(context.WithoutCancel(ctx))
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

// metricsServerRBAC names the ClusterRole and the bindings of
// metrics-server's ServiceAccount, as its upstream manifest does.
const (
	metricsServerRole       = "system:" + MetricsServer
	metricsServerDelegator  = MetricsServer + ":system:auth-delegator"
	metricsServerAuthReader = MetricsServer + "-auth-reader"
)

// metricsServerIdentity makes the ServiceAccount kube-system/metrics-server
// with the rights of metrics-server's upstream manifest (read nodes and
// pods, get nodes/metrics from the kubelets, delegate authentication and
// authorization, read the client CA), and returns the path of a
// kubeconfig with a token of it.
func (c *Cluster) metricsServerIdentity(ctx context.Context) (string, error) {
	cs, err := c.Client()
	if err != nil {
		return "", err
	}
	ns := metricsServerNamespace
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: MetricsServer}}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: MetricsServer}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: metricsServerRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	bindings := []*rbacv1.ClusterRoleBinding{
		{
			ObjectMeta: metav1.ObjectMeta{Name: metricsServerRole},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsServerRole},
			Subjects:   subjects,
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: metricsServerDelegator},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
			Subjects:   subjects,
		},
	}
	reader := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: metricsServerAuthReader},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
		Subjects:   subjects,
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating ServiceAccount %s/%s: %w", ns, sa.Name, err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating ClusterRole %s: %w", role.Name, err)
	}
	for _, b := range bindings {
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating ClusterRoleBinding %s: %w", b.Name, err)
		}
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, reader, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating RoleBinding %s/%s: %w", ns, reader.Name, err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, MetricsServer, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(24 * time.Hour / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", ns, MetricsServer, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.APIServerURL, CertificateAuthorityData: c.RESTConfig.CAData}
	cfg.AuthInfos[MetricsServer] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: MetricsServer}
	cfg.CurrentContext = c.Name
	path := filepath.Join(c.Dir, "metrics-server.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("writing metrics-server's kubeconfig: %w", err)
	}
	return path, nil
}

// StopMetricsServer stops what StartMetricsServer started and removes its
// APIService and Service.
func (c *Cluster) StopMetricsServer(ctx context.Context) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	var errs []error
	// The process first: it needs its rights until it ends.
	if c.process(MetricsServer) != nil {
		errs = append(errs, c.StopProcess(MetricsServer))
	}
	if err := cs.Discovery().RESTClient().Delete().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices", metricsAPIService).Do(ctx).Error(); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting APIService %s: %w", metricsAPIService, err))
	}
	if err := cs.CoreV1().Services(metricsServerNamespace).Delete(ctx, MetricsServer, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting Service %s/%s: %w", metricsServerNamespace, MetricsServer, err))
	}
	if err := cs.CoreV1().ServiceAccounts(metricsServerNamespace).Delete(ctx, MetricsServer, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting ServiceAccount %s/%s: %w", metricsServerNamespace, MetricsServer, err))
	}
	if err := cs.RbacV1().RoleBindings(metricsServerNamespace).Delete(ctx, metricsServerAuthReader, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting RoleBinding %s/%s: %w", metricsServerNamespace, metricsServerAuthReader, err))
	}
	for _, name := range []string{metricsServerRole, metricsServerDelegator} {
		if err := cs.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting ClusterRoleBinding %s: %w", name, err))
		}
	}
	if err := cs.RbacV1().ClusterRoles().Delete(ctx, metricsServerRole, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting ClusterRole %s: %w", metricsServerRole, err))
	}
	return errors.Join(errs...)
}
