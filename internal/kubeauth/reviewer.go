// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package kubeauth authenticates and authorizes HTTP callers with the
// cluster's API server, without the dependencies of k8s.io/apiserver: the
// caller's bearer token is authenticated by a TokenReview and the request
// authorized by a SubjectAccessReview, as a kubelet or controller-runtime's
// secure serving does; verdicts are cached, reviews of unknown tokens
// rate-limited. The components' metrics endpoints (Filter) and the
// broker's API use it.
package kubeauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Verdicts are cached: Prometheus scrapes every few seconds with the same
// token, a dashboard polls, and each verdict otherwise costs two API
// requests.
const (
	allowedTTL    = time.Minute
	deniedTTL     = 10 * time.Second
	maxVerdicts   = 1024
	reviewTimeout = 10 * time.Second
	bearerPrefix  = "Bearer "
	reviewRate    = 20
	reviewBurst   = 40
)

// ErrTooManyReviews is a caller refused because too many unknown tokens
// were checked lately: answer 429 with Retry-After.
var ErrTooManyReviews = errors.New("too many callers to check at once; try again")

// Attributes are what a request asks to do, as a SubjectAccessReview
// states it: a resource or a non-resource path. Neither (the zero value)
// asks only who the caller is: any authenticated caller is allowed.
type Attributes struct {
	Resource    *authorizationv1.ResourceAttributes
	NonResource *authorizationv1.NonResourceAttributes
}

func (a Attributes) key() string {
	if r := a.Resource; r != nil {
		return strings.Join([]string{"r", r.Verb, r.Group, r.Resource, r.Subresource, r.Namespace, r.Name}, "\x00")
	}
	if n := a.NonResource; n != nil {
		return strings.Join([]string{"n", n.Verb, n.Path}, "\x00")
	}
	return ""
}

// Verdict is the answer on a caller: Status is http.StatusOK,
// Unauthorized (no token, or one the API server does not accept) or
// Forbidden; User is who the token is for, when authenticated.
type Verdict struct {
	Status int
	User   authenticationv1.UserInfo
}

// Reviewer checks callers against the API server. Safe for concurrent
// use; the zero value is not ready: use NewReviewer.
type Reviewer struct {
	client client.Client
	// reviews bounds the TokenReviews a caller with unknown tokens can
	// make this ask the API server for.
	reviews *rate.Limiter

	mu       sync.Mutex
	verdicts map[verdictKey]cached
}

type verdictKey struct {
	token [sha256.Size]byte
	attrs string
}

type cached struct {
	Verdict
	expires time.Time
}

// NewReviewer returns a Reviewer that asks the API server with c, which
// needs the right to create TokenReviews and SubjectAccessReviews.
func NewReviewer(c client.Client) *Reviewer {
	return &Reviewer{client: c, reviews: rate.NewLimiter(reviewRate, reviewBurst), verdicts: map[verdictKey]cached{}}
}

// Token returns the bearer token of r, or "". The scheme is
// case-insensitive (RFC 9110), as the API server reads it.
func Token(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) <= len(bearerPrefix) || !strings.EqualFold(h[:len(bearerPrefix)], bearerPrefix) {
		return ""
	}
	return strings.TrimSpace(h[len(bearerPrefix):])
}

// Check returns the verdict on the caller of r asking for attrs. An
// error is the API server's, or ErrTooManyReviews. Who a token is for is
// remembered apart from what it may do: a caller asking for several
// things is authenticated once.
func (a *Reviewer) Check(r *http.Request, attrs Attributes) (Verdict, error) {
	token := Token(r)
	if token == "" {
		return Verdict{Status: http.StatusUnauthorized}, nil
	}
	hash := sha256.Sum256([]byte(token))
	key := verdictKey{token: hash, attrs: attrs.key()}
	who := verdictKey{token: hash} // the authentication alone
	now := time.Now()
	v, fresh, known := a.cached(key, now)
	if fresh {
		return v.Verdict, nil
	}
	u, authFresh, _ := a.cached(who, now)
	// Only callers never allowed wait for the limiter: a flood of made-up
	// tokens must not lock Prometheus out when its verdict expires.
	if allowedBefore := known && v.Status == http.StatusOK; !allowedBefore && !a.reviews.Allow() {
		return Verdict{}, ErrTooManyReviews
	}
	ctx, cancel := context.WithTimeout(r.Context(), reviewTimeout)
	defer cancel()
	if !authFresh {
		user, err := a.authenticate(ctx, token)
		if err != nil {
			return Verdict{}, err
		}
		u = cached{Verdict: user}
		a.remember(who, user, now)
	}
	verdict := u.Verdict
	if verdict.Status == http.StatusOK && key != who {
		var err error
		if verdict, err = a.authorize(ctx, u.User, attrs); err != nil {
			return Verdict{}, err
		}
		a.remember(key, verdict, now)
	}
	return verdict, nil
}

// cached returns the verdict remembered for key, whether it is still
// fresh, and whether there is one at all.
func (a *Reviewer) cached(key verdictKey, now time.Time) (cached, bool, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.verdicts[key]
	return v, ok && now.Before(v.expires), ok
}

// remember keeps a verdict for a minute when it allows, ten seconds when
// it refuses.
func (a *Reviewer) remember(key verdictKey, verdict Verdict, now time.Time) {
	ttl := deniedTTL
	if verdict.Status == http.StatusOK {
		ttl = allowedTTL
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.verdicts) >= maxVerdicts {
		for k, v := range a.verdicts {
			if !now.Before(v.expires) {
				delete(a.verdicts, k)
			}
		}
	}
	if len(a.verdicts) < maxVerdicts { // full of fresh verdicts: this one is asked for again next time
		a.verdicts[key] = cached{Verdict: verdict, expires: now.Add(ttl)}
	}
}

// authenticate asks the API server who token is for.
func (a *Reviewer) authenticate(ctx context.Context, token string) (Verdict, error) {
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := a.client.Create(ctx, tr); err != nil {
		return Verdict{}, err
	}
	if !tr.Status.Authenticated {
		return Verdict{Status: http.StatusUnauthorized}, nil
	}
	return Verdict{Status: http.StatusOK, User: tr.Status.User}, nil
}

// authorize asks the API server whether u may do attrs.
func (a *Reviewer) authorize(ctx context.Context, u authenticationv1.UserInfo, attrs Attributes) (Verdict, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		ResourceAttributes: attrs.Resource, NonResourceAttributes: attrs.NonResource,
	}}
	if err := a.client.Create(ctx, sar); err != nil {
		return Verdict{}, err
	}
	if !sar.Status.Allowed {
		return Verdict{Status: http.StatusForbidden, User: u}, nil
	}
	return Verdict{Status: http.StatusOK, User: u}, nil
}
