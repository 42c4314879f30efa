// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package mdns speaks multicast DNS (RFC 6762) on one named interface: a
// Responder answers queries for this cluster's DNS-SD instance and announces
// and withdraws it, and a Browser queries for other clusters' instances.
// Both share a Conn, which reads every packet once and hands queries to the
// responder and responses to the browser, like a mux.
//
// The socket is bound to the mDNS group address with SO_REUSEPORT, so
// several clusters on one host (the playground) each get every packet; it
// joins the group and sends only on the named interface, with that
// interface's own address as source (IP_MULTICAST_IF with ip_mreqn), and
// IP_MULTICAST_ALL is off so that memberships of other sockets do not leak
// in. Packets that arrive on another interface are ignored.
//
// The messages are github.com/miekg/dns messages; the records come from
// package dnssd. Anything malformed is dropped and counted, never trusted.
package mdns
