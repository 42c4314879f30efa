// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Command pause is the sandbox ("pause") container of the harness's real
// nodes: it holds a pod's namespaces, reaps the children it inherits as
// the pod's init process, and exits on SIGTERM or SIGINT. No image can be
// pulled here, so `make pause-image` builds it into an image with
// cmd/images, imported into each node's containerd.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
