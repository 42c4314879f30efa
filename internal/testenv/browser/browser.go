// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package browser runs web pages' tests in a real headless Chromium
// (Debian's chromium), driven by chromedp. The browser can reach loopback
// only: every other address goes to a proxy that is not there, and no
// name is resolved, so a page (or the browser's own services) cannot send
// a packet off the machine. A test that fails saves a screenshot of the
// page under _output/artifacts.
package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/liqo-go/liqo/internal/testenv"
)

// Width and Height are the window's: a laptop's screen.
const (
	Width  = 1366
	Height = 768
)

// executable finds Chromium. Debian's binary is run directly rather
// than through its /usr/bin/chromium wrapper: the wrapper tests the free
// space of /dev/shm with findmnt, which prints a line per mount where
// /dev/shm is mounted twice (as on these machines), breaks its shell test,
// and adds flags of its own (a crash reporter, GPU rasterization).
func executable() (string, bool) {
	for _, p := range []string{"/usr/lib/chromium/chromium"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// Page is a tab of the browser a test drives.
type Page struct {
	T   *testing.T
	Ctx context.Context
}

// Timeout bounds each step of a Page.
const Timeout = 30 * time.Second

// Run runs chromedp actions, failing the test on error.
func (p *Page) Run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.T.Helper()
	ctx, cancel := context.WithTimeout(p.Ctx, Timeout)
	defer cancel()
	start := time.Now()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.T.Fatalf("%s: %v after %s; %s", what, err, time.Since(start).Round(time.Millisecond), p.state())
	}
}

// state says where the page is and what it reads, for a failure's
// message; it waits for the browser at most a few seconds.
func (p *Page) state() string {
	ctx, cancel := context.WithTimeout(p.Ctx, 5*time.Second)
	defer cancel()
	where, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + ' (' + document.readyState + ')'`))
	if err != nil {
		return fmt.Sprintf("the page could not be read (%v)", err)
	}
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
	return fmt.Sprintf("the page is at %s and reads:\n%s", where, text)
}

// Eval evaluates the JavaScript expression js in p's page.
func Eval[T any](p *Page, js string) T {
	p.T.Helper()
	ctx, cancel := context.WithTimeout(p.Ctx, Timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		p.T.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// Until waits, for at most Timeout, for the JavaScript expression js to
// be true in the page, and fails the test with the page's text if not.
func (p *Page) Until(what, js string) {
	p.T.Helper()
	ctx, cancel := context.WithTimeout(p.Ctx, Timeout)
	defer cancel()
	if ok, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil || !ok {
		p.T.Fatalf("%s: not within %s (%v); %s", what, Timeout, err, p.state())
	}
}

// Text is the page's text as a reader sees it.
func (p *Page) Text() string {
	p.T.Helper()
	return Eval[string](p, `document.body.innerText`)
}

// New starts a headless Chromium for t and returns a tab in it; the
// browser stops when t ends. On t's failure, the tab's page is saved as
// a screenshot first (the test's log says where).
func New(t *testing.T) *Page {
	t.Helper()
	path, ok := executable()
	if !ok {
		testenv.Unsupported(t, "no chromium (apt-get install chromium; make system-deps does)")
	}
	ctx, err := start(t, path)
	if err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	t.Cleanup(func() { // runs before the browser stops
		if t.Failed() {
			screenshot(ctx, t)
		}
	})
	return &Page{T: t, Ctx: ctx}
}

// start starts a headless Chromium in a directory of its own under t's and
// returns a tab's context in it. Its error holds what the browser printed.
// The browser stops when t ends.
func start(t *testing.T, path string) (context.Context, error) {
	t.Helper()
	// Not t.TempDir(): its name, made of the test's, can be long, and
	// Chromium makes Unix sockets under TMPDIR, whose paths may not
	// exceed 107 bytes. A subtest with a long name made it exit
	// without a word.
	home, err := os.MkdirTemp("", "chromium-") //nolint:usetesting // t.TempDir() is too long a path (above)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(home); err != nil {
			t.Errorf("removing the browser's directory: %v", err)
		}
	})
	tmp := filepath.Join(home, "tmp") // where it keeps its shared memory (disable-dev-shm-usage) and its sockets
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(filepath.Join(home, "profile")),
		// Nothing written outside the test's directory.
		chromedp.Env("HOME="+home, "TMPDIR="+tmp, "XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_CACHE_HOME="+filepath.Join(home, "cache")),
		chromedp.Flag("disable-crash-reporter", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(Width, Height),
		// Root runs the tests, and Chromium's sandbox refuses root.
		chromedp.NoSandbox,
		// Loopback only: Chromium bypasses a proxy for loopback, and
		// sends everything else to this one, where nothing listens.
		chromedp.ProxyServer("http://127.0.0.1:9"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1, EXCLUDE [::1]"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("safebrowsing-disable-auto-update", true),
		chromedp.Flag("disable-gpu", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(t.Context()), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// Start the browser now, so that a failure to is the test's first.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		return nil, err
	}
	return ctx, nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// screenshot saves the tab's whole page as a PNG under
// _output/artifacts of the module.
func screenshot(ctx context.Context, t *testing.T) {
	t.Helper()
	dir := ArtifactsDir()
	file := filepath.Join(dir, unsafeName.ReplaceAllString(t.Name(), "_")+".png")
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("no screenshot of the page: %v", err)
		return
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Logf("no screenshot of the page: %v", err)
		return
	}
	if err := os.WriteFile(file, png, 0o644); err != nil { //nolint:gosec // an artifact for people to read
		t.Logf("no screenshot of the page: %v", err)
		return
	}
	t.Logf("the page as it was: %s", file)
}

// ArtifactsDir is where failing tests leave what helps to see why:
// $LIQO_TEST_ARTIFACTS, or _output/artifacts in the module's root.
func ArtifactsDir() string {
	if d := os.Getenv("LIQO_TEST_ARTIFACTS"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return filepath.Join(os.TempDir(), "liqo-artifacts")
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "_output", "artifacts")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(os.TempDir(), "liqo-artifacts")
		}
	}
}
