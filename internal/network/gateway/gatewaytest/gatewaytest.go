// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package gatewaytest runs gateways in network namespaces for tests and
// benchmarks: the test binary runs itself again inside a namespace as a
// gateway process, which takes configurations on its standard input and
// answers with its status. The gateway code is the one a cluster runs;
// only the source of its configuration differs. A test binary that uses
// Start calls Main first thing in its TestMain.
package gatewaytest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/liqo-go/liqo/internal/netlab"
	"github.com/liqo-go/liqo/internal/network/gateway"
)

// childEnv marks the test binary run as a gateway process.
const childEnv = "LIQO_GATEWAYTEST_CHILD"

type request struct {
	Apply  *gateway.Config `json:"apply,omitempty"`
	Status bool            `json:"status,omitempty"`
}

type response struct {
	Error  string          `json:"error,omitempty"`
	Status *gateway.Status `json:"status,omitempty"`
}

// Main runs the gateway process when the test binary was started as one,
// and exits; otherwise it returns at once.
func Main() {
	if os.Getenv(childEnv) == "" {
		return
	}
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{})
	os.Exit(serve(log, os.Stdin, os.Stdout))
}

func serve(log logr.Logger, in io.Reader, out io.Writer) int {
	g := gateway.New(log)
	dec, enc := json.NewDecoder(in), json.NewEncoder(out)
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			// The test closed our input (or died): remove everything.
			if err := g.Close(); err != nil {
				log.Error(err, "Removing the gateway")
				return 1
			}
			return 0
		}
		var resp response
		switch {
		case req.Apply != nil:
			if err := g.Apply(context.Background(), *req.Apply); err != nil {
				resp.Error = err.Error()
			}
		case req.Status:
			st, err := g.Status()
			if err != nil {
				resp.Error = err.Error()
			}
			resp.Status = &st
		}
		if err := enc.Encode(resp); err != nil {
			return 1
		}
	}
}

// Process is a gateway running in a namespace.
type Process struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	mu     sync.Mutex
	done   chan struct{}
	killed bool
}

// Start runs a gateway process in ns, stopped (and its data plane removed)
// when the test ends. Its log goes to the test's.
func Start(tb testing.TB, ns *netlab.Namespace) *Process {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name, self) //nolint:noctx // stopped by Stop or Kill, and killed with the test binary
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &Process{cmd: cmd, in: in, out: bufio.NewReader(out), done: make(chan struct{})}
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			tb.Logf("gateway in %s: %s", ns.Name, sc.Text())
		}
	}()
	go func() {
		<-logged
		_ = cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(func() {
		if err := p.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return p
}

func (p *Process) call(req request) (response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := json.Marshal(req)
	if err != nil {
		return response{}, err
	}
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		return response{}, fmt.Errorf("the gateway process is gone: %w", err)
	}
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		return response{}, fmt.Errorf("the gateway process is gone: %w", err)
	}
	var resp response
	if err := json.Unmarshal(line, &resp); err != nil {
		return response{}, err
	}
	if resp.Error != "" {
		return resp, errors.New(resp.Error)
	}
	return resp, nil
}

// Apply makes the gateway converge to cfg.
func (p *Process) Apply(cfg gateway.Config) error {
	_, err := p.call(request{Apply: &cfg})
	return err
}

// Status reads the gateway's status.
func (p *Process) Status() (gateway.Status, error) {
	resp, err := p.call(request{Status: true})
	if resp.Status == nil {
		return gateway.Status{}, err
	}
	return *resp.Status, err
}

// Stop closes the gateway's input: it removes its data plane and exits.
// It is killed if it has not within 10 s.
func (p *Process) Stop() error {
	_ = p.in.Close()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("the gateway process did not exit within 10 s of its input closing; killed")
	}
	if !p.killed && p.cmd.ProcessState != nil && !p.cmd.ProcessState.Success() {
		return fmt.Errorf("the gateway process ended with %s", p.cmd.ProcessState)
	}
	return nil
}

// Pid is the gateway process's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Kill kills the gateway with SIGKILL, as a crash would: its TUN interface
// goes with it, its nftables tables stay.
func (p *Process) Kill() {
	p.killed = true
	_ = p.cmd.Process.Kill()
	<-p.done
}
