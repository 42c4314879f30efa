// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestEgressProxy: a CONNECT to a loopback address is relayed both ways;
// anything else (another method, a host name, no port) is refused with 400
// and counted; an address with no namespace to reach it from is a 502.
func TestEgressProxy(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0") //nolint:noctx // a test listener
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	proxy := &egressProxy{underlay: "/nonexistent", underlayCIDR: netip.MustParsePrefix("10.254.0.0/16"),
		hostAddress: netip.MustParseAddr("10.254.3.1"), forwarded: map[string]bool{"10.254.3.1:6443": true}}
	l, err := net.Listen("tcp", "127.0.0.1:0") //nolint:noctx // a test listener
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()

	connect := func(request string) (*bufio.Reader, net.Conn) {
		t.Helper()
		c, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, request); err != nil {
			t.Fatal(err)
		}
		return bufio.NewReader(c), c
	}

	r, c := connect(fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", echo.Addr(), echo.Addr()))
	status, err := r.ReadString('\n')
	if err != nil || !strings.Contains(status, "200") {
		t.Fatalf("CONNECT to loopback: %q, %v", status, err)
	}
	if line, _ := r.ReadString('\n'); line != "\r\n" {
		t.Fatalf("unexpected header %q", line)
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadString('\n'); err != nil || got != "ping\n" {
		t.Errorf("relayed %q, %v", got, err)
	}
	c.Close()

	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n",
		"CONNECT kubernetes:443 HTTP/1.1\r\nHost: kubernetes:443\r\n\r\n",
		"CONNECT 127.0.0.1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
	} {
		r, c := connect(req)
		status, err := r.ReadString('\n')
		if err != nil || !strings.Contains(status, "400") {
			t.Errorf("%q: %q, %v; want 400", strings.SplitN(req, "\r\n", 2)[0], status, err)
		}
		c.Close()
	}
	if n := proxy.malformed.Load(); n != 3 {
		t.Errorf("%d malformed requests counted, want 3", n)
	}
	// The host's underlay address: a port no forward listens on is the
	// host loopback's; a forwarded one stays in the underlay (absent
	// here: a 502).
	_, echoPort, _ := net.SplitHostPort(echo.Addr().String())
	hosted := net.JoinHostPort("10.254.3.1", echoPort)
	r, c = connect(fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hosted, hosted))
	if status, err := r.ReadString('\n'); err != nil || !strings.Contains(status, "200") {
		t.Fatalf("CONNECT to the host address: %q, %v", status, err)
	}
	_, _ = r.ReadString('\n')
	if _, err := io.WriteString(c, "pong\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadString('\n'); err != nil || got != "pong\n" {
		t.Errorf("relayed from the host address %q, %v", got, err)
	}
	c.Close()
	r, c = connect("CONNECT 10.254.3.1:6443 HTTP/1.1\r\nHost: 10.254.3.1:6443\r\n\r\n")
	if status, err := r.ReadString('\n'); err != nil || !strings.Contains(status, "502") {
		t.Errorf("CONNECT to a forwarded port of the host address: %q, %v; want 502 (dialled in the absent underlay)", status, err)
	}
	c.Close()

	r, c = connect("CONNECT 10.96.0.1:443 HTTP/1.1\r\nHost: 10.96.0.1:443\r\n\r\n")
	if status, err := r.ReadString('\n'); err != nil || !strings.Contains(status, "502") {
		t.Errorf("CONNECT with no node namespace: %q, %v; want 502", status, err)
	}
	c.Close()
}
