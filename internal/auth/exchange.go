// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
)

// PeeringIdentityPath is where a consumer exchanges its token and CSR for
// an identity in the provider.
const PeeringIdentityPath = "/peering/v1/identity"

// Headers of the token exchange. The token itself never travels: the
// request carries an HMAC of itself keyed by the token, with a timestamp
// and a nonce so that a captured request cannot be replayed; the response
// carries an HMAC too, so that the consumer knows the answer comes from the
// holder of the token.
const (
	AuthorizationScheme = "Liqo-HMAC-SHA256"
	ResponseMACHeader   = "X-Liqo-Response-Mac"
	// MaxClockSkew bounds the age of a signed request, and how long its
	// nonce is remembered.
	MaxClockSkew = 5 * time.Minute
	// maxExchangeBytes bounds a request or response body.
	maxExchangeBytes = 256 << 10
)

// IdentityRequest is what a consumer sends to get an identity.
type IdentityRequest struct {
	// ClusterID and ClusterName identify the consumer.
	ClusterID   string `json:"clusterID"`
	ClusterName string `json:"clusterName,omitempty"`
	// AuthURL is the consumer's own auth service.
	AuthURL string `json:"authURL,omitempty"`
	// Namespace is the consumer's Liqo namespace.
	Namespace string `json:"namespace"`
	// CACert is the consumer's cluster CA (PEM). A provider that trusts
	// LAN peers checks it against the CA it pinned at discovery.
	CACert string `json:"caCert"`
	// CSR (PEM) asks for the identity liqo-consumer-<ClusterID>.
	CSR string `json:"csr"`
}

// IdentityResponse is what the provider answers.
type IdentityResponse struct {
	// ClusterID identifies the provider.
	ClusterID string `json:"clusterID"`
	// APIServerURL and CACert say how to reach the provider's API server.
	APIServerURL string `json:"apiServerURL"`
	CACert       string `json:"caCert"`
	// Certificate is the consumer's client certificate (PEM).
	Certificate string `json:"certificate"`
	// ProviderCSR (PEM) asks the consumer for the identity
	// liqo-provider-<provider ID>; its key stays in the provider.
	ProviderCSR string `json:"providerCSR"`
	// AuthenticatedBy says how the provider authenticated the consumer:
	// "token", "lan-trust" or "open".
	AuthenticatedBy string `json:"authenticatedBy"`
}

