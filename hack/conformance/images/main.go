// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Command images builds the container images the conformance suite runs,
// under the names the suite gives them (e2e.test --list-images), since no
// image can be pulled here: agnhost from its Go package (the same
// k8s.io/kubernetes version as the suite), busybox from Debian's
// busybox-static, and the tools the suite's commands call inside agnhost
// (curl, dig, getent, ss) from the host's Debian packages with the
// libraries they link. Images the suite only needs as "a web server on
// port 80" (nginx, kitten, nautilus) are agnhost's netexec there, and
// pause is agnhost's pause. One more is not the suite's: CoreDNS (a
// static build of ./coredns), the playground's cluster DNS (liqoctl
// playground up --cluster-dns-image CoreDNSImage).
//
//	images --agnhost FILE --coredns FILE --out FILE
//
// writes one Docker archive holding every image (their layers shared), which
// `ctr images import` reads.
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// hostTools are the programs the suite's commands run inside agnhost
// (upstream installs them with apk): curl and dig by Services and DNS,
// getent by DNS, ss by NodePort tests, OpenBSD's nc (busybox's lacks -v
// and -z) by the Services' reachability checks.
// bash is the images' sh: busybox-static's ash (1.35) drops environment
// variables whose names are not shell names (data-1), which the envFrom
// specs expect a container's env to show, and upstream's busybox keeps.
var hostTools = []string{"curl", "dig", "getent", "ss", "nc", "bash"}

// printenv is coreutils' printenv, which busybox-static lacks, as a
// script: the values of the variables named (exit 1 if one is unset), or
// the whole environment.
const printenv = `#!/bin/sh
[ $# -eq 0 ] && exec env
rc=0
for v in "$@"; do
  if eval "[ -n \"\${$v+set}\" ]"; then eval "printf '%s\n' \"\$$v\""; else rc=1; fi
done
exit $rc
`

// image is one name the suite uses and what stands behind it.
type image struct {
	ref        string
	layers     []string // of "base", "busybox", "tools", "agnhost", "coredns"
	entrypoint []string
	cmd        []string
	user       string
}

const (
	e2eRegistry = "registry.k8s.io/e2e-test-images/"
	// CoreDNSImage names the CoreDNS image, at the version of the
	// module ./coredns builds (hack/conformance/go.mod).
	CoreDNSImage = "registry.k8s.io/coredns/coredns:v1.15.0"
	webserver    = "--http-port=80"
)

var images = []image{
	{ref: e2eRegistry + "agnhost:2.66.1", layers: []string{"base", "busybox", "tools", "agnhost"}, entrypoint: []string{"/agnhost"}, cmd: []string{"pause"}},
	{ref: e2eRegistry + "agnhost:2.55", layers: []string{"base", "busybox", "tools", "agnhost"}, entrypoint: []string{"/agnhost"}, cmd: []string{"pause"}},
	{ref: e2eRegistry + "busybox:1.37.0-2", layers: []string{"base", "busybox", "tools"}, cmd: []string{"sh"}},
	{ref: e2eRegistry + "busybox:1.36.1-1", layers: []string{"base", "busybox", "tools"}, cmd: []string{"sh"}},
	{ref: e2eRegistry + "nginx:1.27.0-2", layers: []string{"base", "busybox", "tools", "agnhost"}, entrypoint: []string{"/agnhost", "netexec", webserver, "--udp-port=-1"}},
	{ref: e2eRegistry + "nginx:1.28.0-2", layers: []string{"base", "busybox", "tools", "agnhost"}, entrypoint: []string{"/agnhost", "netexec", webserver, "--udp-port=-1"}},
	{ref: e2eRegistry + "kitten:1.8", layers: []string{"base", "busybox", "tools", "agnhost"}, entrypoint: []string{"/agnhost", "netexec", webserver, "--udp-port=-1"}},
	{ref: e2eRegistry + "nautilus:1.8", layers: []string{"base", "busybox", "tools", "agnhost"}, entrypoint: []string{"/agnhost", "netexec", webserver, "--udp-port=-1"}},
	// The DNS specs' glibc querier runs dig and getent from a shell: the
	// tools layer has both, with the host's glibc.
	{ref: e2eRegistry + "glibc-dns-testing:2.1.1", layers: []string{"base", "busybox", "tools"}, cmd: []string{"sh"}},
	{ref: e2eRegistry + "nonroot:1.5", layers: []string{"base", "busybox", "tools"}, cmd: []string{"sh"}, user: "1234"},
	{ref: e2eRegistry + "nonewprivs:1.4", layers: []string{"base", "busybox", "agnhost"}, entrypoint: []string{"/agnhost", "nonewprivs"}},
	{ref: "registry.k8s.io/pause:3.10.2", layers: []string{"base", "agnhost"}, entrypoint: []string{"/agnhost", "pause"}},
	{ref: CoreDNSImage, layers: []string{"base", "coredns"}, entrypoint: []string{"/coredns"}},
}

