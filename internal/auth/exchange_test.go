// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package auth

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// stubIssuer records what reached it.
type stubIssuer struct {
	calls  int
	signed string
	err    error
}

func (s *stubIssuer) IssueIdentity(_ context.Context, req *IdentityRequest, signed string) (*IdentityResponse, error) {
	s.calls++
	s.signed = signed
	if s.err != nil {
		return nil, s.err
	}
	return &IdentityResponse{ClusterID: "provider", APIServerURL: "https://127.0.0.1:6443", CACert: "ca", Certificate: "cert for " + req.ClusterID, ProviderCSR: "csr"}, nil
}

const testToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func newExchangeServer(t *testing.T, issuer Issuer) *httptest.Server {
	t.Helper()
	s := &Server{Issuer: issuer, Token: func(context.Context) (string, error) { return testToken, nil }, Limiter: rate.NewLimiter(rate.Inf, 0), PerSource: rate.Inf}
	srv := httptest.NewTLSServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

var sampleRequest = &IdentityRequest{ClusterID: "consumer", Namespace: "liqo", CACert: "ca", CSR: "csr"}

func TestRequestIdentity(t *testing.T) {
	issuer := &stubIssuer{}
	srv := newExchangeServer(t, issuer)
	opts := ClientOptions{InsecureSkipVerify: true}

	resp, err := RequestIdentity(t.Context(), srv.URL, testToken, sampleRequest, opts)
	if err != nil || resp.Certificate != "cert for consumer" || issuer.signed != SignedByToken {
		t.Fatalf("signed request: %+v, %v (signed %q); want the identity with a valid token", resp, err, issuer.signed)
	}

	var ee *ExchangeError
	_, err = RequestIdentity(t.Context(), srv.URL, strings.Repeat("f", 64), sampleRequest, opts)
	if !errors.As(err, &ee) || ee.Reason != ReasonWrongToken || ee.Status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %v, want 401 %s", err, ReasonWrongToken)
	}
	if issuer.calls != 1 {
		t.Fatalf("the issuer was called %d times, want once: a wrong token must not reach it", issuer.calls)
	}

	// Without a token the issuer decides (LAN trust, open policy).
	if _, err := RequestIdentity(t.Context(), srv.URL, "", sampleRequest, opts); err != nil || issuer.signed != "" {
		t.Fatalf("unsigned request: %v (signed %q), want it passed on as not signed", err, issuer.signed)
	}

	issuer.err = &ExchangeError{Status: http.StatusForbidden, Reason: ReasonPolicy, Message: "denied by rule x"}
	_, err = RequestIdentity(t.Context(), srv.URL, testToken, sampleRequest, opts)
	if !IsPolicyRefusal(err) || !strings.Contains(err.Error(), "denied by rule x") {
		t.Fatalf("policy refusal: %v, want a policy ExchangeError with the rule", err)
	}
}

func TestResponseMustBeSigned(t *testing.T) {
	// A server that answers like the auth service but does not hold the
	// token (a man in the middle, or another cluster).
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(&IdentityResponse{ClusterID: "p", APIServerURL: "https://x", Certificate: "c", ProviderCSR: "r"})
	}))
	defer srv.Close()
	_, err := RequestIdentity(t.Context(), srv.URL, testToken, sampleRequest, ClientOptions{InsecureSkipVerify: true})
	if err == nil || !strings.Contains(err.Error(), "not signed with the peering token") {
		t.Fatalf("unsigned answer: %v, want it refused", err)
	}
}

func post(t *testing.T, url string, body []byte, authz string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+PeeringIdentityPath, bytes.NewReader(body))
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := (ClientOptions{InsecureSkipVerify: true}).httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e ExchangeError
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Reason
}

func TestExchangeRefusals(t *testing.T) {
	issuer := &stubIssuer{}
	srv := newExchangeServer(t, issuer)
	body, _ := json.Marshal(sampleRequest)
	sign := func(ts int64, nonce string, b []byte) string {
		tss := strconv.FormatInt(ts, 10)
		return fmt.Sprintf("%s ts=%s,nonce=%s,mac=%s", AuthorizationScheme, tss, nonce, hex.EncodeToString(mac(testToken, http.MethodPost, PeeringIdentityPath, tss, nonce, b)))
	}
	now := time.Now().Unix()
	nonce := strings.Repeat("ab", 16)
	tests := []struct {
		name       string
		body       []byte
		authz      string
		wantStatus int
		wantReason string
	}{
		{"valid", body, sign(now, nonce, body), http.StatusOK, ""},
		{"replayed", body, sign(now, nonce, body), http.StatusUnauthorized, ReasonReplayed},
		{"too old", body, sign(now-int64(2*MaxClockSkew/time.Second), strings.Repeat("cd", 16), body), http.StatusUnauthorized, ReasonExpired},
		{"from the future", body, sign(now+int64(2*MaxClockSkew/time.Second), strings.Repeat("ce", 16), body), http.StatusUnauthorized, ReasonExpired},
		{"body changed after signing", []byte(strings.Replace(string(body), "consumer", "intruder", 1)), sign(now, strings.Repeat("ef", 16), body), http.StatusUnauthorized, ReasonWrongToken},
		{"other scheme", body, "Bearer " + testToken, http.StatusBadRequest, ReasonBadRequest},
		{"short nonce", body, sign(now, "ab", body), http.StatusBadRequest, ReasonBadRequest},
		{"garbage header", body, "Liqo-HMAC-SHA256 ===,,,", http.StatusBadRequest, ReasonBadRequest},
		{"not JSON", []byte("{"), "", http.StatusBadRequest, ReasonBadRequest},
		{"unknown field", []byte(`{"clusterID":"x","admin":true}`), "", http.StatusBadRequest, ReasonBadRequest},
		{"too large", bytes.Repeat([]byte("a"), maxExchangeBytes+10), "", http.StatusBadRequest, ReasonBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, reason := post(t, srv.URL, tc.body, tc.authz)
			if status != tc.wantStatus || reason != tc.wantReason {
				t.Fatalf("got %d %q, want %d %q", status, reason, tc.wantStatus, tc.wantReason)
			}
		})
	}
}

