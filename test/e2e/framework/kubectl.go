// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/liqo-go/liqo/internal/playground"
)

// CheckAttach runs `kubectl attach` on m for pod of ns, which runs (kwok)
// in provider, and checks it shows what the container writes: kwok shows
// what is written to provider's KwokAttachFile once attach has started,
// so a line is written (a local file, bounded) until one is seen.
func CheckAttach(t *testing.T, m *playground.Member, ns, pod string, provider *playground.Member) {
	t.Helper()
	lines := KubectlStream(t, m, "--namespace", ns, "attach", pod)
	want := "attached in " + provider.Name
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		f, err := os.OpenFile(provider.KwokAttachFile(), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = fmt.Fprintf(f, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), want)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("kubectl attach %s ended without printing %q", pod, want)
			}
			if strings.TrimSpace(line) == want {
				return
			}
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatalf("kubectl attach %s printed no %q within 30 s", pod, want)
}

// CheckPortForward runs `kubectl port-forward` on m to port 8080 of pod
// of ns, whose every port echoes (kwok's cat), sends size random bytes
// through it on loopback, and checks the same come back.
func CheckPortForward(t *testing.T, m *playground.Member, ns, pod string, size int) {
	t.Helper()
	lines := KubectlStream(t, m, "--namespace", ns, "port-forward", "pod/"+pod, "--address", "127.0.0.1", ":8080")
	port := ForwardedPort(t, lines, 8080)
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	conn, err := dialer.DialContext(t.Context(), "tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, size)
	if _, err := rand.Read(payload); err != nil {
		t.Fatal(err)
	}
	written := make(chan error, 1)
	go func() { _, err := conn.Write(payload); written <- err }()
	back := make([]byte, len(payload))
	if _, err := io.ReadFull(conn, back); err != nil {
		t.Fatalf("reading the echo of %d bytes through the port-forward: %v", size, err)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, payload) {
		t.Fatalf("the %d bytes that came back through the port-forward differ from those sent", size)
	}
}

// ForwardedPort returns the local port `kubectl port-forward` (whose
// output lines are lines) says it forwards to remote from, on 127.0.0.1.
func ForwardedPort(t testing.TB, lines <-chan string, remote int) string {
	t.Helper()
	forwarding := regexp.MustCompile(`^Forwarding from 127\.0\.0\.1:(\d+) -> ` + strconv.Itoa(remote) + `$`)
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("kubectl port-forward ended before forwarding")
			}
			if match := forwarding.FindStringSubmatch(strings.TrimSpace(line)); match != nil {
				return match[1]
			}
		case <-timeout:
			t.Fatal("kubectl port-forward did not say where it forwards from within 30 s")
		}
	}
}
