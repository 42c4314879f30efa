// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package api is the virtual nodes' kubelet API: kubectl logs, exec,
// attach and port-forward on an offloaded pod reach the provider pod.
package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/kubeauth"
	"github.com/liqo-go/liqo/internal/sharing"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
)

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

const (
	// clientCAConfigMap is where the API server publishes the CA of the
	// client certificates it accepts (its own kubelet client among them),
	// as kubelets and aggregated API servers read it.
	clientCANamespace = "kube-system"
	clientCAConfigMap = "extension-apiserver-authentication"
	clientCAKey       = "client-ca-file"
)

// Server is the kubelet API of the virtual nodes: the endpoint the
// API server calls, at a node's address and kubelet port, when someone
// runs `kubectl logs` or `kubectl exec` on a pod bound to it. Each virtual
// node has a port of its own, as each kubelet has, and serves the pods
// bound to it only. It serves /containerLogs/{namespace}/{pod}/{container}
// and /exec/{namespace}/{pod}[/{uid}]/{container}: it checks the caller as
// a kubelet does (a client certificate signed by the API server's client
// CA, or a bearer token the API server accepts in a TokenReview; then a
// SubjectAccessReview for the node subresource of the path), and hands
// the request on, streams and protocol upgrades included, to the pod's log
// or exec subresource in the provider, with the virtual kubelet's identity
// there. It is a manager.Runnable, which closes the endpoints when the
// manager stops.
type Server struct {
	// Client reads pods, nodes, NamespaceOffloadings and the client CA
	// (cached), and creates SubjectAccessReviews.
	Client client.Client
	// Streams reach the providers' API servers.
	Streams provider.Streams
	// Reviewer checks callers with a bearer token and no client
	// certificate (nil: only client certificates are accepted).
	Reviewer *kubeauth.Reviewer
	// Usage is what the providers measure of their pods (nil: nothing),
	// for /stats/summary and /metrics/resource.
	Usage provider.Usage
	// Host is the address the endpoints listen on; empty means all.
	Host string
	// FirstPort is the first virtual node's port, the next ones taking the
	// following free ports; 0 takes any free port for each node.
	FirstPort int
	// Certificate is the serving certificate of every endpoint.
	Certificate tls.Certificate

	mu    sync.Mutex
	nodes map[string]*nodeEndpoint
	cpu   cpuBook
	slots chan struct{} // usageSlots
}

type nodeEndpoint struct {
	port int32
	srv  *http.Server
}

// Endpoint returns the port of node's kubelet API, opening it the first
// time.
func (s *Server) Endpoint(ctx context.Context, node string) (int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.nodes[node]; ok {
		return e.port, nil
	}
	used := map[int32]bool{}
	for _, e := range s.nodes {
		used[e.port] = true
	}
	lis, err := s.listen(ctx, used)
	if err != nil {
		return 0, fmt.Errorf("opening the kubelet API of virtual node %s: %w", node, err)
	}
	srv := &http.Server{
		Handler:           &nodeHandler{server: s, node: node},
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{s.Certificate},
			// Verified against the API server's current client CA for
			// each request, as that CA is read from the cluster.
			ClientAuth: tls.RequestClientCert,
			// The API server speaks SPDY or WebSocket over HTTP/1.1 to a
			// kubelet; HTTP/2 cannot carry those upgrades.
			NextProtos: []string{"http/1.1"},
		},
	}
	go func() { _ = srv.ServeTLS(lis, "", "") }()
	port := int32(lis.Addr().(*net.TCPAddr).Port) //nolint:gosec // a TCP port
	if s.nodes == nil {
		s.nodes = map[string]*nodeEndpoint{}
	}
	s.nodes[node] = &nodeEndpoint{port: port, srv: srv}
	ctrl.Log.WithName("kubelet-server").Info("Serving the kubelet API of a virtual node", "node", node, "port", port)
	return port, nil
}

func (s *Server) listen(ctx context.Context, used map[int32]bool) (net.Listener, error) {
	var lc net.ListenConfig
	if s.FirstPort == 0 {
		return lc.Listen(ctx, "tcp", net.JoinHostPort(s.Host, "0"))
	}
	var last error
	for p := s.FirstPort; p < s.FirstPort+1000 && p < 65536; p++ {
		if used[int32(p)] { //nolint:gosec // a TCP port
			continue
		}
		lis, err := lc.Listen(ctx, "tcp", net.JoinHostPort(s.Host, strconv.Itoa(p)))
		if err == nil {
			return lis, nil
		}
		last = err
	}
	return nil, fmt.Errorf("no free port from %d: %w", s.FirstPort, last)
}

