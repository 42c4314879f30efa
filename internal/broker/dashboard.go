// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
)

// The dashboard (docs/broker.md) is a page the broker serves at /, with
// its script and style under /ui/, all embedded: nothing is loaded from
// elsewhere, and the Content-Security-Policy says so to the browser. The
// page signs in with a bearer token kept in the tab's sessionStorage and
// sent as an Authorization header (never a cookie: no request is made
// with the caller's rights unless the page makes it), reads the state
// from GET /api/v1/events, and changes the selection through the API.

//go:embed ui
var uiFiles embed.FS

// Limits of the event stream.
const (
	// DefaultEventsInterval is how often a stream looks for a change.
	DefaultEventsInterval = 2 * time.Second
	// DefaultEventsLifetime is how long a stream lasts before the page
	// opens another: the caller's rights are checked again then, and
	// every minute meanwhile.
	DefaultEventsLifetime = 10 * time.Minute
	// MaxStreams bounds the streams open at once: 429 beyond.
	MaxStreams = 64
	// keepAliveEvery is how long a stream stays silent at most, so that
	// proxies keep it open.
	keepAliveEvery = 15 * time.Second
	// recheckEvery is how often a stream checks the caller's rights.
	recheckEvery = time.Minute
	// streamWriteTimeout bounds one write to a stream.
	streamWriteTimeout = 10 * time.Second
)

// contentSecurityPolicy lets the page load its own script and style only,
// talk to the broker only, and be framed by no one.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// streams counts the event streams open.
var streams atomic.Int32

// dashboardRoutes are the page and its assets; they are not API
// endpoints (the OpenAPI document does not list them).
func (s *Server) dashboardRoutes() []route {
	always := func(Modes) bool { return true }
	return []route{
		{pattern: "GET /{$}", name: "dashboard", mode: always, handle: serveUI("index.html")},
		{pattern: "GET /ui/{file}", name: "dashboard", mode: always, handle: func(w http.ResponseWriter, r *http.Request) error {
			return serveUI(r.PathValue("file"))(w, r)
		}},
	}
}

// uiTypes are the content types of the dashboard's files.
var uiTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

func serveUI(name string) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, _ *http.Request) error {
		ctype, ok := uiTypes[path.Ext(name)]
		if !ok {
			return errNotFound(fmt.Sprintf("the dashboard has no file %s", name))
		}
		body, err := fs.ReadFile(uiFiles, "ui/"+name)
		if errors.Is(err, fs.ErrNotExist) {
			return errNotFound(fmt.Sprintf("the dashboard has no file %s", name))
		} else if err != nil {
			return err
		}
		h := w.Header()
		h.Set("Content-Type", ctype)
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		_, err = w.Write(body) //nolint:gosec // an embedded file of the dashboard, never what the caller sent
		return err
	}
}

// State is what GET /api/v1/events sends, whole, each time it changes:
// the providers the caller may read and, for a consumer, its selection.
type State struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	// Consumer is the consumer the caller signed in as; empty for a
	// caller that reads the catalog only.
	Consumer string `json:"consumer,omitempty"`
	// Clusters are the catalog as the caller may read it, without
	// kpis.ageSeconds (the page counts it from kpis.measured).
	Clusters []Cluster `json:"clusters"`
	// Selection is the consumer's.
	Selection *SelectionView `json:"selection,omitempty"`
}

// caller is who a stream is for.
type caller struct {
	providersOnly bool
	consumer      string
}

// whoCalls checks the caller may read the catalog, and finds the consumer
// it is, if any: an error is the answer to give.
func (s *Server) whoCalls(r *http.Request) (caller, error) {
	providersOnly, err := s.readCatalog(r)
	if err != nil {
		return caller{}, err
	}
	c := caller{providersOnly: providersOnly}
	if !s.Modes.Orchestrator {
		return c, nil
	}
	consumer, err := s.selectionFor(r, "get")
	var ae *apiError
	switch {
	case err == nil:
		c.consumer = consumer
	case errors.As(err, &ae):
		// Not a consumer (an operator's token, an anonymous reader of
		// a public catalog): the catalog alone.
		if providersOnly {
			return caller{}, err
		}
	default:
		return caller{}, err
	}
	return c, nil
}

