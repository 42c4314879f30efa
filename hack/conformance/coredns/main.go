// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Command coredns is CoreDNS with the plugins a cluster's DNS uses
// (kubernetes, cache, errors, health, ready, loadbalance, log), built from
// its Go module for the playground's cluster DNS (liqoctl playground up
// --cluster-dns-image): no image can be pulled here. The rest of CoreDNS's
// plugins (clouds' DNS services, etcd, ...) stay out of the binary.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }
