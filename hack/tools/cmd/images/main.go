// Command images assembles the OCI images of the binaries that run in a
// cluster, without a container engine and without pulling anything: a base
// layer made here (a non-root user, /tmp, and the CA certificates of the
// Mozilla bundle this module pins), the static binary as a second layer,
// and a config naming it as the entrypoint, for each platform. Every
// timestamp is --epoch and every owner fixed, so that the same binaries
// give the same digests.
//
// For each image it writes an OCI layout (a directory holding the
// multi-platform index, tagged) and, per platform, an image tarball that
// `ctr images import` and `docker load` read.
//
//	images --bin-dir DIR --out DIR [--repository R] [--tag T] [--links L,...] NAME...
//
// reads DIR/<os>_<arch>/NAME for every platform of --platforms; each name
// of --links is a symbolic link to the binary beside it (a binary that
// acts by the name it is called by).
package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// nonRoot is the user and group the images run as, as in distroless.
const nonRoot = 65532

type options struct {
	binDir, out, repository, tag string
	platforms                    []v1.Platform
	epoch                        time.Time
	labels                       map[string]string
	links                        []string
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	var o options
	var platforms, labels, links string
	var epoch int64
	fs.StringVar(&o.binDir, "bin-dir", "", "directory holding <os>_<arch>/<name> binaries (required)")
	fs.StringVar(&o.out, "out", "", "output directory (required)")
	fs.StringVar(&o.repository, "repository", "ghcr.io/liqo-go", "repository the images are named in")
	fs.StringVar(&o.tag, "tag", "dev", "tag of the images")
	fs.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	fs.Int64Var(&epoch, "epoch", 0, "Unix time of every timestamp in the images (SOURCE_DATE_EPOCH)")
	fs.StringVar(&labels, "labels", "", "comma-separated key=value labels of the image configs")
	fs.StringVar(&links, "links", "", "comma-separated names the images also have, as links to their binary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.binDir == "" || o.out == "" || fs.NArg() == 0 {
		return errors.New("usage: images --bin-dir DIR --out DIR [flags] NAME...")
	}
	o.epoch = time.Unix(epoch, 0).UTC()
	for _, p := range strings.Split(platforms, ",") {
		osName, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || osName == "" || arch == "" {
			return fmt.Errorf("--platforms: %q is not os/arch", p)
		}
		o.platforms = append(o.platforms, v1.Platform{OS: osName, Architecture: arch})
	}
	for _, l := range strings.Split(links, ",") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if strings.ContainsAny(l, "/") || l == "." || l == ".." || slices.Contains(o.links, l) || slices.Contains(fs.Args(), l) {
			return fmt.Errorf("--links: %q is not a file name of its own (one without /, given once, not an image's binary)", l)
		}
		o.links = append(o.links, l)
	}
	o.labels = map[string]string{}
	for _, kv := range strings.Split(labels, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--labels: %q is not key=value", kv)
		}
		o.labels[k] = v
	}
	base, err := baseLayer(o.epoch)
	if err != nil {
		return err
	}
	for _, n := range fs.Args() {
		if err := build(o, base, n, out); err != nil {
			return fmt.Errorf("image %s: %w", n, err)
		}
	}
	return nil
}

// build writes the layout and the tarballs of one image.
func build(o options, base v1.Layer, bin string, out io.Writer) error {
	ref, err := name.NewTag(o.repository + "/" + bin + ":" + o.tag)
	if err != nil {
		return err
	}
	var idx v1.ImageIndex = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.platforms {
		img, err := image(o, base, bin, p)
		if err != nil {
			return err
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		tarPath := filepath.Join(o.out, bin+"-"+p.OS+"-"+p.Architecture+".tar")
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			return err
		}
		if err := writeArchive(tarPath, o.epoch, ref, img); err != nil {
			return fmt.Errorf("writing %s: %w", tarPath, err)
		}
		fmt.Fprintf(out, "%s %s/%s %s %s\n", ref, p.OS, p.Architecture, digest, tarPath)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture}},
		})
	}
	dir := filepath.Join(o.out, bin)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	lp, err := layout.Write(dir, mutate.IndexMediaType(empty.Index, types.OCIImageIndex))
	if err != nil {
		return err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(refAnnotations(ref))); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s index %s %s\n", ref, digest, dir)
	return nil
}

// refAnnotations name an image in an OCI layout: by its tag, and by its
// whole reference for containerd (`ctr images import`) and Docker.
func refAnnotations(ref name.Tag) map[string]string {
	return map[string]string{
		"org.opencontainers.image.ref.name": ref.TagStr(),
		"io.containerd.image.name":          ref.String(),
	}
}

// writeArchive writes img, named ref, as an OCI archive: the tar of an OCI
// layout, which keeps the manifest (and so the digest) as built, where a
// Docker archive would have the importer make a manifest of its own.
func writeArchive(path string, epoch time.Time, ref name.Tag, img v1.Image) error {
	dir, err := os.MkdirTemp("", "image-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, mutate.IndexMediaType(empty.Index, types.OCIImageIndex))
	if err != nil {
		return err
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(refAnnotations(ref))); err != nil {
		return err
	}
	var entries []entry
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			entries = append(entries, entry{name: filepath.ToSlash(rel) + "/", mode: 0o755, dir: true})
			return nil
		}
		data, err := os.ReadFile(p)
		entries = append(entries, entry{name: filepath.ToSlash(rel), mode: 0o644, data: data})
		return err
	})
	if err != nil {
		return err
	}
	data, err := tarOf(epoch, entries)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// image is one platform's image of bin: the base layer, the binary, and a
// config running it as the non-root user.
func image(o options, base v1.Layer, bin string, p v1.Platform) (v1.Image, error) {
	path := filepath.Join(o.binDir, p.OS+"_"+p.Architecture, bin)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the %s/%s binary: %w", p.OS, p.Architecture, err)
	}
	entries := []entry{{name: bin, mode: 0o755, data: data}}
	for _, l := range o.links {
		entries = append(entries, entry{name: l, mode: 0o777, link: bin})
	}
	binLayer, err := layer(o.epoch, entries)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer},
		mutate.Addendum{Layer: binLayer, MediaType: types.OCILayer})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Architecture
	cf.Created = v1.Time{Time: o.epoch}
	cf.Author = "liqo-go"
	cf.Config.User = strconv.Itoa(nonRoot) + ":" + strconv.Itoa(nonRoot)
	cf.Config.Entrypoint = []string{"/" + bin}
	cf.Config.WorkingDir = "/home/nonroot"
	cf.Config.Env = []string{"PATH=/", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cf.Config.Labels = o.labels
	cf.History = nil
	for _, what := range []string{"base: non-root user, /tmp, CA certificates", "the " + bin + " binary"} {
		cf.History = append(cf.History, v1.History{Created: v1.Time{Time: o.epoch}, CreatedBy: what})
	}
	return mutate.ConfigFile(img, cf)
}

// baseLayer is what every image shares: users, /tmp, and the CA bundle.
func baseLayer(epoch time.Time) (v1.Layer, error) {
	var certs bytes.Buffer
	n := 0
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue // a constraint a PEM file cannot carry: leave the root out
		}
		if _, err := x509.ParseCertificate(r.Certificate); err != nil {
			return nil, fmt.Errorf("a root of the CA bundle: %w", err)
		}
		if err := pem.Encode(&certs, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, errors.New("the CA bundle is empty")
	}
	return layer(epoch, []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs.Bytes()},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, owner: nonRoot},
		{name: "tmp/", mode: 0o1777, dir: true},
	})
}

type entry struct {
	name  string
	mode  int64
	dir   bool
	owner int
	data  []byte
	link  string // a symbolic link to this
}

// layer is a gzipped tar of entries with fixed timestamps and owners.
func layer(epoch time.Time, entries []entry) (v1.Layer, error) {
	data, err := tarOf(epoch, entries)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// tarOf is the tar of entries, in the order given (WalkDir's is sorted).
func tarOf(epoch time.Time, entries []entry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, ModTime: epoch, Uid: e.owner, Gid: e.owner,
			Typeflag: tar.TypeReg, Size: int64(len(e.data)), Format: tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if e.link != "" {
			h.Typeflag, h.Size, h.Linkname = tar.TypeSymlink, 0, e.link
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
	return buf.Bytes(), nil
}
