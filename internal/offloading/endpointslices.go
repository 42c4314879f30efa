// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/network/ipam"
)

// ValidateEndpointSlicePath is where the EndpointSlice webhook is served.
const ValidateEndpointSlicePath = "/validate-discovery-v1-endpointslice"

// EndpointSliceValidator bounds the addresses of the EndpointSlices a
// consumer's virtual kubelet writes here (the endpoints of its Services'
// copies): a consumer's own pods and external range, at the addresses
// this cluster reaches them at through the tunnel the two agreed on, and
// the pods it runs here, in the slice's namespace. Nothing else: a
// consumer that could name any address would have this cluster's
// Services send traffic to this cluster's own pods and nodes, or to
// another consumer's pods. The API server calls it for the virtual
// kubelets' writes alone (the webhook's match condition).
type EndpointSliceValidator struct {
	// Reader reads TunnelEndpoints and pods (a cache: a consumer's pods
	// are cached with their addresses).
	Reader client.Reader
	// Decoder decodes the slices.
	Decoder admission.Decoder
}

// Handle implements admission.Handler.
func (v *EndpointSliceValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	consumer, ok := strings.CutPrefix(req.UserInfo.Username, identity.VirtualKubeletUserPrefix)
	if !ok {
		return admission.Allowed("not a consumer's virtual kubelet")
	}
	if consumer == "" {
		return admission.Denied("a virtual kubelet's user names its consumer")
	}
	var es discoveryv1.EndpointSlice
	if err := v.Decoder.Decode(req, &es); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the EndpointSlice: %w", err))
	}
	if es.AddressType != discoveryv1.AddressTypeIPv4 {
		return admission.Denied(fmt.Sprintf("addressType: a consumer's EndpointSlices hold IPv4 addresses only, not %s", es.AddressType))
	}
	var ranges []netip.Prefix
	var tep netv1alpha1.TunnelEndpoint
	switch err := v.Reader.Get(ctx, client.ObjectKey{Name: consumer}, &tep); {
	case err == nil:
		for _, cidr := range []string{tep.Spec.RemoteSeenAs.PodCIDR, tep.Spec.RemoteSeenAs.ExternalCIDR} {
			if p, err := netip.ParsePrefix(cidr); err == nil {
				ranges = append(ranges, p.Masked())
			}
		}
	case client.IgnoreNotFound(err) != nil:
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading the network agreed with %s: %w", consumer, err))
	}
	var pods map[netip.Addr]bool // the addresses of the consumer's pods in the namespace, read once if needed
	for i, ep := range es.Endpoints {
		for j, a := range ep.Addresses {
			addr, err := netip.ParseAddr(a)
			if err != nil {
				return admission.Denied(fmt.Sprintf("endpoints[%d].addresses[%d]: %q is not an IP address", i, j, a))
			}
			if ipam.Within(netip.PrefixFrom(addr.Unmap(), 32), ranges) {
				continue
			}
			if pods == nil {
				if pods, err = v.podAddresses(ctx, req.Namespace, consumer); err != nil {
					return admission.Errored(http.StatusInternalServerError, err)
				}
			}
			if !pods[addr] {
				return admission.Denied(fmt.Sprintf("endpoints[%d].addresses[%d]: %s is neither in %s's ranges as this cluster reaches them (%s) nor the address of one of its pods in namespace %s",
					i, j, addr, consumer, describeRanges(ranges), req.Namespace))
			}
		}
	}
	return admission.Allowed("")
}

// podAddresses are the addresses of the pods consumer runs in namespace:
// not those of a pod that ended or is going, whose address the network
// may give another pod.
func (v *EndpointSliceValidator) podAddresses(ctx context.Context, namespace, consumer string) (map[netip.Addr]bool, error) {
	var list corev1.PodList
	if err := v.Reader.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer}); err != nil {
		return nil, fmt.Errorf("listing the pods of namespace %s: %w", namespace, err)
	}
	out := make(map[netip.Addr]bool, len(list.Items))
	for i := range list.Items {
		if p := &list.Items[i]; p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			continue
		}
		for _, ip := range list.Items[i].Status.PodIPs {
			if addr, err := netip.ParseAddr(ip.IP); err == nil {
				out[addr] = true
			}
		}
		if addr, err := netip.ParseAddr(list.Items[i].Status.PodIP); err == nil {
			out[addr] = true
		}
	}
	return out, nil
}

func describeRanges(ranges []netip.Prefix) string {
	if len(ranges) == 0 {
		return "no network agreed yet"
	}
	s := make([]string, len(ranges))
	for i, p := range ranges {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
