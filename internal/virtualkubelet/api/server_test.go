// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package api

import (
	"net/http"
	"net/url"
	"reflect"
	"testing"

	"github.com/liqo-go/liqo/internal/virtualkubelet/node"
)

func TestParseKubeletPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		want kubeletRequest
		ok   bool
	}{
		{"/containerLogs/ns/pod/app", kubeletRequest{subresource: "log", namespace: "ns", pod: "pod", container: "app"}, true},
		{"/exec/ns/pod/app", kubeletRequest{subresource: "exec", namespace: "ns", pod: "pod", container: "app"}, true},
		{"/exec/ns/pod/1234/app", kubeletRequest{subresource: "exec", namespace: "ns", pod: "pod", uid: "1234", container: "app"}, true},
		{"/attach/ns/pod/app", kubeletRequest{subresource: "attach", namespace: "ns", pod: "pod", container: "app"}, true},
		{"/attach/ns/pod/1234/app", kubeletRequest{subresource: "attach", namespace: "ns", pod: "pod", uid: "1234", container: "app"}, true},
		{"/portForward/ns/pod", kubeletRequest{subresource: "portforward", namespace: "ns", pod: "pod"}, true},
		{"/portForward/ns/pod/1234", kubeletRequest{subresource: "portforward", namespace: "ns", pod: "pod", uid: "1234"}, true},
		{"/containerLogs/ns/pod", kubeletRequest{}, false},
		{"/attach/ns/pod", kubeletRequest{}, false},
		{"/portForward/ns", kubeletRequest{}, false},
		{"/run/ns/pod/app", kubeletRequest{}, false},
		{"/pods", kubeletRequest{}, false},
		{"/", kubeletRequest{}, false},
	} {
		got, ok := parseKubeletPath(tc.path)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseKubeletPath(%q) = %+v, %v; want %+v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

func TestProviderQuery(t *testing.T) {
	for _, tc := range []struct {
		name, subresource string
		in, want          url.Values
	}{{
		name: "log options pass, others do not", subresource: "log",
		in:   url.Values{"follow": {"true"}, "tailLines": {"10"}, "timestamps": {"true"}, "container": {"other"}, "impersonate": {"x"}},
		want: url.Values{"container": {"app"}, "follow": {"true"}, "tailLines": {"10"}, "timestamps": {"true"}},
	}, {
		name: "the kubelet's tail becomes tailLines", subresource: "log",
		in:   url.Values{"tail": {"5"}},
		want: url.Values{"container": {"app"}, "tailLines": {"5"}},
	}, {
		name: "tail=all means every line", subresource: "log",
		in:   url.Values{"tail": {"all"}},
		want: url.Values{"container": {"app"}},
	}, {
		name: "exec streams are renamed, the command keeps its order", subresource: "exec",
		in:   url.Values{"command": {"sh", "-c", "echo hi"}, "input": {"1"}, "output": {"1"}, "error": {"1"}, "tty": {"0"}},
		want: url.Values{"container": {"app"}, "command": {"sh", "-c", "echo hi"}, "stdin": {"true"}, "stdout": {"true"}, "stderr": {"true"}},
	}, {
		name: "attach streams are renamed, no command passes", subresource: "attach",
		in:   url.Values{"command": {"sh"}, "input": {"1"}, "output": {"1"}, "tty": {"1"}},
		want: url.Values{"container": {"app"}, "stdin": {"true"}, "stdout": {"true"}, "tty": {"true"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := providerQuery(tc.subresource, "app", tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("providerQuery = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestProviderQueryPortForward: a port-forward names no container; the
// kubelet's port parameters become the API server's ports.
func TestProviderQueryPortForward(t *testing.T) {
	got := providerQuery("portforward", "", url.Values{"port": {"80", "443"}, "command": {"sh"}})
	if want := (url.Values{"ports": {"80", "443"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("providerQuery = %v, want %v", got, want)
	}
	if got := providerQuery("portforward", "", url.Values{}); len(got) != 0 {
		t.Errorf("providerQuery with no port = %v, want nothing", got)
	}
}

// TestNodeSubresources: each kubelet path is allowed as a kubelet allows
// it (fine-grained first, nodes/proxy as the fallback where a kubelet has
// one); a path cannot climb out of its prefix.
func TestNodeSubresources(t *testing.T) {
	for path, want := range map[string][]string{
		"/healthz":                  {"healthz", "proxy"},
		"/pods":                     {"pods", "proxy"},
		"/runningpods/":             {"pods", "proxy"},
		"/stats/summary":            {"stats"},
		"/metrics/resource":         {"metrics"},
		"/logs/messages":            {"log"},
		"/containerLogs/ns/pod/app": {"proxy"},
		"/exec/ns/pod/app":          {"proxy"},
		"/portForward/ns/pod":       {"proxy"},
		"/pods/../exec/ns/pod/app":  {"proxy"},
		"/":                         {"proxy"},
	} {
		if got := nodeSubresources(path); !reflect.DeepEqual(got, want) {
			t.Errorf("nodeSubresources(%q) = %v, want %v", path, got, want)
		}
	}
	if podsByNodeField != node.PodsByNodeField {
		t.Errorf("the pods-by-node index is %q here and %q where it is made", podsByNodeField, node.PodsByNodeField)
	}
}

// TestKubeletVerb: the verb of a request is its method's, as a kubelet
// maps them, except that running something in a container (exec,
// attach, port-forward, in their WebSocket form a GET too) always asks
// create: get on nodes/proxy opens no shell.
func TestKubeletVerb(t *testing.T) {
	for _, tc := range []struct{ method, path, want string }{
		{http.MethodGet, "/stats/summary", "get"},
		{http.MethodHead, "/healthz", "get"},
		{http.MethodGet, "/containerLogs/ns/pod/app", "get"},
		{http.MethodGet, "/exec/ns/pod/app", "create"},
		{http.MethodPost, "/exec/ns/pod/app", "create"},
		{http.MethodGet, "/attach/ns/pod/uid/app", "create"},
		{http.MethodGet, "/portForward/ns/pod", "create"},
		{http.MethodGet, "/pods/../exec/ns/pod/app", "create"},
		{http.MethodGet, "/run/ns/pod/app", "create"},
		{http.MethodDelete, "/pods", "delete"},
		{"CONNECT", "/exec/ns/pod/app", ""},
	} {
		if got := kubeletVerb(tc.method, tc.path); got != tc.want {
			t.Errorf("kubeletVerb(%s, %q) = %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}
