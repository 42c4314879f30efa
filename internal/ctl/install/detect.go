// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package install

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Distributions liqoctl install knows, and what each implies when the
// cluster does not say.
var Distributions = map[string]Profile{
	// k3s runs its control plane inside one process, so nothing in the
	// API says its ranges; these are its defaults. Its kubeconfig names
	// 127.0.0.1, which peers cannot reach: a server node's address is used.
	"k3s": {PodCIDR: "10.42.0.0/16", ServiceCIDR: "10.43.0.0/16", AuthServiceType: "NodePort", APIServerFromNode: true},
	// kind's nodes are containers: its kubeconfig names a port forwarded
	// on the host, peers reach the control-plane node on its own address.
	"kind": {PodCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/16", AuthServiceType: "NodePort", APIServerFromNode: true, APIServerPort: "6443"},
	// kubeadm runs kube-controller-manager as a static pod whose flags
	// say the ranges.
	"kubeadm": {AuthServiceType: "NodePort"},
	// Anything else, managed clusters first: the ranges from the API
	// where it has them, the auth service behind a load balancer.
	"generic": {AuthServiceType: "LoadBalancer"},
}

// Profile is what a distribution implies.
type Profile struct {
	// PodCIDR and ServiceCIDR are the distribution's defaults, used when
	// the cluster does not say its ranges.
	PodCIDR, ServiceCIDR string
	// AuthServiceType is how peers reach the auth service by default.
	AuthServiceType string
	// APIServerFromNode: when the kubeconfig names a loopback address,
	// peers reach the API server on the control-plane node's address.
	APIServerFromNode bool
	// APIServerPort replaces the kubeconfig's port when the address is a
	// node's (kind forwards another port on the host).
	APIServerPort string
}

// detectedRanges says the cluster's pod and service CIDRs, and where each
// came from: kube-controller-manager's flags (kubeadm and most
// distributions that run it as a pod), the ServiceCIDR API for services,
// else the profile's defaults. Empty means unknown.
func detectedRanges(ctx context.Context, c client.Reader, p Profile) (pod, podFrom, svc, svcFrom string, err error) {
	flags, err := controllerManagerFlags(ctx, c)
	if err != nil {
		return "", "", "", "", err
	}
	pod, podFrom = firstCIDR(flags["--cluster-cidr"]), "kube-controller-manager --cluster-cidr"
	svc, svcFrom = firstCIDR(flags["--service-cluster-ip-range"]), "kube-controller-manager --service-cluster-ip-range"
	if svc == "" {
		var sc networkingv1.ServiceCIDR
		switch err := c.Get(ctx, client.ObjectKey{Name: "kubernetes"}, &sc); {
		case err == nil:
			svc, svcFrom = firstCIDR(strings.Join(sc.Spec.CIDRs, ",")), "ServiceCIDR kubernetes"
		case apierrors.IsNotFound(err), apierrors.IsForbidden(err), meta.IsNoMatchError(err):
			// An API server before 1.33, or no right to read it.
		default:
			return "", "", "", "", fmt.Errorf("reading ServiceCIDR kubernetes: %w", err)
		}
	}
	if pod == "" && p.PodCIDR != "" {
		pod, podFrom = p.PodCIDR, "the distribution's default"
	}
	if svc == "" && p.ServiceCIDR != "" {
		svc, svcFrom = p.ServiceCIDR, "the distribution's default"
	}
	return pod, podFrom, svc, svcFrom, nil
}

// controllerManagerFlags reads the --name=value flags of a
// kube-controller-manager pod in kube-system (the static pod of kubeadm
// and of distributions built like it). None found is not an error.
func controllerManagerFlags(ctx context.Context, c client.Reader) (map[string]string, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace("kube-system"), client.MatchingLabels{"component": "kube-controller-manager"}); err != nil {
		if apierrors.IsForbidden(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing kube-controller-manager pods: %w", err)
	}
	flags := map[string]string{}
	for _, pod := range pods.Items {
		for _, ctr := range pod.Spec.Containers {
			for _, arg := range slices.Concat(ctr.Command, ctr.Args) {
				if name, value, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(name, "--") {
					flags[name] = value
				}
			}
		}
	}
	return flags, nil
}

// firstCIDR returns the first valid network of a comma-separated list,
// IPv4 first (the fabric is IPv4 for now).
func firstCIDR(list string) string {
	var v6 string
	for s := range strings.SplitSeq(list, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			continue
		}
		if p.Addr().Is4() {
			return p.Masked().String()
		}
		if v6 == "" {
			v6 = p.Masked().String()
		}
	}
	return v6
}

// apiServerURL is the URL peers reach the API server at: the kubeconfig's
// server, unless it is a loopback address and the distribution says the
// control-plane node's address is the one to use. warning explains a URL
// peers on other machines cannot use.
func apiServerURL(ctx context.Context, c client.Reader, server string, p Profile) (u, warning string, err error) {
	parsed, err := url.Parse(server)
	if err != nil {
		return "", "", fmt.Errorf("the kubeconfig's server %q: %w", server, err)
	}
	if !isLoopback(parsed.Hostname()) {
		return strings.TrimSuffix(server, "/"), "", nil
	}
	if !p.APIServerFromNode {
		return strings.TrimSuffix(server, "/"), fmt.Sprintf("the kubeconfig's server %s is a loopback address: only peers on this machine reach it (pass --api-server-url)", server), nil
	}
	addr, err := controlPlaneAddress(ctx, c)
	if err != nil {
		return "", "", err
	}
	port := parsed.Port()
	if p.APIServerPort != "" {
		port = p.APIServerPort
	}
	if port == "" {
		port = "443"
	}
	return "https://" + net.JoinHostPort(addr, port), "", nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// controlPlaneAddress is the InternalIP of a control-plane node (k3s
// labels its servers so too), the first by name.
func controlPlaneAddress(ctx context.Context, c client.Reader) (string, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.HasLabels{"node-role.kubernetes.io/control-plane"}); err != nil {
		return "", fmt.Errorf("listing control-plane nodes: %w", err)
	}
	slices.SortFunc(nodes.Items, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				return a.Address, nil
			}
		}
	}
	return "", fmt.Errorf("no control-plane node has an InternalIP to reach the API server at: pass --api-server-url")
}