func TestNonceCacheIsBounded(t *testing.T) {
	var n nonceCache
	now := time.Now()
	for i := range maxNonces {
		if ok, full := n.use(strconv.Itoa(i), now); !ok || full {
			t.Fatalf("nonce %d refused early", i)
		}
	}
	if _, full := n.use("one more", now); !full {
		t.Fatal("the cache grew past its bound")
	}
	// Once the window passed, old nonces make room.
	if ok, full := n.use("later", now.Add(3*MaxClockSkew)); !ok || full {
		t.Fatal("expired nonces were not dropped")
	}
}

// FuzzExchange: any body and Authorization header get an answer, never a
// panic, and nothing reaches the issuer without a valid signature or an
// identity request that decodes.
func FuzzExchange(f *testing.F) {
	body, _ := json.Marshal(sampleRequest)
	f.Add(body, "")
	f.Add(body, AuthorizationScheme+" ts=1,nonce=00000000000000000000000000000000,mac=00")
	f.Add([]byte("{"), "Bearer x")
	issuer := &stubIssuer{}
	// No rate limit here: every input must reach the parsing.
	s := &Server{Issuer: issuer, Token: func(context.Context) (string, error) { return testToken, nil }, Limiter: rate.NewLimiter(rate.Inf, 0), PerSource: rate.Inf}
	h := s.Handler()
	f.Fuzz(func(t *testing.T, b []byte, authz string) {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, PeeringIdentityPath, bytes.NewReader(b))
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		before := issuer.calls
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		reached := issuer.calls > before
		// Nobody holding no token can forge a signature: whatever the
		// input, the issuer never hears that the token was valid.
		if reached && issuer.signed != "" {
			t.Fatalf("input %q with Authorization %q reached the issuer as signed with the token", b, authz)
		}
		// Only a well-formed identity request reaches the issuer.
		if reached {
			var parsed IdentityRequest
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&parsed); err != nil {
				t.Fatalf("input %q reached the issuer although it is no identity request: %v", b, err)
			}
		}
		// Every answer is either the identity or a refusal the client can
		// read: a 4xx with a known reason, never a server error.
		switch {
		case rec.Code == http.StatusOK:
			var resp IdentityResponse
			if !reached || json.Unmarshal(rec.Body.Bytes(), &resp) != nil || resp.ClusterID == "" {
				t.Fatalf("200 without an identity (issuer reached: %v): %q", reached, rec.Body.String())
			}
		case rec.Code >= 400 && rec.Code < 500:
			var e ExchangeError
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !knownReasons[e.Reason] || e.Message == "" {
				t.Fatalf("refusal %d is not a readable ExchangeError: %q", rec.Code, rec.Body.String())
			}
		default:
			t.Fatalf("input %q with Authorization %q: status %d, want 200 or a 4xx refusal", b, authz, rec.Code)
		}
	})
}

var knownReasons = map[string]bool{
	ReasonBadRequest: true, ReasonTokenRequired: true, ReasonWrongToken: true, ReasonReplayed: true,
	ReasonExpired: true, ReasonPolicy: true, ReasonNotReady: true, ReasonTooMany: true, ReasonInternal: true,
}

func TestExchangesAreRateLimited(t *testing.T) {
	// A limiter that refills once an hour: exactly its burst gets through,
	// however fast or slow the machine.
	const burst = 3
	s := &Server{Issuer: &stubIssuer{}, Token: func(context.Context) (string, error) { return testToken, nil },
		Limiter: rate.NewLimiter(rate.Every(time.Hour), burst)}
	srv := httptest.NewTLSServer(s.Handler())
	t.Cleanup(srv.Close)
	body, _ := json.Marshal(sampleRequest)
	for i := range burst + 2 {
		status, reason := post(t, srv.URL, body, "")
		if limited := status == http.StatusTooManyRequests && reason == ReasonTooMany; limited != (i >= burst) {
			t.Fatalf("request %d: %d %s; want the first %d served and the rest refused with 429 %s", i+1, status, reason, burst, ReasonTooMany)
		}
	}
}

