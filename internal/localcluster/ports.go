// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package localcluster

import (
	"fmt"
	"net"
	"sync"
)

// portAllocator hands out free loopback ports. A port is free when the
// kernel gives it to a listener; remembering what was handed out keeps two
// clusters starting in parallel in this process from getting the same one
// between the probe and the component binding it.
type portAllocator struct {
	mu     sync.Mutex
	handed map[int]bool
}

var ports = &portAllocator{handed: map[int]bool{}}

func (a *portAllocator) get() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0") //nolint:noctx // a bind on loopback, nothing to wait for
		if err != nil {
			return 0, fmt.Errorf("finding a free loopback port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !a.handed[port] {
			a.handed[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free loopback port after 100 tries")
}

// FreePort returns a loopback TCP port that nothing listens on and that this
// process has not handed out before.
func FreePort() (int, error) {
	return ports.get()
}