func main() {
	agnhost := flag.String("agnhost", "", "the agnhost binary, static (required)")
	coredns := flag.String("coredns", "", "the coredns binary (./coredns), static (required)")
	out := flag.String("out", "", "the archive to write (required)")
	flag.Parse()
	if *agnhost == "" || *coredns == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: images --agnhost FILE --coredns FILE --out FILE")
		os.Exit(2)
	}
	if err := run(*agnhost, *coredns, *out); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(agnhost, coredns, out string) error {
	layers := map[string]v1.Layer{}
	var err error
	if layers["base"], err = layer(baseEntries()); err != nil {
		return err
	}
	bb, err := busyboxEntries()
	if err != nil {
		return err
	}
	if layers["busybox"], err = layer(bb); err != nil {
		return err
	}
	tools, err := toolEntries(hostTools)
	if err != nil {
		return err
	}
	if layers["tools"], err = layer(tools); err != nil {
		return err
	}
	ag, err := agnhostEntries(agnhost)
	if err != nil {
		return err
	}
	if layers["agnhost"], err = layer(ag); err != nil {
		return err
	}
	cd, err := os.ReadFile(coredns)
	if err != nil {
		return err
	}
	if layers["coredns"], err = layer([]entry{{name: "coredns", mode: 0o755, data: cd}}); err != nil {
		return err
	}
	refs := map[name.Reference]v1.Image{}
	for _, im := range images {
		img := empty.Image
		for _, l := range im.layers {
			if img, err = mutate.AppendLayers(img, layers[l]); err != nil {
				return err
			}
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = "linux", runtime.GOARCH // the host's programs, as this one
		cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.User = im.entrypoint, im.cmd, im.user
		cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return err
		}
		ref, err := name.NewTag(im.ref)
		if err != nil {
			return err
		}
		refs[ref] = img
		fmt.Println(im.ref)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, refs); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// agnhostEntries are what upstream's agnhost image adds to its base: the
// binary (also as agnhost-2, for the entrypoint tests), porter's TLS pair
// at / (test-webserver serves /localhost.crt as the StatefulSet specs'
// readiness probe) and netexec's /uploads.
func agnhostEntries(bin string) ([]entry, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	dir, err := exec.CommandContext(context.TODO(), "go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	if err != nil {
		return nil, fmt.Errorf("finding the k8s.io/kubernetes module: %w", err)
	}
	porter := filepath.Join(strings.TrimSpace(string(dir)), "test", "images", "agnhost", "porter")
	es := []entry{{name: "agnhost", mode: 0o755, data: data}, {name: "agnhost-2", link: "agnhost"}, {name: "uploads/", mode: 0o755, dir: true}}
	for _, f := range []string{"localhost.crt", "localhost.key"} {
		b, err := os.ReadFile(filepath.Join(porter, f))
		if err != nil {
			return nil, err
		}
		es = append(es, entry{name: f, mode: 0o644, data: b})
	}
	return es, nil
}

type entry struct {
	name, link string
	mode       int64
	dir        bool
	data       []byte
}

func baseEntries() []entry {
	return []entry{
		{name: "etc/", mode: 0o755, dir: true},
		// The user and group agnhost's image defines, which the
		// SupplementalGroups specs look for.
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/bin/sh\n" +
			"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nuser-defined-in-image:x:1000:\n" +
			"group-defined-in-image:x:50000:user-defined-in-image\nnogroup:x:65534:\n")},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("passwd: files\ngroup: files\nhosts: files dns\n")},
		{name: "root/", mode: 0o700, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "bin/", mode: 0o755, dir: true},
		{name: "sbin/", mode: 0o755, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/bin/", mode: 0o755, dir: true},
		{name: "usr/sbin/", mode: 0o755, dir: true},
	}
}

