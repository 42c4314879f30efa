// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/identity"
)

// Keys and annotations of the Secret liqo-peer-<consumer>, which a provider
// keeps in its Liqo namespace for each consumer that exchanged a token.
const (
	// PeerSecretProviderKey is the private key of the provider's identity in
	// the consumer (liqo-provider-<provider>); it never leaves the provider.
	PeerSecretProviderKey = "provider.key"
	// PeerSecretKubeconfig is the kubeconfig assembled once the consumer
	// answered with the certificate: it manages Advertisements in the
	// consumer's tenant namespace, and nothing else.
	PeerSecretKubeconfig = "kubeconfig"
)

// PeerSecretName is the provider's Secret for consumer clusterID.
func PeerSecretName(clusterID string) string { return "liqo-peer-" + clusterID }

// ConsumerRBACName names the ClusterRole and ClusterRoleBinding that let
// liqo-consumer-<clusterID> create its PeeringRequest.
func ConsumerRBACName(clusterID string) string { return identity.ConsumerUserPrefix + clusterID }

// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles;clusterrolebindings;roles;rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.liqo.io,resources=peeringrequests,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.liqo.io,resources=peeringrequests/status,verbs=get;update;patch

// Issuer answers the auth service's token exchange on the provider.
type Issuer struct {
	// Client writes RBAC, Secrets and CertificateSigningRequests; it should
	// read through to the API server.
	Client client.Client
	// Namespace is the Liqo namespace.
	Namespace string
	// Policy decides who may peer.
	Policy *Policy
	// Config returns the ClusterConfig in force.
	Config func() *configv1alpha1.ClusterConfig
	// Local returns this cluster's identity (API server URL and CA).
	Local auth.IdentitySource
	// Lifetime of the issued certificates; identity.DefaultLifetime when 0.
	Lifetime time.Duration
}

func refuse(status int, reason, format string, args ...any) error {
	return &auth.ExchangeError{Status: status, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// IssueIdentity implements auth.Issuer.
func (i *Issuer) IssueIdentity(ctx context.Context, req *auth.IdentityRequest, signed string) (*auth.IdentityResponse, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("consumer", req.ClusterID)
	if !ValidClusterID(req.ClusterID) {
		return nil, refuse(http.StatusBadRequest, auth.ReasonBadRequest, "clusterID %q is not a DNS label", req.ClusterID)
	}
	if req.Namespace == "" || req.CSR == "" || req.CACert == "" {
		return nil, refuse(http.StatusBadRequest, auth.ReasonBadRequest, "namespace, caCert and csr are required")
	}
	caFP, err := auth.Fingerprint([]byte(req.CACert))
	if err != nil {
		return nil, refuse(http.StatusBadRequest, auth.ReasonBadRequest, "caCert: %v", err)
	}
	user := identity.ConsumerUserPrefix + req.ClusterID
	if err := identity.CheckCSR([]byte(req.CSR), user); err != nil {
		return nil, refuse(http.StatusBadRequest, auth.ReasonBadRequest, "csr: %v", err)
	}

	by, err := i.authenticate(ctx, req, caFP, signed)
	if err != nil {
		return nil, err
	}
	exists, err := hasPeeringRequest(ctx, i.Client, req.ClusterID)
	if err != nil {
		return nil, err
	}
	if err := i.Policy.Check(ctx, req.ClusterID, !exists); err != nil {
		var pe *PolicyError
		if errors.As(err, &pe) {
			return nil, refuse(http.StatusForbidden, auth.ReasonPolicy, "%s", pe.Error())
		}
		return nil, err
	}
	local, err := i.Local(ctx)
	if err != nil {
		return nil, refuse(http.StatusServiceUnavailable, auth.ReasonNotReady, "%v", err)
	}

	providerKey, providerCSR, err := identity.NewKeyAndCSR(identity.ProviderUserPrefix + local.ClusterID)
	if err != nil {
		return nil, err
	}
	if err := ensureConsumerRBAC(ctx, i.Client, req.ClusterID, string(providerCSR)); err != nil {
		return nil, err
	}
	cert, err := identity.Issue(ctx, i.Client, nil, []byte(req.CSR), user, i.Lifetime)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: i.Namespace, Name: PeerSecretName(req.ClusterID)}}
	if _, err := controllerutil.CreateOrUpdate(ctx, i.Client, secret, func() error {
		secret.Labels = peerLabels(req.ClusterID)
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		secret.Annotations[discoveryv1alpha1.AuthenticatedByAnnotation] = by
		secret.Annotations[discoveryv1alpha1.ExchangedAtAnnotation] = time.Now().UTC().Format(time.RFC3339)
		// A new key for the next verification; what was verified (the
		// kubeconfig, the API server the ID is bound to) stays until then.
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data[PeerSecretProviderKey] = providerKey
		return nil
	}); err != nil {
		return nil, fmt.Errorf("storing the provider key for %s: %w", req.ClusterID, err)
	}
	log.Info("Issued a peering identity", "user", user, "authenticatedBy", by)
	return &auth.IdentityResponse{
		ClusterID:       local.ClusterID,
		APIServerURL:    local.APIServerURL,
		CACert:          local.CACert,
		Certificate:     string(cert),
		ProviderCSR:     string(providerCSR),
		AuthenticatedBy: by,
	}, nil
}

