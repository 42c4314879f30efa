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
		return admission.Denied(fmt.Sprintf("identity rule: user %s may only create the PeeringRequest of cluster %s, not of %s",
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
			return admission.Denied("identity rule: a consumer may not change the finalizers or owners of its PeeringRequest; delete it to unpeer")
		}
		// Labels, the provider's finalizer, deletion: nothing the policy is
		// about.
		if equality.Semantic.DeepEqual(old.Spec, pr.Spec) {
			return admission.Allowed("")
		}
	}
	if pr.Spec.VirtualKubeletCSR != "" {
		if err := identity.CheckCSR([]byte(pr.Spec.VirtualKubeletCSR), identity.VirtualKubeletUserPrefix+id); err != nil {
			return admission.Denied("spec.virtualKubeletCSR: " + err.Error())
		}
	}
	err := v.Policy.Check(ctx, id, req.Operation == admissionv1.Create)
	var pe *PolicyError
	switch {
	case errors.As(err, &pe):
		return admission.Denied(fmt.Sprintf("peering policy rule %s: %s", pe.Rule, pe.Message))
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.Allowed("the peering policy admits cluster " + id)
}
