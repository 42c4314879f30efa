// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package netcheck is what `liqoctl test network` runs in its pods, from
// the liqo-gateway image (`liqo-gateway check ...`): a server that answers
// with its name, and a client that asks each address given and prints a
// result per address, as JSON lines, with the round trip of the fastest of
// a few requests.
package netcheck

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Result is what the client prints for one URL.
type Result struct {
	URL     string        `json:"url"`
	OK      bool          `json:"ok"`
	Answer  string        `json:"answer,omitempty"`
	Latency time.Duration `json:"latency,omitempty"`
	Error   string        `json:"error,omitempty"`
}

// Bounds of the client: how long an address may take to answer at all
// (the tunnel, the Service's endpoints, may still be coming up), and how
// many requests time the round trip.
const (
	FirstAnswerWithin = 30 * time.Second
	timedRequests     = 5
)

// Run runs `check serve ADDR NAME` or `check get URL...` (http:// or
// dns://HOST:PORT/NAME URLs).
func Run(ctx context.Context, args []string, out io.Writer) error {
	switch {
	case len(args) == 3 && args[0] == "serve":
		name := args[2]
		srv := &http.Server{Addr: args[1], ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/bytes/")); err == nil && n >= 0 && n <= 1<<20 {
				_, _ = io.WriteString(w, strings.Repeat("x", n))
				return
			}
			_, _ = io.WriteString(w, name)
		})}
		go func() {
			<-ctx.Done()
			_ = srv.Close()
		}()
		fmt.Fprintln(out, "serving", name, "on", args[1])
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	case len(args) >= 2 && args[0] == "get":
		enc := json.NewEncoder(out)
		failed := false
		for _, url := range args[1:] {
			r := get(ctx, url)
			failed = failed || !r.OK
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		if failed {
			return errors.New("some addresses did not answer")
		}
		return nil
	}
	return errors.New("usage: check serve ADDR NAME | check get URL [URL]")
}

// ParseResults reads what `check get` printed (its pod's log): one Result
// per JSON line; any other line is skipped. A line may hold an answer of
// up to the 1 MiB the server sends.
func ParseResults(logs []byte) []Result {
	var out []Result
	sc := bufio.NewScanner(bytes.NewReader(logs))
	sc.Buffer(nil, 2<<20)
	for sc.Scan() {
		var r Result
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.URL != "" {
			out = append(out, r)
		}
	}
	return out
}

// get asks url until it answers (within FirstAnswerWithin), then times
// timedRequests more and keeps the fastest. A URL dns://HOST:PORT/NAME
// asks that DNS server for NAME's A records, over UDP: any response is an
// answer, its response code and addresses (`NOERROR 10.96.0.1`,
// `REFUSED`).
func get(ctx context.Context, url string) Result {
	c := &http.Client{Timeout: 3 * time.Second}
	once := func(ctx context.Context, url string) (string, time.Duration, error) { return once(ctx, c, url) }
	if strings.HasPrefix(url, "dns://") {
		once = onceDNS
	}
	r := Result{URL: url}
	deadline := time.Now().Add(FirstAnswerWithin)
	for {
		answer, _, err := once(ctx, url)
		if err == nil {
			r.OK, r.Answer = true, answer
			break
		}
		r.Error = err.Error()
		if time.Now().After(deadline) || ctx.Err() != nil {
			return r
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.Error = ""
	for range timedRequests {
		if _, d, err := once(ctx, url); err == nil && (r.Latency == 0 || d < r.Latency) {
			r.Latency = d
		}
	}
	return r
}

func once(ctx context.Context, c *http.Client, url string) (string, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	d := time.Since(start)
	if err != nil {
		return "", 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(body), d, nil
}

func onceDNS(ctx context.Context, rawURL string) (string, time.Duration, error) {
	u, err := neturl.Parse(rawURL)
	if err != nil {
		return "", 0, err
	}
	name := strings.TrimPrefix(u.Path, "/")
	if u.Host == "" || name == "" {
		return "", 0, fmt.Errorf("%s: want dns://HOST:PORT/NAME", rawURL)
	}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second}
	resp, d, err := c.ExchangeContext(ctx, q, u.Host)
	if err != nil {
		return "", 0, err
	}
	fields := []string{dns.RcodeToString[resp.Rcode]}
	var addrs []string
	for _, rr := range resp.Answer {
		if a, ok := rr.(*dns.A); ok {
			addrs = append(addrs, a.A.String())
		}
	}
	slices.Sort(addrs)
	return strings.Join(append(fields, addrs...), " "), d, nil
}
