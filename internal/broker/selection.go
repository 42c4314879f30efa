// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker/decide"
	"github.com/liqo-go/liqo/internal/kubeauth"
)

// SelectionResource is the resource, in group broker.liqo.io, a caller
// needs get (to read) or update (to change) on, in a consumer's tenant
// namespace, to read or change that consumer's selection.
const SelectionResource = "selections"

// namespaceGVK reads a namespace's metadata alone.
var namespaceGVK = corev1.SchemeGroupVersion.WithKind("Namespace")

// saPrefix is how the API server names a service account's user.
const saPrefix = "system:serviceaccount:"

// consumerOf returns the consumer a request is about: the consumer
// parameter, or else the consumer whose tenant namespace the caller's
// service account lives in (what liqoctl broker login gives).
func (s *Server) consumerOf(r *http.Request) (string, error) {
	if id := r.URL.Query().Get("consumer"); id != "" {
		if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
			return "", errBadRequest(fmt.Sprintf("consumer: %q is not a cluster ID: %s", id, strings.Join(errs, "; ")))
		}
		return id, nil
	}
	v, err := s.Reviewer.Check(r, kubeauth.Attributes{})
	if err != nil {
		return "", err
	}
	if v.Status == http.StatusUnauthorized {
		return "", errUnauthorized()
	}
	if rest, ok := strings.CutPrefix(v.User.Username, saPrefix); ok {
		ns, _, _ := strings.Cut(rest, ":")
		if id, ok := strings.CutPrefix(ns, discoveryv1alpha1.TenantNamespace("")); ok && id != "" {
			return id, nil
		}
	}
	return "", errBadRequest(fmt.Sprintf("consumer: name the consumer (?consumer=ID); user %q is not a service account of a consumer's tenant namespace", v.User.Username))
}

// selectionFor checks that the caller may do verb on the selection of the
// consumer the request is about, and returns that consumer.
func (s *Server) selectionFor(r *http.Request, verb string) (string, error) {
	consumer, err := s.consumerOf(r)
	if err != nil {
		return "", err
	}
	if err := s.authorize(r, verb, SelectionResource, discoveryv1alpha1.TenantNamespace(consumer), brokerv1alpha1.SelectionName); err != nil {
		return "", err
	}
	// Known only to those allowed to ask: an unknown consumer and another
	// consumer's are told apart only after authorization.
	var ns metav1.PartialObjectMetadata
	ns.SetGroupVersionKind(namespaceGVK)
	if err := s.Reader.Get(r.Context(), client.ObjectKey{Name: discoveryv1alpha1.TenantNamespace(consumer)}, &ns); apierrors.IsNotFound(err) {
		return "", errNotFound(fmt.Sprintf("the broker serves no consumer %s", consumer))
	} else if err != nil {
		return "", err
	}
	return consumer, nil
}

// SelectionView is a consumer's selection in the v1 API.
type SelectionView struct {
	Kind       string   `json:"kind"`
	APIVersion string   `json:"apiVersion"`
	Consumer   string   `json:"consumer"`
	Providers  []string `json:"providers"`
	// Introductions the consumer asked besides its providers.
	Introductions []string `json:"introductions,omitempty"`
	// Policy, when set, has the broker choose the providers
	// (status.decision); Providers and Excluded then pin providers in
	// and out.
	Policy   *brokerv1alpha1.Policy         `json:"policy,omitempty"`
	Excluded []string                       `json:"excluded,omitempty"`
	Status   brokerv1alpha1.SelectionStatus `json:"status"`
}

func view(consumer string, sel *brokerv1alpha1.Selection) SelectionView {
	v := SelectionView{Kind: "Selection", APIVersion: APIVersion, Consumer: consumer, Providers: []string{}}
	if sel != nil {
		v.Providers = append(v.Providers, sel.Spec.Providers...)
		v.Introductions = sel.Spec.Introductions
		v.Policy, v.Excluded = sel.Spec.Policy, sel.Spec.Excluded
		v.Status = sel.Status
	}
	return v
}

// getSelection answers GET /api/v1/selection.
func (s *Server) getSelection(w http.ResponseWriter, r *http.Request) error {
	consumer, err := s.selectionFor(r, "get")
	if err != nil {
		return err
	}
	sel, err := s.readSelection(r.Context(), consumer)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view(consumer, sel))
	return nil
}

// readSelection reads the consumer's Selection through to the API server,
// as changeSelection writes it: a consumer reads back its own change at
// once, never the cache's older copy.
func (s *Server) readSelection(ctx context.Context, consumer string) (*brokerv1alpha1.Selection, error) {
	var sel brokerv1alpha1.Selection
	err := s.Writer.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer), Name: brokerv1alpha1.SelectionName}, &sel)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the selection of %s: %w", consumer, err)
	}
	return &sel, nil
}

// selectionBody is what PUT /api/v1/selection takes.
type selectionBody struct {
	Providers []string `json:"providers"`
}