// Release closes node's kubelet API.
func (s *Server) Release(node string) {
	s.mu.Lock()
	e, ok := s.nodes[node]
	delete(s.nodes, node)
	s.mu.Unlock()
	if ok {
		_ = e.srv.Close()
	}
	s.cpu.forgetNode(node)
}

// Start implements manager.Runnable: it closes every endpoint when ctx
// ends.
func (s *Server) Start(ctx context.Context) error {
	<-ctx.Done()
	s.mu.Lock()
	nodes := s.nodes
	s.nodes = nil
	s.mu.Unlock()
	for _, e := range nodes {
		_ = e.srv.Close()
	}
	return nil
}

// NeedLeaderElection is true: the provider sessions run on the leader,
// whose address the virtual nodes carry.
func (s *Server) NeedLeaderElection() bool { return true }

// nodeHandler serves one virtual node's kubelet API.
type nodeHandler struct {
	server *Server
	node   string
}

// kubeletRequest is a parsed kubelet API path.
type kubeletRequest struct {
	// subresource is the pod subresource in the provider: log, exec,
	// attach or portforward.
	subresource               string
	namespace, pod, container string
	uid                       string
}

// parseKubeletPath parses the kubelet API paths the virtual nodes serve.
func parseKubeletPath(p string) (kubeletRequest, bool) {
	parts := strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
	switch {
	case len(parts) == 4 && parts[0] == "containerLogs":
		return kubeletRequest{subresource: "log", namespace: parts[1], pod: parts[2], container: parts[3]}, true
	case len(parts) == 4 && parts[0] == "exec":
		return kubeletRequest{subresource: "exec", namespace: parts[1], pod: parts[2], container: parts[3]}, true
	case len(parts) == 5 && parts[0] == "exec":
		return kubeletRequest{subresource: "exec", namespace: parts[1], pod: parts[2], uid: parts[3], container: parts[4]}, true
	case len(parts) == 4 && parts[0] == "attach":
		return kubeletRequest{subresource: "attach", namespace: parts[1], pod: parts[2], container: parts[3]}, true
	case len(parts) == 5 && parts[0] == "attach":
		return kubeletRequest{subresource: "attach", namespace: parts[1], pod: parts[2], uid: parts[3], container: parts[4]}, true
	case len(parts) == 3 && parts[0] == "portForward":
		return kubeletRequest{subresource: "portforward", namespace: parts[1], pod: parts[2]}, true
	case len(parts) == 4 && parts[0] == "portForward":
		return kubeletRequest{subresource: "portforward", namespace: parts[1], pod: parts[2], uid: parts[3]}, true
	}
	return kubeletRequest{}, false
}

// providerQuery translates a kubelet API query into the query of the pod
// subresource in the provider's API server. Only the parameters of that
// subresource pass.
func providerQuery(subresource, container string, in url.Values) url.Values {
	out := url.Values{}
	if container != "" {
		out.Set("container", container)
	}
	switch subresource {
	case "log":
		for _, k := range []string{"follow", "previous", "timestamps", "sinceSeconds", "sinceTime", "tailLines", "limitBytes", "stream"} {
			if v, ok := in[k]; ok {
				out[k] = v
			}
		}
		if tail := in.Get("tail"); tail != "" && tail != "all" && out.Get("tailLines") == "" {
			out.Set("tailLines", tail) // the kubelet's older name
		}
	case "exec", "attach":
		// The kubelet's stream names are the API server's stdin/stdout/stderr.
		for kubelet, api := range map[string]string{"input": "stdin", "output": "stdout", "error": "stderr", "tty": "tty"} {
			if v := in.Get(kubelet); v == "1" || v == "true" {
				out.Set(api, "true")
			}
		}
		if subresource == "exec" {
			out["command"] = in["command"]
		}
	case "portforward":
		// The ports come in each stream's headers (SPDY), or as the
		// kubelet's port parameters (WebSocket), the API server's ports.
		if ports, ok := in["port"]; ok {
			out["ports"] = ports
		}
	}
	return out
}

