// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Command probe is the workload of the harness's real-node tests, built
// into the image liqo.test/probe (no image can be pulled here):
//
//	probe serve ADDR TEXT   answers every HTTP request with TEXT, but
//	                        /bytes/N, answered with N bytes
//	probe get URL...        prints the body of each URL on a line,
//	                        retrying each for a minute
//	probe api               prints the API server's version, reached as a
//	                        pod does: the kubernetes Service, the pod's
//	                        ServiceAccount token and CA
package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 3 && args[0] == "serve":
		text := args[2]
		srv := &http.Server{Addr: args[1], ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/bytes/")); err == nil && n >= 0 && n <= 1<<20 {
				// Large answers: packets that need the tunnel's MTU and
				// MSS right.
				_, _ = io.WriteString(w, strings.Repeat("x", n))
				return
			}
			_, _ = io.WriteString(w, text)
		})}
		fmt.Println("serving on", args[1])
		return srv.ListenAndServe()
	case len(args) >= 2 && args[0] == "get":
		for _, url := range args[1:] {
			if err := get(&http.Client{Timeout: 5 * time.Second}, url, nil); err != nil {
				return err
			}
		}
		return nil
	case len(args) == 1 && args[0] == "api":
		const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
		token, err := os.ReadFile(sa + "token")
		if err != nil {
			return err
		}
		ca, err := os.ReadFile(sa + "ca.crt")
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return errors.New("no certificate in ca.crt")
		}
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		url := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) + "/version"
		return get(c, url, map[string]string{"Authorization": "Bearer " + string(token)})
	default:
		return errors.New("usage: probe serve ADDR TEXT | probe get URL... | probe api")
	}
}

// get prints the body of url once it answers 200, trying 60 times.
func get(c *http.Client, url string, header map[string]string) error {
	var last error
	for range 60 {
		req, err := http.NewRequest(http.MethodGet, url, nil) //nolint:noctx // bounded by the client's timeout
		if err != nil {
			return err
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusOK {
				fmt.Printf("%s\n", body)
				return nil
			}
			err = fmt.Errorf("%s: %s %s", url, resp.Status, body)
		}
		last = err
		fmt.Fprintln(os.Stderr, "retrying:", err)
		time.Sleep(time.Second)
	}
	return last
}
