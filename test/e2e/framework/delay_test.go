// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"bufio"
	"context"
	"net"
	"os"
	"testing"
	"time"
)

// TestDelayProxyRefused: the proxy cuts the path of the process it is
// told to, this one here, both its open connection and the next it
// opens; the path of another process (pid 1) cut instead, this one's
// works again.
func TestDelayProxyRefused(t *testing.T) {
	echo, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
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
			go func() {
				defer c.Close()
				s := bufio.NewScanner(c)
				for s.Scan() {
					if _, err := c.Write(append(s.Bytes(), '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	p, err := NewDelayProxy()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetTarget(echo.Addr().String())

	dial := func() (*bufio.Reader, net.Conn) {
		t.Helper()
		c, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return bufio.NewReader(c), c
	}
	// roundTrip says whether a line sent through c comes back.
	roundTrip := func(r *bufio.Reader, c net.Conn) bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		deadline, _ := ctx.Deadline()
		_ = c.SetDeadline(deadline)
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return false
		}
		line, err := r.ReadString('\n')
		return err == nil && line == "ping\n"
	}

	r, c := dial()
	if !roundTrip(r, c) {
		t.Fatal("no echo through the proxy before any path is cut")
	}
	p.SetRefused(os.Getpid())
	if roundTrip(r, c) {
		t.Error("this process's open connection still carries after its path was cut")
	}
	if r2, c2 := dial(); roundTrip(r2, c2) {
		t.Error("a new connection of this process carried after its path was cut")
	}
	p.SetRefused(1)
	if r3, c3 := dial(); !roundTrip(r3, c3) {
		t.Error("this process's path cut although another process's is cut instead")
	}
	p.SetRefused(0)
	if r4, c4 := dial(); !roundTrip(r4, c4) {
		t.Error("this process's path cut although none is")
	}
}