// authenticate says how the consumer proved who it is: with the token,
// with an introduction's token (the auth service checked it was made for
// this consumer), as a LAN peer whose CA this cluster pinned at discovery,
// or not at all when the policy does not require a token.
func (i *Issuer) authenticate(ctx context.Context, req *auth.IdentityRequest, caFP string, signed string) (string, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("consumer", req.ClusterID)
	if signed != "" {
		return signed, nil
	}
	var pc configv1alpha1.PeeringConfig
	if cc := i.Config(); cc != nil {
		pc = cc.Spec.PeeringConfig
	}
	if pc.TrustLANPeers != nil && *pc.TrustLANPeers {
		fc, err := foreigncluster.Find(ctx, i.Client, req.ClusterID)
		if err != nil {
			return "", err
		}
		// The caller is not authenticated yet: why LAN trust did not apply
		// (which clusters were seen, which CA is pinned) is logged here,
		// never told; it answers like any request without a token.
		switch {
		case fc == nil || !seenOnLAN(fc):
			// fall through to the token requirement below
		case !meta.IsStatusConditionTrue(fc.Status.Conditions, discoveryv1alpha1.ConditionCATrusted) || fc.Status.TrustedCAFingerprint != caFP:
			log.Info("LAN trust refused: the request's CA is not the one pinned at discovery",
				"pinned", fc.Status.TrustedCAFingerprint, "presented", caFP)
			return "", errTokenRequired
		default:
			same, err := samePinnedCA(ctx, i.Client, i.Namespace, req.ClusterID, []byte(req.CACert))
			if err != nil {
				return "", err
			}
			if !same {
				log.Info("LAN trust refused: the request's CA bundle is not exactly the one pinned at discovery")
				return "", errTokenRequired
			}
			return "lan-trust", nil
		}
	}
	if pc.RequireToken != nil && !*pc.RequireToken {
		return "open", nil
	}
	return "", errTokenRequired
}

// errTokenRequired is the one answer to a request this cluster cannot
// authenticate.
var errTokenRequired = refuse(http.StatusUnauthorized, auth.ReasonTokenRequired,
	"this cluster requires a peering token: ask its operator for the output of liqoctl generate-add-command")

// seenOnLAN reports whether fc is a cluster found on the LAN and seen
// there now. A cluster added by hand, found through DNS or known from an
// incoming peering is never LAN-trusted, whatever its sources say.
func seenOnLAN(fc *discoveryv1alpha1.ForeignCluster) bool {
	if fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] != string(discoveryv1alpha1.LanDiscovery) {
		return false
	}
	for _, s := range fc.Status.Sources {
		if s.Type == discoveryv1alpha1.LanDiscovery {
			return true
		}
	}
	return false
}

func peerLabels(clusterID string) map[string]string {
	return map[string]string{
		discoveryv1alpha1.ClusterIDLabel: clusterID,
		discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue,
	}
}

// ensureConsumerRBAC creates or repairs the ClusterRole and binding that
// let liqo-consumer-<id> create PeeringRequests (the webhook admits only
// its own), read, update and delete its own, and read the ClusterRole
// itself, which publishes providerCSR.
func ensureConsumerRBAC(ctx context.Context, c client.Client, clusterID, providerCSR string) error {
	name := ConsumerRBACName(clusterID)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, role, func() error {
		role.Labels = peerLabels(clusterID)
		metav1.SetMetaDataAnnotation(&role.ObjectMeta, discoveryv1alpha1.ProviderCSRAnnotation, providerCSR)
		role.Rules = []rbacv1.PolicyRule{
			{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{name}, Verbs: []string{"get"}},
			// RBAC cannot restrict create by name; the webhook does.
			{APIGroups: []string{discoveryv1alpha1.GroupVersion.Group}, Resources: []string{"peeringrequests"}, Verbs: []string{"create"}},
			// list and watch by name (a metadata.name field selector):
			// the consumer learns of the acceptance as it happens.
			{APIGroups: []string{discoveryv1alpha1.GroupVersion.Group}, Resources: []string{"peeringrequests"},
				ResourceNames: []string{clusterID}, Verbs: []string{"get", "list", "watch", "update", "patch", "delete"}},
			{APIGroups: []string{discoveryv1alpha1.GroupVersion.Group}, Resources: []string{"peeringrequests/status"},
				ResourceNames: []string{clusterID}, Verbs: []string{"get"}},
		}
		return nil
	}); err != nil {
		return fmt.Errorf("ClusterRole %s: %w", name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, binding, func() error {
		binding.Labels = peerLabels(clusterID)
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
		binding.Subjects = []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: identity.ConsumerUserPrefix + clusterID}}
		return nil
	}); err != nil {
		return fmt.Errorf("ClusterRoleBinding %s: %w", name, err)
	}
	return nil
}