// forwardedHeaders are the request headers handed on to the provider: what
// a stream needs. Credentials and impersonation never pass.
var forwardedHeaders = []string{
	"Accept", "Content-Type", "Content-Length", "Connection", "Upgrade", "Te", "User-Agent",
	"X-Stream-Protocol-Version", "Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Protocol", "Sec-Websocket-Extensions",
}

// ServeHTTP implements http.Handler.
func (h *nodeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.server
	ctx := r.Context()
	log := ctrl.Log.WithName("kubelet-server").WithValues("node", h.node, "path", r.URL.Path)
	user, ok := s.admit(w, r, h.node)
	if !ok {
		return
	}
	if s.serveRead(ctx, w, r, h.node) || s.serveStats(ctx, w, r, h.node) || s.serveKubeletMetrics(ctx, w, r, h.node) {
		return
	}
	req, ok := parseKubeletPath(r.URL.Path)
	if !ok {
		http.Error(w, "A virtual node serves only /healthz, /pods, /runningpods/, /stats/summary, /metrics, /metrics/resource, /metrics/cadvisor, /containerLogs/{namespace}/{pod}/{container}, "+
			"/exec/{namespace}/{pod}/{container}, /attach/{namespace}/{pod}/{container} and /portForward/{namespace}/{pod}", http.StatusNotFound)
		return
	}
	target, err := s.resolve(ctx, h.node, req)
	if err != nil {
		status := http.StatusInternalServerError
		var se *statusError
		if errors.As(err, &se) {
			status = se.code
		}
		http.Error(w, err.Error(), status)
		return
	}
	u := *target.host
	u.Path = path.Join("/", u.Path, "api/v1/namespaces", target.namespace, "pods", req.pod, req.subresource)
	u.RawQuery = providerQuery(req.subresource, req.container, r.URL.Query()).Encode()
	log.V(1).Info("Forwarding to the provider", "provider", target.provider, "url", u.String(), "user", user)
	proxy := &httputil.ReverseProxy{
		Transport:     target.transport,
		FlushInterval: -1, // logs and streams pass as they come
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &u
			pr.Out.Host = u.Host
			h := http.Header{}
			for _, k := range forwardedHeaders {
				if v, ok := pr.Out.Header[k]; ok {
					h[k] = v
				}
			}
			pr.Out.Header = h
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			log.Info("The provider did not answer", "provider", target.provider, "error", err.Error())
			http.Error(w, fmt.Sprintf("provider %s: %v", target.provider, err), http.StatusBadGateway)
		},
	}
	proxy.ServeHTTP(w, r)
}

// admit checks the caller of r as a kubelet does, and answers it when it
// may not go on: a client certificate is checked against the API
// server's client CA (authenticate), a bearer token without one by a
// TokenReview (tokenCheck: metrics-server and Prometheus call kubelets
// with their ServiceAccount's token); either must then hold one of the
// node subresources of the path on this node. It returns the caller's
// name, and whether it may go on.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, node string) (string, bool) {
	ctx := r.Context()
	verb := kubeletVerb(r.Method, r.URL.Path)
	var check accessCheck
	if (r.TLS == nil || len(r.TLS.PeerCertificates) == 0) && kubeauth.Token(r) != "" && s.Reviewer != nil {
		check = s.tokenCheck(r)
	} else {
		user, groups, err := s.authenticate(ctx, r)
		if err != nil {
			http.Error(w, "Unauthorized: "+err.Error(), http.StatusUnauthorized)
			return "", false
		}
		check = s.certificateCheck(ctx, user, groups)
	}
	if verb == "" {
		http.Error(w, "Forbidden: method "+r.Method+" not allowed", http.StatusForbidden)
		return "", false
	}
	subresources := nodeSubresources(r.URL.Path)
	refused := make([]string, 0, len(subresources))
	var user string
	for _, sub := range subresources {
		u, allowed, err := check(&authorizationv1.ResourceAttributes{Verb: verb, Resource: "nodes", Subresource: sub, Name: node})
		switch {
		case errors.Is(err, kubeauth.ErrTooManyReviews):
			w.Header().Set("Retry-After", "1")
			http.Error(w, err.Error(), http.StatusTooManyRequests)
			return "", false
		case errors.Is(err, errTokenRefused):
			http.Error(w, "Unauthorized: "+err.Error(), http.StatusUnauthorized)
			return "", false
		case err != nil:
			ctrl.LoggerFrom(ctx).Info("Checking a caller failed", "node", node, "error", err.Error())
			http.Error(w, errReview.Error(), http.StatusServiceUnavailable)
			return "", false
		case allowed:
			return u, true
		}
		user = u
		refused = append(refused, "nodes/"+sub)
	}
	http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s on node %s", user, verb, strings.Join(refused, " nor "), node), http.StatusForbidden)
	return "", false
}

