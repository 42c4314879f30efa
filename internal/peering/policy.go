// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/foreigncluster"
)

// PolicyError is a peering refused by the local policy. Rule names the
// setting that refused it, so that the operator knows what to change.
type PolicyError struct {
	Rule    string
	Message string
}

func (e *PolicyError) Error() string { return e.Message + " (" + e.Rule + ")" }

var clusterIDPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ValidClusterID reports whether id can be a ClusterID.
func ValidClusterID(id string) bool { return len(id) <= 63 && clusterIDPattern.MatchString(id) }

// Policy decides whether a cluster may peer with this one (incoming).
type Policy struct {
	// Reader reads ForeignClusters and PeeringRequests.
	Reader client.Reader
	// LocalClusterID is this cluster's ID.
	LocalClusterID string
	// Config returns the ClusterConfig in force; nil means the defaults.
	Config func() *configv1alpha1.ClusterConfig
}

// Check returns a *PolicyError when clusterID may not peer with this
// cluster. newPeering says whether admitting it would add a peering (the
// cap on incoming peerings only applies then).
func (p *Policy) Check(ctx context.Context, clusterID string, newPeering bool) error {
	if clusterID == p.LocalClusterID {
		return &PolicyError{Rule: "self", Message: "a cluster cannot peer with itself"}
	}
	var pc configv1alpha1.PeeringConfig
	if p.Config != nil {
		if cc := p.Config(); cc != nil {
			pc = cc.Spec.PeeringConfig
		}
	}
	fc, err := foreigncluster.Find(ctx, p.Reader, clusterID)
	if err != nil {
		return err
	}
	incoming := discoveryv1alpha1.PeeringEnabledAuto
	if fc != nil && fc.Spec.IncomingPeeringEnabled != "" {
		incoming = fc.Spec.IncomingPeeringEnabled
	}
	if slices.Contains(pc.DeniedClusterIDs, clusterID) {
		return &PolicyError{Rule: "spec.peeringConfig.deniedClusterIDs", Message: fmt.Sprintf("cluster %s is in the ClusterConfig's denied cluster IDs", clusterID)}
	}
	if incoming == discoveryv1alpha1.PeeringEnabledNo {
		return &PolicyError{Rule: "ForeignCluster spec.incomingPeeringEnabled", Message: fmt.Sprintf("incoming peering is disabled on ForeignCluster %s", fc.Name)}
	}
	if incoming != discoveryv1alpha1.PeeringEnabledYes && len(pc.AllowedClusterIDs) > 0 && !slices.Contains(pc.AllowedClusterIDs, clusterID) {
		return &PolicyError{Rule: "spec.peeringConfig.allowedClusterIDs", Message: fmt.Sprintf("cluster %s is not in the ClusterConfig's allowed cluster IDs", clusterID)}
	}
	if newPeering && pc.MaxIncomingPeerings > 0 && incoming != discoveryv1alpha1.PeeringEnabledYes {
		var list discoveryv1alpha1.PeeringRequestList
		if err := p.Reader.List(ctx, &list); err != nil {
			return fmt.Errorf("counting PeeringRequests: %w", err)
		}
		n := 0
		for i := range list.Items {
			if list.Items[i].Name != clusterID && list.Items[i].DeletionTimestamp.IsZero() {
				n++
			}
		}
		if n >= int(pc.MaxIncomingPeerings) {
			return &PolicyError{Rule: "spec.peeringConfig.maxIncomingPeerings", Message: fmt.Sprintf("this cluster already has %d incoming peerings, the maximum", n)}
		}
	}
	return nil
}

// hasPeeringRequest reports whether clusterID already has a PeeringRequest.
func hasPeeringRequest(ctx context.Context, r client.Reader, clusterID string) (bool, error) {
	var pr discoveryv1alpha1.PeeringRequest
	err := r.Get(ctx, client.ObjectKey{Name: clusterID}, &pr)
	if err == nil {
		return pr.DeletionTimestamp.IsZero(), nil
	}
	return false, client.IgnoreNotFound(err)
}

// samePinnedCA reports whether caPEM is, byte for byte (bar surrounding
// space), the CA bundle this cluster pinned for clusterID. Comparing whole
// bundles, not the fingerprint of the first certificate, keeps an extra CA
// from riding along.
func samePinnedCA(ctx context.Context, r client.Reader, namespace, clusterID string, caPEM []byte) (bool, error) {
	var secret corev1.Secret
	err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: foreigncluster.CASecretName(clusterID)}, &secret)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return bytes.Equal(bytes.TrimSpace(secret.Data[foreigncluster.CASecretKey]), bytes.TrimSpace(caPEM)), nil
}
