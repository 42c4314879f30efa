// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DelayProxy is a TCP proxy on loopback whose forwarding the test slows
// down: every chunk a client sends waits Delay before it goes on to the
// target, so that a request's round trip grows by it. Put in front of a
// provider's API server (its controller manager's --api-server-url), it
// is latency on the path peers reach that API server by, and only on it.
// It can also cut that path for one process alone (SetRefused): one peer
// losing its path while the others keep theirs.
type DelayProxy struct {
	ln      net.Listener
	target  atomic.Pointer[string]
	delay   atomic.Int64
	refused atomic.Int64 // a process whose connections are cut; 0: none
	mu      sync.Mutex
	closed  bool
	conns   map[net.Conn]struct{}
	// accepted are the clients' connections, each with its upstream.
	accepted map[net.Conn]net.Conn
	wg       sync.WaitGroup
}

// NewDelayProxy listens on a loopback port; SetTarget says where to.
func NewDelayProxy() (*DelayProxy, error) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &DelayProxy{ln: ln, conns: map[net.Conn]struct{}{}, accepted: map[net.Conn]net.Conn{}}
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

// SetRefused cuts the path of process pid (0: of none) through the
// proxy: its connections are closed, and those it opens closed as soon as
// accepted, as a path that fails between that process and the target;
// every other process's still works. A connection's process is found in
// /proc (its socket among the process's file descriptors): the clients
// must be on this host, as on loopback they are.
func (p *DelayProxy) SetRefused(pid int) {
	p.refused.Store(int64(pid))
	if pid == 0 {
		return
	}
	p.mu.Lock()
	var cut []net.Conn
	for c, up := range p.accepted {
		if ownedBy(c, pid) {
			cut = append(cut, c, up)
		}
	}
	p.mu.Unlock()
	for _, c := range cut {
		_ = c.Close()
	}
}

// ownedBy says whether the client end of c, a connection the proxy
// accepted, is a socket of process pid.
func ownedBy(c net.Conn, pid int) bool {
	client, ok1 := c.RemoteAddr().(*net.TCPAddr)
	proxy, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return false
	}
	inode, err := socketInode(client, proxy)
	if err != nil {
		return false
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	want := "socket:[" + inode + "]"
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && l == want {
			return true
		}
	}
	return false
}

// socketInode is the inode of the IPv4 TCP socket bound to local and
// connected to remote, from /proc/net/tcp (addresses as the kernel prints
// them there: the 32-bit address in host order, little-endian here, and
// the port, in hex).
func socketInode(local, remote *net.TCPAddr) (string, error) {
	hex := func(a *net.TCPAddr) string {
		ip := a.IP.To4()
		if ip == nil {
			return ""
		}
		return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], a.Port)
	}
	l, r := hex(local), hex(remote)
	if l == "" || r == "" {
		return "", errors.New("not an IPv4 connection")
	}
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == l && f[2] == r {
			return f[9], nil
		}
	}
	return "", fmt.Errorf("no socket %s -> %s in /proc/net/tcp", local, remote)
}

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
		if pid := p.refused.Load(); target == nil || (pid != 0 && ownedBy(c, int(pid))) {
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

// track remembers a client's connection and its upstream, false when
// the proxy is closing.
func (p *DelayProxy) track(client, up net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[client], p.conns[up] = struct{}{}, struct{}{}
	p.accepted[client] = up
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
		delete(p.accepted, dst)
		delete(p.accepted, src)
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
