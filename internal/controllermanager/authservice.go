// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package controllermanager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=services,verbs=get
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list

// authURLOfService returns the URL peers reach the auth service at, from
// the Service in front of it: a load balancer's address, or a node's
// address and the node port, or (reachable from inside the cluster only)
// the cluster IP. It waits, until ctx ends, for a load balancer to get an
// address.
func authURLOfService(ctx context.Context, c client.Reader, namespace, name string) (string, error) {
	log := ctrl.Log.WithName("setup")
	var authURL string
	var last error
	logged := time.Time{}
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		var svc corev1.Service
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &svc); err != nil {
			last = fmt.Errorf("reading the auth Service %s/%s: %w", namespace, name, err)
		} else {
			authURL, last = serviceURL(ctx, c, &svc)
		}
		if last == nil {
			return true, nil
		}
		if time.Since(logged) > 10*time.Second {
			log.Info("Waiting for the auth Service's address", "service", namespace+"/"+name, "reason", last.Error())
			logged = time.Now()
		}
		return false, nil
	})
	if err != nil {
		return "", errors.Join(err, last)
	}
	return authURL, nil
}

// serviceURL is the https URL of svc's first port as seen from outside
// the cluster where its type allows it.
func serviceURL(ctx context.Context, c client.Reader, svc *corev1.Service) (string, error) {
	if len(svc.Spec.Ports) == 0 {
		return "", fmt.Errorf("service %s/%s has no port", svc.Namespace, svc.Name)
	}
	port := svc.Spec.Ports[0]
	url := func(host string, port int32) string {
		return "https://" + net.JoinHostPort(host, strconv.Itoa(int(port)))
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeLoadBalancer:
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				return url(in.IP, port.Port), nil
			}
			if in.Hostname != "" {
				return url(in.Hostname, port.Port), nil
			}
		}
		return "", errors.New("the load balancer has no address yet")
	case corev1.ServiceTypeNodePort:
		if port.NodePort == 0 {
			return "", errors.New("no node port allocated yet")
		}
		host, err := nodeAddress(ctx, c)
		if err != nil {
			return "", err
		}
		return url(host, port.NodePort), nil
	default:
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
			return "", fmt.Errorf("service %s/%s has no cluster IP", svc.Namespace, svc.Name)
		}
		return url(svc.Spec.ClusterIP, port.Port), nil
	}
}

// nodeAddress is the address of a Ready node peers can reach: its
// external IP if it has one, else its internal IP; of the first such node
// by name, so that restarts announce the same address. Virtual nodes are
// not nodes of this cluster.
func nodeAddress(ctx context.Context, c client.Reader) (string, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return "", fmt.Errorf("listing nodes: %w", err)
	}
	slices.SortFunc(nodes.Items, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, want := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
		for i := range nodes.Items {
			n := &nodes.Items[i]
			if !nodeReady(n) || n.Spec.Unschedulable || n.Labels[offloadingv1alpha1.VirtualNodeLabel] == offloadingv1alpha1.VirtualNodeValue {
				continue
			}
			for _, a := range n.Status.Addresses {
				if a.Type == want && a.Address != "" {
					return a.Address, nil
				}
			}
		}
	}
	return "", errors.New("no Ready node has an address")
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