// state is what the caller sees now, from the cache.
func (s *Server) state(ctx context.Context, c caller) (*State, error) {
	cs, err := s.catalog(ctx)
	if err != nil {
		return nil, err
	}
	st := &State{Kind: "State", APIVersion: APIVersion, Consumer: c.consumer, Clusters: []Cluster{}}
	for _, e := range cs {
		if (!s.Modes.Catalog || c.providersOnly) && !e.Provider {
			continue
		}
		if e.KPIs != nil {
			e.KPIs.AgeSeconds = nil
		}
		st.Clusters = append(st.Clusters, e.Cluster)
	}
	if c.consumer != "" {
		var sel brokerv1alpha1.Selection
		err := s.Reader.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(c.consumer), Name: brokerv1alpha1.SelectionName}, &sel)
		switch {
		case err == nil:
			v := view(c.consumer, &sel)
			st.Selection = &v
		case client.IgnoreNotFound(err) == nil:
			v := view(c.consumer, nil)
			st.Selection = &v
		default:
			return nil, fmt.Errorf("reading the selection of %s: %w", c.consumer, err)
		}
	}
	return st, nil
}

// events answers GET /api/v1/events: a stream of server-sent events, an
// event state (State, as JSON) at once and then each time it changes,
// and a last event error (a Status) when the caller's rights go.
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	who, err := s.whoCalls(r)
	if err != nil {
		return err
	}
	if streams.Add(1) > MaxStreams {
		streams.Add(-1)
		w.Header().Set("Retry-After", "5")
		return &apiError{code: http.StatusTooManyRequests, reason: metav1.StatusReasonTooManyRequests,
			message: fmt.Sprintf("the broker serves %d event streams at most; try again", MaxStreams)}
	}
	defer streams.Add(-1)
	ctx := r.Context()
	rc := http.NewResponseController(w)
	// The server's read deadline is for requests, not a stream.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	send := func(event string, data []byte) error {
		if err := rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		var b bytes.Buffer
		if event == "" {
			b.WriteString(": still here\n\n")
		} else {
			fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", event, data)
		}
		if _, err := w.Write(b.Bytes()); err != nil {
			return err
		}
		return rc.Flush()
	}
	interval, lifetime := s.eventsTiming()
	end := time.NewTimer(lifetime)
	defer end.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last []byte
	lastSent, lastChecked := time.Now(), time.Now()
	for {
		st, err := s.state(ctx, who)
		if err != nil {
			// The cache failing is the broker's trouble, not the
			// caller's: said once, and tried again.
			body, _ := json.Marshal(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
				Reason: metav1.StatusReasonServiceUnavailable, Message: "the broker cannot read its state now; trying again", Code: http.StatusServiceUnavailable})
			if !bytes.Equal(body, last) {
				if err := send("unavailable", body); err != nil {
					return nil
				}
				last, lastSent = body, time.Now()
			}
		} else if body, err := json.Marshal(st); err == nil && !bytes.Equal(body, last) {
			if err := send("state", body); err != nil {
				return nil // the caller went
			}
			last, lastSent = body, time.Now()
		}
		if time.Since(lastSent) >= keepAliveEvery {
			if err := send("", nil); err != nil {
				return nil
			}
			lastSent = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-end.C:
			return nil
		case <-tick.C:
		}
		if time.Since(lastChecked) >= recheckEvery {
			lastChecked = time.Now()
			now, err := s.whoCalls(r)
			var ae *apiError
			if errors.As(err, &ae) || (err == nil && now != who) {
				if ae == nil {
					ae = &apiError{code: http.StatusForbidden, reason: metav1.StatusReasonForbidden, message: "the caller's rights changed; sign in again"}
				}
				body, _ := json.Marshal(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
					Reason: ae.reason, Message: ae.message, Code: int32(ae.code)}) //nolint:gosec // an HTTP status code
				_ = send("error", body)
				return nil
			}
		}
	}
}

func (s *Server) eventsTiming() (interval, lifetime time.Duration) {
	interval, lifetime = s.EventsInterval, s.EventsLifetime
	if interval <= 0 {
		interval = DefaultEventsInterval
	}
	if lifetime <= 0 {
		lifetime = DefaultEventsLifetime
	}
	return interval, lifetime
}
