// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
)

// ValidatePath is where the PeeringRequest webhook is served.
const ValidatePath = "/validate-discovery-liqo-io-v1alpha1-peeringrequest"

// Validator is the validating admission webhook for PeeringRequests.
type Validator struct {
	// Policy decides who may peer.
	Policy *Policy
	// Decoder decodes the objects under review.
	Decoder admission.Decoder
}

// Handle implements admission.Handler.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	var pr discoveryv1alpha1.PeeringRequest
	if err := v.Decoder.Decode(req, &pr); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	id := pr.Spec.ClusterIdentity.ClusterID
	user := req.UserInfo.Username
	consumer := strings.HasPrefix(user, identity.ConsumerUserPrefix)
	// A consumer's identity may only speak for its own cluster.
	if consumer && user != identity.ConsumerUserPrefix+id {
		return denied(fmt.Sprintf("identity rule: user %s may only create the PeeringRequest of cluster %s, not of %s",
			user, strings.TrimPrefix(user, identity.ConsumerUserPrefix), id))
	}
	if req.Operation == admissionv1.Update {
		var old discoveryv1alpha1.PeeringRequest
		if err := v.Decoder.DecodeRaw(req.OldObject, &old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		// The provider's finalizer guarantees the revocation: a consumer
		// may not remove it, nor hand the object to an owner.
		if consumer && (!equality.Semantic.DeepEqual(old.Finalizers, pr.Finalizers) || !equality.Semantic.DeepEqual(old.OwnerReferences, pr.OwnerReferences)) {
			return denied("identity rule: a consumer may not change the finalizers or owners of its PeeringRequest; delete it to unpeer")
		}
		// Labels, the provider's finalizer, deletion: nothing the policy is
		// about.
		if equality.Semantic.DeepEqual(old.Spec, pr.Spec) {
			return admission.Allowed("")
		}
	}
	if pr.Spec.VirtualKubeletCSR != "" {
		if err := identity.CheckCSR([]byte(pr.Spec.VirtualKubeletCSR), identity.VirtualKubeletUserPrefix+id); err != nil {
			return denied("spec.virtualKubeletCSR: " + err.Error())
		}
	}
	err := v.Policy.Check(ctx, id, req.Operation == admissionv1.Create)
	var pe *PolicyError
	switch {
	case errors.As(err, &pe):
		return denied(fmt.Sprintf("peering policy rule %s: %s", pe.Rule, pe.Message))
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.Allowed("the peering policy admits cluster " + id)
}

// denied refuses the request as Forbidden, marked with
// CausePeeringRefused so that the consumer knows the webhook refused it.
func denied(msg string) admission.Response {
	resp := admission.Denied(msg)
	resp.Result.Details = &metav1.StatusDetails{
		Group: discoveryv1alpha1.GroupVersion.Group, Kind: "PeeringRequest",
		Causes: []metav1.StatusCause{{Type: discoveryv1alpha1.CausePeeringRefused, Message: msg}},
	}
	return resp
}

// RefusedByWebhook tells whether err is a refusal of the provider's
// PeeringRequest webhook (see denied), as opposed to any other Forbidden.
func RefusedByWebhook(err error) bool {
	var s apierrors.APIStatus
	if !errors.As(err, &s) || s.Status().Details == nil {
		return false
	}
	for _, c := range s.Status().Details.Causes {
		if c.Type == discoveryv1alpha1.CausePeeringRefused {
			return true
		}
	}
	return false
}