// ExchangeError is a refusal from the auth service. Reason is one of the
// Reason* constants, so that the consumer can tell a wrong token from a
// policy refusal.
type ExchangeError struct {
	Status  int    `json:"-"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (e *ExchangeError) Error() string { return e.Message }

// Reasons of an ExchangeError.
const (
	ReasonBadRequest    = "BadRequest"
	ReasonTokenRequired = "TokenRequired"
	ReasonWrongToken    = "WrongToken"
	ReasonReplayed      = "Replayed"
	ReasonExpired       = "RequestExpired"
	ReasonPolicy        = "RefusedByPolicy"
	ReasonNotReady      = "NotReady"
	ReasonTooMany       = "TooManyRequests"
	ReasonInternal      = "InternalError"
)

// IsPolicyRefusal reports whether err is the provider's policy saying no.
func IsPolicyRefusal(err error) bool {
	var e *ExchangeError
	return errors.As(err, &e) && e.Reason == ReasonPolicy
}

// Issuer issues peering identities; the controller manager implements it.
// signed says how the request was signed: "" (not signed), SignedByToken
// or SignedByIntroduction.
type Issuer interface {
	IssueIdentity(ctx context.Context, req *IdentityRequest, signed string) (*IdentityResponse, error)
}

// How a request was signed, as the Issuer is told.
const (
	SignedByToken        = "token"
	SignedByIntroduction = "introduction"
)

// IntroductionSeparator splits an introduction token: "<introducer
// ClusterID>.<secret>". A cluster's own token is hex, and a ClusterID a
// DNS label, so neither has a dot.
const IntroductionSeparator = "."

// IntroducerOf returns the introducer of an introduction token, or "" for
// a cluster's own token.
func IntroducerOf(token string) string {
	introducer, _, ok := strings.Cut(token, IntroductionSeparator)
	if !ok {
		return ""
	}
	return introducer
}

// mac returns the request MAC: method, path, timestamp, nonce and the body
// hash, keyed by the token.
func mac(token, method, path, ts, nonce string, body []byte) []byte {
	sum := sha256.Sum256(body)
	h := hmac.New(sha256.New, []byte(token))
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n%s", method, path, ts, nonce, hex.EncodeToString(sum[:]))
	return h.Sum(nil)
}

func responseMAC(token, nonce string, body []byte) []byte {
	sum := sha256.Sum256(body)
	h := hmac.New(sha256.New, []byte(token))
	fmt.Fprintf(h, "response\n%s\n%s", nonce, hex.EncodeToString(sum[:]))
	return h.Sum(nil)
}

// nonceCache remembers the nonces of the last MaxClockSkew, so that a
// request is accepted once.
type nonceCache struct {
	mu        sync.Mutex
	seen      map[string]time.Time
	lastSweep time.Time
}

// maxNonces bounds the cache: past it, signed requests are refused until
// old nonces expire (a flood cannot grow memory).
const maxNonces = 100000

func (n *nonceCache) use(nonce string, now time.Time) (ok, full bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen == nil {
		n.seen = map[string]time.Time{}
	}
	// Expired nonces are swept at most once a second, so that a busy
	// cache costs one pass per second, not one per request.
	if len(n.seen) >= maxNonces/2 && now.Sub(n.lastSweep) > time.Second {
		n.lastSweep = now
		for k, exp := range n.seen {
			if now.After(exp) {
				delete(n.seen, k)
			}
		}
	}
	if _, dup := n.seen[nonce]; dup {
		return false, false
	}
	if len(n.seen) >= maxNonces {
		return false, true
	}
	n.seen[nonce] = now.Add(2 * MaxClockSkew)
	return true, false
}

func writeExchangeError(w http.ResponseWriter, e *ExchangeError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(e)
}

// servePeeringIdentity authenticates an IdentityRequest and hands it to
// the Issuer.
func (s *Server) servePeeringIdentity(w http.ResponseWriter, r *http.Request) {
	refuse := func(status int, reason, format string, args ...any) {
		s.countRefusal(reason)
		writeExchangeError(w, &ExchangeError{Status: status, Reason: reason, Message: fmt.Sprintf(format, args...)})
	}
	if s.Issuer == nil || s.Token == nil {
		refuse(http.StatusServiceUnavailable, ReasonNotReady, "this cluster does not accept peerings yet")
		return
	}
	if !s.allowExchange(r.RemoteAddr) {
		w.Header().Set("Retry-After", "1")
		refuse(http.StatusTooManyRequests, ReasonTooMany, "too many peering requests at once; try again shortly")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxExchangeBytes+1))
	if err != nil || len(body) > maxExchangeBytes {
		refuse(http.StatusBadRequest, ReasonBadRequest, "the request body is unreadable or larger than %d bytes", maxExchangeBytes)
		return
	}
	var req IdentityRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		refuse(http.StatusBadRequest, ReasonBadRequest, "the request is not an identity request: %v", err)
		return
	}

	var signedBy, nonce, token string
	if authz := r.Header.Get("Authorization"); authz != "" {
		params, ok := parseAuthorization(authz)
		if !ok {
			refuse(http.StatusBadRequest, ReasonBadRequest, "malformed Authorization header: want %s ts=<unix seconds>,nonce=<hex>,mac=<hex>", AuthorizationScheme)
			return
		}
		ts, err := strconv.ParseInt(params["ts"], 10, 64)
		now := time.Now()
		if err != nil || now.Sub(time.Unix(ts, 0)).Abs() > MaxClockSkew {
			refuse(http.StatusUnauthorized, ReasonExpired, "the request timestamp is missing or more than %s away from this cluster's clock", MaxClockSkew)
			return
		}
		signedBy = SignedByToken
		if introducer := params["intro"]; introducer != "" {
			// An introduction's token, looked up by who introduces and
			// whom: it signs for that consumer and no other.
			signedBy = SignedByIntroduction
			if s.Introduction == nil {
				refuse(http.StatusUnauthorized, ReasonWrongToken, "this cluster accepts no introductions")
				return
			}
			token, err = s.Introduction(r.Context(), introducer, req.ClusterID)
			if err != nil {
				refuse(http.StatusServiceUnavailable, ReasonNotReady, "the introductions are not available yet")
				return
			}
			if token == "" {
				refuse(http.StatusUnauthorized, ReasonWrongToken, "this cluster holds no accepted introduction of %s by %s", req.ClusterID, introducer)
				return
			}
		} else if token, err = s.cachedToken(r.Context()); err != nil {
			refuse(http.StatusServiceUnavailable, ReasonNotReady, "the peering token is not available yet")
			return
		}
		got, err := hex.DecodeString(params["mac"])
		want := mac(token, r.Method, r.URL.Path, params["ts"], params["nonce"], body)
		if err != nil || !hmac.Equal(got, want) { // constant time
			if signedBy == SignedByIntroduction {
				refuse(http.StatusUnauthorized, ReasonWrongToken, "the introduction's token is wrong: ask the broker for the introduction again")
				return
			}
			refuse(http.StatusUnauthorized, ReasonWrongToken, "the peering token is wrong: ask this cluster's operator for the output of liqoctl generate-add-command")
			return
		}
		// Only a correctly signed request spends its nonce: an attacker
		// cannot burn nonces it does not hold the token for.
		ok, full := s.nonces.use(params["nonce"], now)
		if full {
			refuse(http.StatusServiceUnavailable, ReasonNotReady, "too many requests; try again later")
			return
		}
		if !ok {
			refuse(http.StatusUnauthorized, ReasonReplayed, "the request was already used once (replayed nonce)")
			return
		}
		nonce = params["nonce"]
	}

	resp, err := s.Issuer.IssueIdentity(r.Context(), &req, signedBy)
	if err != nil {
		var e *ExchangeError
		if !errors.As(err, &e) {
			// What failed inside stays in this cluster's log: the caller
			// may not even be authenticated.
			ctrl.LoggerFrom(r.Context()).Error(err, "Issuing a peering identity failed", "clusterID", req.ClusterID)
			e = &ExchangeError{Status: http.StatusInternalServerError, Reason: ReasonInternal,
				Message: "issuing the identity failed; the provider's controller manager logs say why"}
		}
		refuse(e.Status, e.Reason, "%s", e.Message)
		return
	}
	out, err := json.Marshal(resp)
	if err != nil {
		refuse(http.StatusInternalServerError, ReasonInternal, "encoding the response: %v", err)
		return
	}
	if signedBy != "" {
		w.Header().Set(ResponseMACHeader, hex.EncodeToString(responseMAC(token, nonce, out)))
	}
	issued.Inc()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// cachedToken returns the token, reading it at most every tokenCacheTTL:
// a request with a well-formed header must not cost an API call.
func (s *Server) cachedToken(ctx context.Context) (string, error) {
	s.tokenMu.Lock()
	defer s.tokenMu.Unlock()
	if s.token != "" && time.Since(s.tokenRead) < tokenCacheTTL {
		return s.token, nil
	}
	token, err := s.Token(ctx)
	if err != nil {
		return "", err
	}
	s.token, s.tokenRead = token, time.Now()
	return token, nil
}

// tokenCacheTTL bounds how long a replaced token keeps working.
const tokenCacheTTL = 10 * time.Second

func parseAuthorization(h string) (map[string]string, bool) {
	scheme, rest, ok := strings.Cut(h, " ")
	if !ok || scheme != AuthorizationScheme {
		return nil, false
	}
	params := map[string]string{}
	for _, kv := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, false
		}
		params[k] = v
	}
	if params["ts"] == "" || len(params["nonce"]) < 16 || len(params["nonce"]) > 128 || params["mac"] == "" {
		return nil, false
	}
	if intro, ok := params["intro"]; ok && len(validation.IsDNS1123Label(intro)) > 0 {
		return nil, false
	}
	return params, true
}

// RequestIdentity sends req to the auth service at authURL. With a token
// the request is signed and the response's MAC is checked; without one
// the provider must trust the consumer some other way (LAN trust).
func RequestIdentity(ctx context.Context, authURL, token string, req *IdentityRequest, o ClientOptions) (*IdentityResponse, error) {
	u, err := url.Parse(authURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("auth URL %q is not an https URL", authURL)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	target := strings.TrimSuffix(authURL, "/") + PeeringIdentityPath
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	httpReq.Header.Set("Content-Type", "application/json")
	var nonce string
	if token != "" {
		if nonce, err = SignRequest(httpReq, token, body); err != nil {
			return nil, err
		}
	}
	client := o.httpClient()
	defer client.CloseIdleConnections()
	resp, err := client.Do(httpReq)
	if err != nil {
		return nil, fmt.Errorf("reaching the auth service at %s: %w", authURL, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxExchangeBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %w", authURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		e := &ExchangeError{}
		if json.Unmarshal(out, e) != nil || e.Reason == "" {
			e = &ExchangeError{Reason: ReasonInternal, Message: strings.TrimSpace(string(out[:min(len(out), 512)]))}
		}
		e.Status = resp.StatusCode
		e.Message = fmt.Sprintf("auth service at %s refused (%s): %s", authURL, e.Reason, e.Message)
		return nil, e
	}
	if token != "" {
		got, err := hex.DecodeString(resp.Header.Get(ResponseMACHeader))
		if err != nil || !hmac.Equal(got, responseMAC(token, nonce, out)) {
			return nil, fmt.Errorf("the answer of %s is not signed with the peering token: something between the clusters changed it, or it is not the cluster the token belongs to", authURL)
		}
	}
	var ir IdentityResponse
	if err := json.Unmarshal(out, &ir); err != nil || ir.Certificate == "" || ir.ProviderCSR == "" || ir.APIServerURL == "" {
		return nil, fmt.Errorf("the answer of %s is not an identity", authURL)
	}
	return &ir, nil
}

// SignRequest adds the Authorization header of the token exchange to r,
// whose body is body, and returns the nonce it used. An introduction's
// token names its introducer (intro=), so that the provider knows which
// introduction to check the MAC with.
func SignRequest(r *http.Request, token string, body []byte) (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	nonce := hex.EncodeToString(b)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	intro := ""
	if introducer := IntroducerOf(token); introducer != "" {
		intro = ",intro=" + introducer
	}
	r.Header.Set("Authorization", fmt.Sprintf("%s ts=%s,nonce=%s%s,mac=%s", AuthorizationScheme, ts, nonce, intro,
		hex.EncodeToString(mac(token, r.Method, r.URL.Path, ts, nonce, body))))
	return nonce, nil
}

func (o ClientOptions) httpClient() *http.Client {
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	return &http.Client{
		Timeout: o.Timeout,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{
				InsecureSkipVerify: o.InsecureSkipVerify, //nolint:gosec // asked for by the ForeignCluster; the CA is pinned and the exchange signed
				RootCAs:            o.RootCAs,
				MinVersion:         tls.VersionTLS12,
				VerifyConnection:   o.verifyPinnedKey,
			},
			Proxy: nil, // peers are reached directly
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