// accessCheck says whether the caller may do what attrs name, and who it
// is; an error is a check that could not be made (errTokenRefused: the
// caller is not authenticated).
type accessCheck func(attrs *authorizationv1.ResourceAttributes) (user string, allowed bool, err error)

// errReview is an access review the API server did not answer: the caller
// is told no more than that.
var errReview = errors.New("could not check the caller with the API server; try again")

// errTokenRefused is a bearer token the API server does not accept.
var errTokenRefused = errors.New("the API server does not accept the bearer token")

// certificateCheck asks the API server, as a kubelet in Webhook
// authorization mode does, whether user, of groups, may.
func (s *Server) certificateCheck(ctx context.Context, user string, groups []string) accessCheck {
	return func(attrs *authorizationv1.ResourceAttributes) (string, bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: attrs}}
		if err := s.Client.Create(ctx, sar); err != nil {
			return user, false, fmt.Errorf("%w: %w", errReview, err)
		}
		return user, sar.Status.Allowed, nil
	}
}

// tokenCheck checks the bearer token of r with the Reviewer (its
// verdicts cached, reviews of unknown tokens rate-limited).
func (s *Server) tokenCheck(r *http.Request) accessCheck {
	return func(attrs *authorizationv1.ResourceAttributes) (string, bool, error) {
		v, err := s.Reviewer.Check(r, kubeauth.Attributes{Resource: attrs})
		switch {
		case err != nil:
			return "", false, err
		case v.Status == http.StatusUnauthorized:
			return "", false, errTokenRefused
		}
		return v.User.Username, v.Status == http.StatusOK, nil
	}
}

// kubeletVerb is the authorization verb of a request for p: that of its
// HTTP method, as a kubelet maps them ("" for a method it refuses), but
// always create for the paths that run something in a container (exec,
// attach, port-forward). A kubelet asks get for their WebSocket form (a
// GET), so that get on nodes/proxy, which monitoring is often granted,
// would open a shell in every pod of the node; the API server asks
// create of pods/exec whatever the form, and so does this.
func kubeletVerb(method, p string) string {
	verb := methodVerbs[method]
	if first := firstSegment(p); verb != "" && (first == "exec" || first == "attach" || first == "portForward" || first == "run") {
		return "create"
	}
	return verb
}

// methodVerbs are the authorization verbs of the HTTP methods, as a
// kubelet maps them.
var methodVerbs = map[string]string{
	http.MethodGet: "get", http.MethodHead: "get", http.MethodPost: "create",
	http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete",
}

// firstSegment is the first segment of the cleaned path p: what a
// kubelet routes and authorizes it by.
func firstSegment(p string) string {
	return strings.SplitN(strings.TrimPrefix(path.Clean("/"+p), "/"), "/", 2)[0]
}

// authenticate checks the client certificate against the API server's
// client CA, and returns its user and groups.
func (s *Server) authenticate(ctx context.Context, r *http.Request) (string, []string, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return "", nil, errors.New("no client certificate")
	}
	var cm corev1.ConfigMap
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: clientCANamespace, Name: clientCAConfigMap}, &cm); err != nil {
		return "", nil, fmt.Errorf("reading the client CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(cm.Data[clientCAKey])) {
		return "", nil, fmt.Errorf("configmap %s/%s has no %s", clientCANamespace, clientCAConfigMap, clientCAKey)
	}
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	leaf := r.TLS.PeerCertificates[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return "", nil, fmt.Errorf("client certificate: %w", err)
	}
	if leaf.Subject.CommonName == "" {
		return "", nil, errors.New("client certificate names no user")
	}
	return leaf.Subject.CommonName, leaf.Subject.Organization, nil
}

