// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package gateway is the data plane of the network fabric on one cluster:
// a WireGuard device in user space (wireguard-go over TUN) with a peer per
// remote cluster, routes to the peers' ranges through it, and nftables
// tables, programmed over netlink, that translate between this cluster's
// ranges and how each peer sees them (prefix NAT both ways), clamp TCP's
// MSS to the tunnel's MTU, and let a peer reach this cluster's pods and
// nothing else. A prober per peer times ICMP echoes through the tunnel.
//
// Everything happens in the network namespace of the process: in a
// cluster the gateway runs in its node's namespace (a host-network pod);
// tests run it in namespaces of their own (package gatewaytest). The
// address spaces are explained in docs/network.md.
//
// Each side decides how it sees its peer (package ipam) and tells the
// peer; the peer applies that decision to what it sends and receives. So
// a packet in the tunnel always carries its source as the receiver sees
// the sender, and its destination as the sender sees the receiver: the
// receiver translates the destination back to its own range before
// routing, and the replies follow the connection's translation.
package gateway