// TestOneSourceCannotSpendEveryonesExchanges checks that a source past its
// own bound is refused while another source is still served, and that the
// flooder's refusals do not spend the global budget.
func TestOneSourceCannotSpendEveryonesExchanges(t *testing.T) {
	const perSource = 2
	s := &Server{Issuer: &stubIssuer{}, Token: func(context.Context) (string, error) { return testToken, nil },
		Limiter: rate.NewLimiter(rate.Every(time.Hour), perSource+1), PerSource: rate.Every(time.Hour), PerSourceBurst: perSource}
	body, _ := json.Marshal(sampleRequest)
	send := func(src string) int {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, PeeringIdentityPath, bytes.NewReader(body))
		r.RemoteAddr = src
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		return w.Code
	}
	for i := range perSource + 3 {
		if code := send("192.0.2.1:1000"); (code == http.StatusTooManyRequests) != (i >= perSource) {
			t.Fatalf("flooder request %d: %d; want the first %d served and the rest refused with 429", i+1, code, perSource)
		}
	}
	if code := send("192.0.2.2:1000"); code == http.StatusTooManyRequests {
		t.Fatalf("another source: %d; want it served although the first one flooded", code)
	}
}

// An introduction's token signs for the consumer it was made for, by the
// introducer it names, and for nobody else.
func TestIntroductionToken(t *testing.T) {
	issuer := &stubIssuer{}
	introToken := "broker" + IntroductionSeparator + strings.Repeat("ab", 32)
	s := &Server{Issuer: issuer, Token: func(context.Context) (string, error) { return testToken, nil },
		Introduction: func(_ context.Context, introducer, consumer string) (string, error) {
			if introducer == "broker" && consumer == "consumer" {
				return introToken, nil
			}
			return "", nil
		},
		Limiter: rate.NewLimiter(rate.Inf, 0), PerSource: rate.Inf}
	srv := httptest.NewTLSServer(s.Handler())
	t.Cleanup(srv.Close)
	opts := ClientOptions{InsecureSkipVerify: true}

	if IntroducerOf(introToken) != "broker" || IntroducerOf(testToken) != "" {
		t.Fatalf("IntroducerOf(%q) = %q, IntroducerOf(own token) = %q", introToken, IntroducerOf(introToken), IntroducerOf(testToken))
	}
	resp, err := RequestIdentity(t.Context(), srv.URL, introToken, sampleRequest, opts)
	if err != nil || resp.Certificate != "cert for consumer" || issuer.signed != SignedByIntroduction {
		t.Fatalf("introduced consumer: %+v, %v (signed %q); want the identity, signed by introduction", resp, err, issuer.signed)
	}
	calls := issuer.calls
	var ee *ExchangeError
	// Another consumer holding the same token.
	other := *sampleRequest
	other.ClusterID = "other"
	if _, err := RequestIdentity(t.Context(), srv.URL, introToken, &other, opts); !errors.As(err, &ee) || ee.Reason != ReasonWrongToken {
		t.Fatalf("another consumer with the introduction's token: %v, want %s", err, ReasonWrongToken)
	}
	// The same secret said to come from another introducer.
	forged := "elsewhere" + IntroductionSeparator + strings.Repeat("ab", 32)
	if _, err := RequestIdentity(t.Context(), srv.URL, forged, sampleRequest, opts); !errors.As(err, &ee) || ee.Reason != ReasonWrongToken {
		t.Fatalf("the token under another introducer: %v, want %s", err, ReasonWrongToken)
	}
	// A wrong secret under the right introducer.
	wrong := "broker" + IntroductionSeparator + strings.Repeat("cd", 32)
	if _, err := RequestIdentity(t.Context(), srv.URL, wrong, sampleRequest, opts); !errors.As(err, &ee) || ee.Reason != ReasonWrongToken {
		t.Fatalf("a wrong introduction secret: %v, want %s", err, ReasonWrongToken)
	}
	// The cluster's own token is not an introduction, nor the reverse.
	if _, err := RequestIdentity(t.Context(), srv.URL, "broker"+IntroductionSeparator+testToken, sampleRequest, opts); !errors.As(err, &ee) || ee.Reason != ReasonWrongToken {
		t.Fatalf("the cluster's token as an introduction: %v, want %s", err, ReasonWrongToken)
	}
	if issuer.calls != calls {
		t.Fatalf("the issuer was reached %d times by refused introductions", issuer.calls-calls)
	}
	// A malformed introducer is a malformed header.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+PeeringIdentityPath, strings.NewReader("{}"))
	req.Header.Set("Authorization", AuthorizationScheme+" ts=1,nonce=0123456789abcdef,intro=Not_A_Label,mac=00")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("a malformed introducer: %d, want 400", rec.Code)
	}
}
