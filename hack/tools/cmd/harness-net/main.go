// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Command harness-net joins a harness cluster's control plane, which runs
// on the host's loopback, to its real nodes, which run in network
// namespaces of their own. It never opens a socket on a real interface:
//
//   - --forward ADDR=TARGET listens on ADDR inside --underlay (the network
//     namespace the nodes are attached to) and relays each connection to
//     TARGET on the host's loopback: kubelets, kube-proxy and pods reach
//     the API server so.
//   - --egress SOCKET serves HTTP CONNECT on a Unix socket for the API
//     server's egress selector (the "cluster" egress: kubelets, webhooks,
//     pods and services). A loopback target is dialled on the host, a
//     target in --underlay-cidr inside the underlay namespace, anything
//     else (pod and service IPs) inside --node, the namespace of one of
//     the cluster's nodes, where its routes and kube-proxy's rules apply.
//     A target at --host-address (the cluster's own underlay address)
//     that no --forward listens on is dialled on the host's loopback at
//     the same port: a service of the host (a virtual kubelet's API)
//     then has an address the API server proxies to, as it proxies to no
//     loopback address.
//
// Malformed requests are answered with 400 and counted; every relay ends
// when either side closes.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

type forwards []string

func (f *forwards) String() string     { return strings.Join(*f, ",") }
func (f *forwards) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	var (
		fwd          forwards
		egress       string
		underlay     string
		node         string
		underlayCIDR string
		hostAddress  string
	)
	flag.Var(&fwd, "forward", "LISTEN=TARGET: listen on LISTEN in the underlay namespace, relay to TARGET on the host (repeatable)")
	flag.StringVar(&egress, "egress", "", "Unix socket to serve HTTP CONNECT on for the API server's egress selector")
	flag.StringVar(&underlay, "underlay", "", "path of the underlay network namespace (/run/netns/NAME)")
	flag.StringVar(&node, "node", "", "path of the network namespace of a node of the cluster")
	flag.StringVar(&underlayCIDR, "underlay-cidr", "", "addresses that live in the underlay namespace")
	flag.StringVar(&hostAddress, "host-address", "", "underlay address whose ports no --forward listens on are the host loopback's, for the egress proxy")
	// The harness finds its processes by the cluster directory in their
	// arguments (localcluster.Reap).
	flag.String("cluster-dir", "", "the cluster's directory; unused, names the process as the cluster's")
	flag.Parse()
	if err := run(fwd, egress, underlay, node, underlayCIDR, hostAddress); err != nil {
		log.Fatal(err)
	}
}

func run(fwd forwards, egress, underlay, node, underlayCIDR, hostAddress string) error {
	if underlay == "" {
		return errors.New("--underlay is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var wg sync.WaitGroup
	var closers []io.Closer
	for _, f := range fwd {
		listen, target, ok := strings.Cut(f, "=")
		if !ok {
			return fmt.Errorf("--forward %q: want LISTEN=TARGET", f)
		}
		var l net.Listener
		err := inNetns(underlay, func() (err error) {
			l, err = net.Listen("tcp", listen) //nolint:noctx // a listener, nothing to wait for
			return err
		})
		if err != nil {
			return fmt.Errorf("listening on %s in %s: %w", listen, underlay, err)
		}
		closers = append(closers, l)
		log.Printf("relaying %s (in %s) to %s", listen, underlay, target)
		wg.Go(func() { serveForward(l, target) })
	}
	if egress != "" {
		prefix, err := netip.ParsePrefix(underlayCIDR)
		if err != nil {
			return fmt.Errorf("--underlay-cidr: %w", err)
		}
		_ = os.Remove(egress)
		l, err := net.Listen("unix", egress) //nolint:noctx // a listener, nothing to wait for
		if err != nil {
			return err
		}
		if err := os.Chmod(egress, 0o600); err != nil {
			return err
		}
		e := &egressProxy{underlay: underlay, node: node, underlayCIDR: prefix, forwarded: map[string]bool{}}
		if hostAddress != "" {
			if e.hostAddress, err = netip.ParseAddr(hostAddress); err != nil {
				return fmt.Errorf("--host-address: %w", err)
			}
		}
		for _, f := range fwd {
			listen, _, _ := strings.Cut(f, "=")
			e.forwarded[listen] = true
		}
		srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
		closers = append(closers, srv)
		log.Printf("serving the egress proxy on %s", egress)
		wg.Go(func() { _ = srv.Serve(l) })
	}
	<-ctx.Done()
	for _, c := range closers {
		_ = c.Close()
	}
	wg.Wait()
	return nil
}

// inNetns runs f on a thread moved into the network namespace at path, so
// that the sockets f creates live there; the thread then returns.
func inNetns(path string, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer self.Close()
	target, err := os.Open(path)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("entering %s: %w", path, err)
	}
	ferr := f()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// This thread must not run anything else: leaving it locked
		// makes the runtime end it with the goroutine.
		runtime.LockOSThread()
		return errors.Join(ferr, fmt.Errorf("returning to the host namespace: %w", err))
	}
	return ferr
}

func serveForward(l net.Listener, target string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			d := net.Dialer{Timeout: 10 * time.Second}
			up, err := d.Dial("tcp", target) //nolint:noctx // bounded by the dialer's timeout
			if err != nil {
				log.Printf("relaying to %s: %v", target, err)
				return
			}
			defer up.Close()
			relay(c, up)
		}()
	}
}

// relay copies both ways until either side closes.
func relay(a, b net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
	<-done
}

type egressProxy struct {
	underlay, node string
	underlayCIDR   netip.Prefix
	hostAddress    netip.Addr
	forwarded      map[string]bool // the --forward listen addresses
	malformed      atomic.Int64
}

func (e *egressProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host, port, err := net.SplitHostPort(r.Host)
	addr, perr := netip.ParseAddr(host)
	if r.Method != http.MethodConnect || err != nil || perr != nil || port == "" {
		n := e.malformed.Add(1)
		log.Printf("refused %s %q (%d malformed requests so far)", r.Method, r.Host, n)
		http.Error(w, "CONNECT to an IP address and port only", http.StatusBadRequest)
		return
	}
	var up net.Conn
	d := net.Dialer{Timeout: 10 * time.Second}
	dial := func() (err error) {
		up, err = d.DialContext(r.Context(), "tcp", r.Host)
		return err
	}
	switch {
	case addr.IsLoopback():
		err = dial()
	case addr == e.hostAddress && !e.forwarded[r.Host]:
		up, err = d.DialContext(r.Context(), "tcp", net.JoinHostPort("127.0.0.1", port))
	case e.underlayCIDR.Contains(addr):
		err = inNetns(e.underlay, dial)
	case e.node != "":
		err = inNetns(e.node, dial)
	default:
		err = fmt.Errorf("no node namespace to reach %s from", addr)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "no hijacking", http.StatusInternalServerError)
		return
	}
	c, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	defer c.Close()
	defer up.Close()
	if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	if err := flushBuffered(buf.Reader, up); err != nil {
		return
	}
	relay(c, up)
}

// flushBuffered sends what the HTTP server read past the request.
func flushBuffered(r *bufio.Reader, up net.Conn) error {
	if n := r.Buffered(); n > 0 {
		data, err := r.Peek(n)
		if err != nil {
			return err
		}
		_, err = up.Write(data)
		return err
	}
	return nil
}