// putSelection answers PUT /api/v1/selection: the consumer's providers,
// all at once.
func (s *Server) putSelection(w http.ResponseWriter, r *http.Request) error {
	consumer, err := s.selectionFor(r, "update")
	if err != nil {
		return err
	}
	var body selectionBody
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return errBadRequest(fmt.Sprintf("body: want {\"providers\": [cluster IDs]}: %v", err))
	}
	if len(body.Providers) > brokerv1alpha1.MaxSelectedProviders {
		return errBadRequest(fmt.Sprintf("providers: %d, at most %d", len(body.Providers), brokerv1alpha1.MaxSelectedProviders))
	}
	known, err := s.providers(r.Context())
	if err != nil {
		return err
	}
	for i, p := range body.Providers {
		if errs := validation.IsDNS1123Label(p); len(errs) > 0 {
			return errBadRequest(fmt.Sprintf("providers[%d]: %q is not a cluster ID", i, p))
		}
		if !known[p] {
			return errNotFound(fmt.Sprintf("providers[%d]: the broker serves no provider %s", i, p))
		}
	}
	slices.Sort(body.Providers)
	body.Providers = slices.Compact(body.Providers)
	sel, err := s.changeSelection(r.Context(), consumer, func(spec *brokerv1alpha1.SelectionSpec) {
		spec.Providers = body.Providers
		spec.Excluded = slices.DeleteFunc(spec.Excluded, func(p string) bool { return slices.Contains(body.Providers, p) })
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view(consumer, sel))
	return nil
}

// putPolicy answers PUT /api/v1/selection/policy: the broker chooses the
// consumer's providers under this policy from now on.
func (s *Server) putPolicy(w http.ResponseWriter, r *http.Request) error {
	consumer, err := s.selectionFor(r, "update")
	if err != nil {
		return err
	}
	var policy brokerv1alpha1.Policy
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&policy); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return errBadRequest(fmt.Sprintf("body: want a policy (docs/broker.md): %v", err))
	}
	current, err := s.readSelection(r.Context(), consumer)
	if err != nil {
		return err
	}
	spec := brokerv1alpha1.SelectionSpec{}
	if current != nil {
		spec = *current.Spec.DeepCopy()
	}
	spec.Policy = &policy
	if errs := decide.Validate(&spec); len(errs) > 0 {
		return errBadRequest(errs.ToAggregate().Error())
	}
	sel, err := s.changeSelection(r.Context(), consumer, func(spec *brokerv1alpha1.SelectionSpec) { spec.Policy = policy.DeepCopy() })
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view(consumer, sel))
	return nil
}

// deletePolicy answers DELETE /api/v1/selection/policy: back to the
// providers enabled by hand (spec.providers).
func (s *Server) deletePolicy(w http.ResponseWriter, r *http.Request) error {
	consumer, err := s.selectionFor(r, "update")
	if err != nil {
		return err
	}
	sel, err := s.changeSelection(r.Context(), consumer, func(spec *brokerv1alpha1.SelectionSpec) { spec.Policy, spec.Excluded = nil, nil })
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view(consumer, sel))
	return nil
}

// toggle answers the original /api/toggle?id=&enable=, GET or POST.
func (s *Server) toggle(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	id := q.Get("id")
	if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
		return errBadRequest(fmt.Sprintf("id: %q is not a cluster ID: %s", id, strings.Join(errs, "; ")))
	}
	enable, err := strconv.ParseBool(q.Get("enable"))
	if err != nil {
		return errBadRequest(fmt.Sprintf("enable: %q, want true or false", q.Get("enable")))
	}
	consumer, err := s.selectionFor(r, "update")
	if err != nil {
		return err
	}
	current, err := s.readSelection(r.Context(), consumer)
	if err != nil {
		return err
	}
	selected := current != nil && slices.Contains(current.Spec.Providers, id)
	if !selected || enable {
		known, err := s.providers(r.Context())
		if err != nil {
			return err
		}
		if !known[id] {
			return errNotFound(fmt.Sprintf("id: the broker serves no provider %s", id))
		}
	}
	sel, err := s.changeSelection(r.Context(), consumer, func(spec *brokerv1alpha1.SelectionSpec) {
		spec.Providers = slices.DeleteFunc(spec.Providers, func(p string) bool { return p == id })
		spec.Excluded = slices.DeleteFunc(spec.Excluded, func(p string) bool { return p == id })
		switch {
		case enable:
			spec.Providers = append(spec.Providers, id)
			slices.Sort(spec.Providers)
		case spec.Policy != nil:
			// Under a policy, disabling pins the provider out.
			spec.Excluded = append(spec.Excluded, id)
			slices.Sort(spec.Excluded)
		}
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view(consumer, sel))
	return nil
}

// providers are the clusters the broker can orchestrate to: those it
// consumes (no offer needed to tell).
func (s *Server) providers(ctx context.Context) (map[string]bool, error) {
	var fcs discoveryv1alpha1.ForeignClusterList
	if err := s.Reader.List(ctx, &fcs); err != nil {
		return nil, fmt.Errorf("listing the ForeignClusters: %w", err)
	}
	out := map[string]bool{}
	for i := range fcs.Items {
		if id := fcs.Items[i].Spec.ClusterIdentity.ClusterID; id != "" && outgoingAccepted(&fcs.Items[i]) {
			out[id] = true
		}
	}
	return out, nil
}

