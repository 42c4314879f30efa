// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package mdns

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/liqo-go/liqo/internal/discovery/dnssd"
)

type collector struct {
	mu    sync.Mutex
	found map[string]bool
}

func (c *collector) Found(f dnssd.Found, _ net.Addr) {
	if f.Announcement != nil {
		c.mu.Lock()
		c.found[f.Announcement.ClusterID] = true
		c.mu.Unlock()
	}
}
func (c *collector) Dropped(*dnssd.DropError, net.Addr) {}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.found)
}

// TestManyAnnouncersOnLoopback: a browser finds every one of 20 instances
// announced at once on the loopback interface.
func TestManyAnnouncersOnLoopback(t *testing.T) {
	port := freeUDPPort(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	conn, err := Listen(t.Context(), "lo", port)
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{found: map[string]bool{}}
	browser := NewServer(conn, Options{Service: dnssd.DefaultService, Handler: col})
	browser.SetBrowsing(true)
	go func() { _ = browser.Serve(ctx) }()

	const n = 20
	for i := range n {
		c, err := Listen(t.Context(), "lo", port)
		if err != nil {
			t.Fatal(err)
		}
		s := NewServer(c, Options{Service: dnssd.DefaultService, Handler: &collector{found: map[string]bool{}}})
		go func() { _ = s.Serve(ctx) }()
		id := fmt.Sprintf("announcer-%d", i)
		inst := &dnssd.Instance{Name: id, Service: dnssd.DefaultService, Domain: "local.", Host: id, Port: 1,
			Announcement: dnssd.Announcement{ClusterID: id, AuthURL: "https://127.0.0.1:1"}}
		go func() { _ = s.Publish(ctx, inst) }()
	}
	deadline := time.Now().Add(5 * time.Second)
	for col.count() < n {
		if time.Now().After(deadline) {
			// Ask, as a browser does, and give the answers a second.
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := col.count(); got != n {
		_ = browser.Query()
		time.Sleep(time.Second)
		t.Fatalf("found %d of %d announcers (after a query: %d)", got, n, col.count())
	}
}

func freeUDPPort(t *testing.T) int {
	t.Helper()
	var lc net.ListenConfig
	c, err := lc.ListenPacket(t.Context(), "udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}