// busyboxEntries are Debian's static busybox and a link for each applet
// at the path busybox gives it.
func busyboxEntries() ([]entry, error) {
	path, err := exec.LookPath("busybox")
	if err != nil {
		return nil, fmt.Errorf("busybox (Debian's busybox-static): %w", err)
	}
	if o, err := exec.CommandContext(context.TODO(), "file", "-L", path).Output(); err == nil && !bytes.Contains(o, []byte("statically linked")) {
		return nil, fmt.Errorf("%s is not statically linked: install Debian's busybox-static", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	list, err := exec.CommandContext(context.TODO(), path, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox --list-full: %w", err)
	}
	es := []entry{{name: "bin/busybox", mode: 0o755, data: data}}
	sc := bufio.NewScanner(bytes.NewReader(list))
	for sc.Scan() {
		p := strings.TrimSpace(sc.Text())
		if p == "" || p == "bin/busybox" {
			continue
		}
		es = append(es, entry{name: p, link: "/bin/busybox"})
	}
	return es, sc.Err()
}

var lddLine = regexp.MustCompile(`(?:=>\s*)?(/\S+)\s+\(0x`)

// toolEntries are the host's programs and the shared libraries they load,
// each at the path the loader looks for it.
func toolEntries(tools []string) ([]entry, error) {
	files := map[string]bool{}
	var es []entry
	for _, t := range tools {
		path, err := exec.LookPath(t)
		if err != nil {
			return nil, fmt.Errorf("%s (its Debian package is missing): %w", t, err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		es = append(es, entry{name: "usr/bin/" + t, mode: 0o755, data: data})
		o, err := exec.CommandContext(context.TODO(), "ldd", path).Output()
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w", path, err)
		}
		for _, m := range lddLine.FindAllStringSubmatch(string(o), -1) {
			files[m[1]] = true
		}
	}
	if len(files) == 0 {
		return nil, errors.New("ldd named no library")
	}
	if o, _ := exec.CommandContext(context.TODO(), "nc", "-h").CombinedOutput(); !bytes.Contains(o, []byte("OpenBSD")) {
		return nil, errors.New("nc is not OpenBSD's netcat: install Debian's netcat-openbsd")
	}
	es = append(es, entry{name: "usr/bin/printenv", mode: 0o755, data: []byte(printenv)},
		entry{name: "bin/sh", link: "/usr/bin/bash"}, entry{name: "bin/bash", link: "/usr/bin/bash"})
	dirs := map[string]bool{}
	var paths []string
	for f := range files {
		paths = append(paths, f)
		for d := filepath.Dir(f); d != "/"; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	sort.Strings(paths)
	var ds []string
	for d := range dirs {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	var out []entry
	for _, d := range ds {
		if d == "/usr" || d == "/usr/bin" || d == "/bin" {
			continue // in the base layer
		}
		out = append(out, entry{name: strings.TrimPrefix(d, "/") + "/", mode: 0o755, dir: true})
	}
	for _, p := range paths {
		data, err := os.ReadFile(p) // through the links: the library itself
		if err != nil {
			return nil, err
		}
		out = append(out, entry{name: strings.TrimPrefix(p, "/"), mode: 0o755, data: data})
	}
	return append(out, es...), nil
}

// layer is a tar of entries, with fixed timestamps and root's ownership.
func layer(entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: epoch, Typeflag: tar.TypeReg, Size: int64(len(e.data)), Format: tar.FormatPAX}
		switch {
		case e.dir:
			h.Typeflag, h.Size = tar.TypeDir, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Mode, h.Size = tar.TypeSymlink, e.link, 0o777, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}
