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
//
// serve echoes the body of a POST (up to 64 MiB). The image also has the
// probe as /cat, /test and /tar (it acts by the name it is called by), as
// much of them as kubectl's verbs call in a container: cat (standard
// input to standard output: kubectl run -i, attach), test -d and -e, tar
// cf - PATH and tar -xmf - [-C DIR] (kubectl cp).
package main

import (
	"archive/tar"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	name := filepath.Base(os.Args[0])
	var err error
	switch name {
	case "cat":
		_, err = io.Copy(os.Stdout, os.Stdin)
	case "test":
		if !test(os.Args[1:]) {
			os.Exit(1)
		}
	case "tar":
		err = tarCommand(os.Args[1:], os.Stdin, os.Stdout)
	default:
		name, err = "probe", run(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 3 && args[0] == "serve":
		text := args[2]
		srv := &http.Server{Addr: args[1], ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxEcho))
				if err != nil {
					http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
					return
				}
				_, _ = w.Write(body)
				return
			}
			if n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/bytes/")); err == nil && n >= 0 && n <= 1<<20 {
				// Large answers: packets that need the tunnel's MTU and
				// MSS right.
				_, _ = io.WriteString(w, strings.Repeat("x", n))
				return
			}
			_, _ = io.WriteString(w, text)
		})}
		// Listen before saying so: tests read this line as the sign
		// that the port takes connections.
		ln, err := net.Listen("tcp", args[1])
		if err != nil {
			return err
		}
		fmt.Println("serving on", args[1])
		return srv.Serve(ln)
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

// maxEcho bounds the body serve echoes.
const maxEcho = 64 << 20

// test is test(1)'s -d and -e: whether the path is a directory, or is.
func test(args []string) bool {
	if len(args) != 2 {
		return false
	}
	fi, err := os.Stat(args[1])
	switch args[0] {
	case "-d":
		return err == nil && fi.IsDir()
	case "-e":
		return err == nil
	}
	return false
}

// tarCommand is what kubectl cp runs: "cf - PATH" writes PATH (a file or
// a tree) as a tar to out, named without the leading "/" as GNU tar does;
// "-xmf - [-C DIR]" (other flags ignored) extracts in into DIR (or the
// working directory), refusing names that would leave it.
func tarCommand(args []string, in io.Reader, out io.Writer) error {
	switch {
	case len(args) == 3 && args[0] == "cf" && args[1] == "-":
		return writeTar(args[2], out)
	case len(args) >= 2 && slices.Contains(args, "-xmf"):
		dir := "."
		if i := slices.Index(args, "-C"); i >= 0 && i+1 < len(args) {
			dir = args[i+1]
		}
		return extractTar(in, dir)
	}
	return errors.New("usage: tar cf - PATH | tar -xmf - [-C DIR]")
}

func writeTar(root string, out io.Writer) error {
	tw := tar.NewWriter(out)
	err := filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() {
			return nil // sockets, devices, links: not copied
		}
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name = strings.TrimLeft(filepath.ToSlash(path), "/")
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.IsDir() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func extractTar(in io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(in)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(h.Name, "/")
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if d := filepath.Dir(name); d != "." {
				if err := root.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, os.FileMode(h.Mode&0o777))
			if err != nil {
				return err
			}
			_, err = io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}
