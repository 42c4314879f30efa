// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package dnssd is the DNS-SD (RFC 6763) side of discovery, shared by the LAN
// (multicast DNS) and the WAN (unicast DNS): how a cluster's announcement is
// written as PTR, SRV, TXT and A records, how those records are read back
// and validated, and how a DNS domain is browsed for clusters.
//
// Record building and parsing are pure functions, kept apart from sockets:
// they are what the fuzz tests exercise. Anything that does not parse is
// reported as a *DropError with a reason, for the dropped-input metric.
package dnssd