// nodeSubresources are the node subresources that allow a kubelet API
// path, as a kubelet maps them (with fine-grained authorization): the
// first that the caller holds lets it in; nodes/proxy allows every path.
func nodeSubresources(p string) []string {
	switch firstSegment(p) {
	case "stats":
		return []string{"stats"}
	case "metrics":
		return []string{"metrics"}
	case "logs":
		return []string{"log"}
	case "spec":
		return []string{"spec"}
	case "healthz":
		return []string{"healthz", "proxy"}
	case "pods", "runningpods":
		return []string{"pods", "proxy"}
	}
	return []string{"proxy"}
}

// serveRead answers the kubelet's read endpoints a virtual node serves
// from this cluster's own view of its pods, and says whether it did:
// /healthz, /pods (the pods bound to the node) and /runningpods/ (those
// of them running, as the container runtime lists them: names, UIDs and
// containers alone).
func (s *Server) serveRead(ctx context.Context, w http.ResponseWriter, r *http.Request, node string) bool {
	p := path.Clean("/" + r.URL.Path)
	switch {
	case p == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok")
		return true
	case (p == "/pods" || p == "/runningpods") && r.Method == http.MethodGet:
	default:
		return false
	}
	var pods corev1.PodList
	if err := s.Client.List(ctx, &pods, client.MatchingFields{podsByNodeField: node}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return true
	}
	out := corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if p == "/pods" {
			pod.ManagedFields = nil
			out.Items = append(out.Items, *pod)
			continue
		}
		if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
			continue
		}
		running := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
		for _, c := range pod.Spec.Containers {
			running.Spec.Containers = append(running.Spec.Containers, corev1.Container{Name: c.Name, Image: c.Image})
		}
		out.Items = append(out.Items, running)
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&out); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Writing a pod list failed", "error", err.Error())
	}
	return true
}

// podsByNodeField is the index of pods by node (node.PodsByNodeField),
// which the manager's cache keeps.
const podsByNodeField = "spec.nodeName"

type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

func notFound(format string, args ...any) error {
	return &statusError{code: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

// kubeletTarget is where a request goes.
type kubeletTarget struct {
	provider  string
	namespace string
	host      *url.URL
	transport http.RoundTripper
}

// resolve finds the provider pod behind a local pod: its virtual node's
// provider, and the namespace its namespace maps to there.
func (s *Server) resolve(ctx context.Context, nodeName string, req kubeletRequest) (*kubeletTarget, error) {
	var pod corev1.Pod
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: req.namespace, Name: req.pod}, &pod)
	if apierrors.IsNotFound(err) {
		return nil, notFound("pod %s/%s not found", req.namespace, req.pod)
	}
	if err != nil {
		return nil, err
	}
	if req.uid != "" && string(pod.UID) != req.uid {
		return nil, notFound("pod %s/%s has UID %s, not %s", req.namespace, req.pod, pod.UID, req.uid)
	}
	if pod.Spec.NodeName != nodeName {
		return nil, notFound("pod %s/%s is not on node %s", req.namespace, req.pod, nodeName)
	}
	_, provider, err := s.providerOf(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	remoteNS, ok, err := s.remoteNamespace(ctx, req.namespace, provider)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, notFound("namespace %s has no ready namespace in provider %s", req.namespace, provider)
	}
	host, transport, err := s.Streams.Stream(ctx, provider)
	if err != nil {
		return nil, &statusError{code: http.StatusServiceUnavailable, msg: fmt.Sprintf("provider %s: %v", provider, err)}
	}
	return &kubeletTarget{provider: provider, namespace: remoteNS, host: host, transport: transport}, nil
}

// providerOf returns virtual node name and the provider behind it; a
// node that is missing or not virtual is a 404.
func (s *Server) providerOf(ctx context.Context, name string) (*corev1.Node, string, error) {
	var node corev1.Node
	if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", notFound("node %s not found", name)
		}
		return nil, "", err
	}
	provider := node.Labels[offloadingv1alpha1.RemoteClusterLabel]
	if !sharing.IsVirtual(&node) || provider == "" {
		return nil, "", notFound("node %s is not a virtual node", name)
	}
	return &node, provider, nil
}

// remoteNamespace returns the namespace ns maps to in provider, and
// whether it is ready there.
func (s *Server) remoteNamespace(ctx context.Context, ns, provider string) (string, bool, error) {
	var no offloadingv1alpha1.NamespaceOffloading
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); client.IgnoreNotFound(err) != nil {
		return "", false, err
	}
	remote, ok := no.ReadyRemoteNamespace(provider)
	return remote, ok, nil
}