// changeSelection applies change to the consumer's Selection's spec,
// creating it the first time; it reads and writes through to the API
// server, so that two changes one after the other never lose the first.
func (s *Server) changeSelection(ctx context.Context, consumer string, change func(spec *brokerv1alpha1.SelectionSpec)) (*brokerv1alpha1.Selection, error) {
	key := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer), Name: brokerv1alpha1.SelectionName}
	var out *brokerv1alpha1.Selection
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var sel brokerv1alpha1.Selection
		err := s.Writer.Get(ctx, key, &sel)
		if apierrors.IsNotFound(err) {
			sel = brokerv1alpha1.Selection{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
			change(&sel.Spec)
			if err := s.Writer.Create(ctx, &sel); err != nil {
				if apierrors.IsAlreadyExists(err) {
					return apierrors.NewConflict(brokerv1alpha1.GroupVersion.WithResource(SelectionResource).GroupResource(), key.Name, err)
				}
				return err
			}
			out = &sel
			return nil
		}
		if err != nil {
			return err
		}
		spec := *sel.Spec.DeepCopy()
		change(&spec)
		if equality.Semantic.DeepEqual(spec, sel.Spec) {
			out = &sel
			return nil
		}
		sel.Spec = spec
		if err := s.Writer.Update(ctx, &sel); err != nil {
			return err
		}
		out = &sel
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("changing the selection of %s: %w", consumer, err)
	}
	return out, nil
}

// IntroductionView is the broker's introduction of the calling consumer to
// one provider in the v1 API: with State Accepted, what liqoctl add takes
// (auth URL, cluster ID, token), the token valid for this consumer alone.
type IntroductionView struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Consumer   string `json:"consumer"`
	brokerv1alpha1.IntroducedProvider
}

// introductionOf returns the consumer's introduction to id, if requested.
func introductionOf(consumer string, sel *brokerv1alpha1.Selection, id string) (IntroductionView, bool) {
	v := IntroductionView{Kind: "Introduction", APIVersion: APIVersion, Consumer: consumer,
		IntroducedProvider: brokerv1alpha1.IntroducedProvider{ClusterID: id, State: brokerv1alpha1.IntroductionPending,
			Message: "the broker is introducing this consumer"}}
	if sel == nil || (!slices.Contains(sel.Spec.Providers, id) && !slices.Contains(sel.Spec.Introductions, id)) {
		return v, false
	}
	for _, in := range sel.Status.Introductions {
		if in.ClusterID == id {
			v.IntroducedProvider = in
		}
	}
	return v, true
}

// getIntroduction answers GET /api/v1/clusters/{id}/introduction: the
// caller's introduction to provider id, 404 when it asked none.
func (s *Server) getIntroduction(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
		return errBadRequest(fmt.Sprintf("id: %q is not a cluster ID: %s", id, strings.Join(errs, "; ")))
	}
	consumer, err := s.selectionFor(r, "get")
	if err != nil {
		return err
	}
	sel, err := s.readSelection(r.Context(), consumer)
	if err != nil {
		return err
	}
	v, ok := introductionOf(consumer, sel, id)
	if !ok {
		return errNotFound(fmt.Sprintf("consumer %s asked no introduction to %s (POST it)", consumer, id))
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// postIntroduction answers POST /api/v1/clusters/{id}/introduction: the
// caller asks to be introduced to provider id (spec.introductions of its
// Selection). 200 with the token once the provider accepted, 202 while it
// has not answered, 200 with State Refused and the provider's reason.
func (s *Server) postIntroduction(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
		return errBadRequest(fmt.Sprintf("id: %q is not a cluster ID: %s", id, strings.Join(errs, "; ")))
	}
	consumer, err := s.selectionFor(r, "update")
	if err != nil {
		return err
	}
	if id == consumer {
		return errBadRequest("id: a consumer is not introduced to itself")
	}
	known, err := s.providers(r.Context())
	if err != nil {
		return err
	}
	if !known[id] {
		return errNotFound(fmt.Sprintf("id: the broker serves no provider %s", id))
	}
	sel, err := s.changeSelection(r.Context(), consumer, func(spec *brokerv1alpha1.SelectionSpec) {
		if !slices.Contains(spec.Introductions, id) {
			if len(spec.Introductions) >= brokerv1alpha1.MaxSelectedProviders {
				return
			}
			spec.Introductions = append(spec.Introductions, id)
			slices.Sort(spec.Introductions)
		}
	})
	if err != nil {
		return err
	}
	v, ok := introductionOf(consumer, sel, id)
	if !ok {
		return errBadRequest(fmt.Sprintf("introductions: at most %d", brokerv1alpha1.MaxSelectedProviders))
	}
	code := http.StatusAccepted
	if v.State != brokerv1alpha1.IntroductionPending {
		code = http.StatusOK
	}
	writeJSON(w, code, v)
	return nil
}
