// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DelayProxy is a TCP proxy on loopback whose forwarding the test slows
// down: every chunk a client sends waits Delay before it goes on to the
// target, so that a request's round trip grows by it. Put in front of a
// provider's API server (its controller manager's --api-server-url), it
// is latency on the path peers reach that API server by, and only on it.
type DelayProxy struct {
	ln     net.Listener
	target atomic.Pointer[string]
	delay  atomic.Int64
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// NewDelayProxy listens on a loopback port; SetTarget says where to.
func NewDelayProxy() (*DelayProxy, error) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &DelayProxy{ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is where the proxy listens (host:port).
func (p *DelayProxy) Addr() string { return p.ln.Addr().String() }

// SetTarget sets where new connections go (host:port).
func (p *DelayProxy) SetTarget(hostport string) { p.target.Store(&hostport) }

// SetDelay sets the delay added to every chunk from now on.
func (p *DelayProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Close stops the proxy and its connections.
func (p *DelayProxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *DelayProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		target := p.target.Load()
		if target == nil {
			_ = c.Close()
			continue
		}
		up, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(context.Background(), "tcp", *target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, up) {
			_, _ = c.Close(), up.Close()
			return
		}
		p.wg.Add(2)
		go p.pipe(up, c, true)
		go p.pipe(c, up, false)
	}
}

// track remembers a connection pair, false when the proxy is closing.
func (p *DelayProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies from src to dst, delaying each chunk when slow; it closes
// both ends when either does.
func (p *DelayProxy) pipe(dst, src net.Conn, slow bool) {
	defer p.wg.Done()
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); slow && d > 0 {
				time.Sleep(d) // the latency the proxy adds, not a synchronisation
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or closed: the other direction ends with it
		}
	}
}
