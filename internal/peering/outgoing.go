// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/phase"
	"github.com/liqo-go/liqo/internal/remotewatch"
)

// DefaultForceUnpeerAfter bounds how long an unpeering waits for an
// unreachable provider before it completes on the local side alone.
const DefaultForceUnpeerAfter = 30 * time.Second

// Outgoing is the consumer's peering reconciler on ForeignClusters.
type Outgoing struct {
	// refusedSince records, per provider, when its API server first
	// refused the identity (401/403): an API server that just restarted
	// refuses everyone until its authorizer has synced, and that must not
	// cost a new identity (and the virtual node with it).
	refusedSince sync.Map

	// Client reads through to the API server and writes.
	Client client.Client
	// Scheme builds clients for the provider.
	Scheme *runtime.Scheme
	// Namespace is the Liqo namespace.
	Namespace string
	// LocalClusterID is this cluster's ID.
	LocalClusterID string
	// Local returns this cluster's identity (name, API server URL, CA).
	Local auth.IdentitySource
	// LocalAuthURL is this cluster's auth service.
	LocalAuthURL string
	// Config returns the ClusterConfig in force.
	Config func() *configv1alpha1.ClusterConfig
	// ForceUnpeerAfter bounds an unpeering from an unreachable provider;
	// DefaultForceUnpeerAfter when 0.
	ForceUnpeerAfter time.Duration
	// Lifetime of the certificates this cluster issues to the provider.
	Lifetime time.Duration

	clients    identity.Clients
	acceptance *remotewatch.Set
	joins      joinClock
}

// wantsPeering applies outgoingPeeringEnabled: Yes peers, No never does,
// Auto follows join.
func wantsPeering(fc *discoveryv1alpha1.ForeignCluster) bool {
	if !fc.DeletionTimestamp.IsZero() {
		return false
	}
	switch fc.Spec.OutgoingPeeringEnabled {
	case discoveryv1alpha1.PeeringEnabledYes:
		return true
	case discoveryv1alpha1.PeeringEnabledNo:
		return false
	default:
		return fc.Spec.Join
	}
}

// Reconcile implements reconcile.Reconciler.
func (r *Outgoing) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var fc discoveryv1alpha1.ForeignCluster
	if err := r.Client.Get(ctx, req.NamespacedName, &fc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	provider := fc.Spec.ClusterIdentity.ClusterID
	if provider == "" || fc.Labels[discoveryv1alpha1.ClusterIDLabel] == "" {
		return ctrl.Result{}, nil // not completed yet: the ForeignCluster reconciler fills it in
	}
	if !wantsPeering(&fc) {
		r.acceptance.Stop(fc.Name)
		r.joins.forget(fc.Name)
		if !controllerutil.ContainsFinalizer(&fc, discoveryv1alpha1.PeeringFinalizer) {
			return ctrl.Result{}, nil
		}
		return r.teardown(ctx, &fc)
	}
	orig := fc.DeepCopy()
	if controllerutil.AddFinalizer(&fc, discoveryv1alpha1.PeeringFinalizer) {
		if err := r.Client.Update(ctx, &fc); err != nil {
			return ctrl.Result{}, err
		}
		orig = fc.DeepCopy()
	}
	period := reconcilePeriod(r.Config)
	step := newSteps(ctx, "peering", "provider", provider)
	result, err := phase.Run(ctx, &fc, r.awaitPeer, r.request)
	step("peer")
	if perr := r.patchStatus(ctx, orig, &fc); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	step("status written")
	requested := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
	isRequested := requested != nil && requested.Status == metav1.ConditionTrue
	r.joins.observe(fc.Name, isRequested, isRequested && requested.Reason == discoveryv1alpha1.ReasonAccepted)
	if err != nil {
		return ctrl.Result{}, err
	}
	if c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionAuthenticated); c != nil && c.Reason == discoveryv1alpha1.ReasonRefusedByProvider &&
		fc.Spec.Join && fc.Spec.OutgoingPeeringEnabled != discoveryv1alpha1.PeeringEnabledYes {
		// The provider's policy says no (it unpeered us, or never wanted
		// us): the cluster is no longer joined, and the teardown that
		// follows removes what is left here.
		patch := client.MergeFrom(fc.DeepCopy())
		fc.Spec.Join = false
		if err := r.Client.Patch(ctx, &fc, patch); err != nil {
			return ctrl.Result{}, err
		}
		ctrl.LoggerFrom(ctx).Info("The provider refused the peering; join set to false", "provider", provider, "reason", c.Message)
		return ctrl.Result{}, nil
	}
	if result.RequeueAfter == 0 || result.RequeueAfter > period {
		result.RequeueAfter = period
	}
	// A watch of the PeeringRequest in the provider wakes this up when it
	// accepts; should the watch fail or not be allowed (an identity issued
	// before it was), look again soon, backing off as the wait grows (a
	// quarter of the time waited, at least 200 ms, at most the period).
	if c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested); c != nil && c.Reason == discoveryv1alpha1.ReasonPending {
		floor := 200 * time.Millisecond
		if r.acceptance.Watching(fc.Name) {
			floor = 2 * time.Second
		}
		result.RequeueAfter = min(result.RequeueAfter, max(floor, time.Since(c.LastTransitionTime.Time)/4))
	} else {
		r.acceptance.Stop(fc.Name)
	}
	return result, nil
}

// awaitPeer ends the pass until the cluster can be asked: its auth
// service answered, and its CA is trusted.
func (r *Outgoing) awaitPeer(_ context.Context, fc *discoveryv1alpha1.ForeignCluster) (ctrl.Result, bool, error) {
	switch {
	case fc.Spec.ForeignAuthURL == "" || fc.Status.APIServerURL == "":
		setCondition(fc, discoveryv1alpha1.ConditionAuthenticated, metav1.ConditionFalse, discoveryv1alpha1.ReasonWaitingForPeer,
			"Waiting for the cluster's auth service to answer with its identity (see the Reachable condition)")
		return ctrl.Result{RequeueAfter: 2 * time.Second}, false, nil
	case !meta.IsStatusConditionTrue(fc.Status.Conditions, discoveryv1alpha1.ConditionCATrusted):
		setCondition(fc, discoveryv1alpha1.ConditionAuthenticated, metav1.ConditionFalse, discoveryv1alpha1.ReasonCANotTrusted,
			"The cluster's CA is not trusted (see the CATrusted condition); nothing is sent to it until it is")
		return ctrl.Result{RequeueAfter: 5 * time.Second}, false, nil
	}
	return ctrl.Result{}, true, nil
}

// request brings the peering to PeeringRequested: an identity in the
// provider (authenticating when there is none, or it was refused), then
// the PeeringRequest, recording progress in the conditions.
func (r *Outgoing) request(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster) (ctrl.Result, bool, error) {
	result, err := r.requestPeering(ctx, fc)
	return result, err == nil, err
}

func (r *Outgoing) requestPeering(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster) (ctrl.Result, error) {
	provider := fc.Spec.ClusterIdentity.ClusterID
	// The tenant namespace, where the provider writes its Advertisement,
	// must exist before the PeeringRequest does; it is made while this
	// cluster authenticates, and never outlives this reconcile.
	tenant := make(chan error, 1)
	go func() {
		_, err := ensureTenant(ctx, r.Client, provider, ProviderRole, identity.ProviderUserPrefix+provider, providerRules)
		tenant <- err
	}()
	waitTenant := func() error {
		if tenant == nil {
			return nil
		}
		err := <-tenant
		tenant = nil
		return err
	}
	defer func() { _ = waitTenant() }()
	creds, secret, err := r.credentials(ctx, fc)
	if err != nil {
		return ctrl.Result{}, err
	}
	for attempt := 0; ; attempt++ {
		if creds == nil {
			if creds, secret, err = r.authenticate(ctx, fc); err != nil {
				// Recorded in the condition; retried soon at first (a LAN
				// peer may not have pinned this cluster yet), then every 5 s.
				delay := 5 * time.Second
				if c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionAuthenticated); c != nil {
					delay = min(delay, max(500*time.Millisecond, time.Since(c.LastTransitionTime.Time)/4))
				}
				waits.WithLabelValues(waitAuthRetry).Inc()
				return ctrl.Result{RequeueAfter: delay}, nil
			}
		}
		if err := waitTenant(); err != nil {
			return ctrl.Result{}, err
		}
		err = r.ensurePeeringRequest(ctx, fc, creds, secret)
		refused := (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) && !RefusedByWebhook(err)
		if !refused {
			r.refusedSince.Delete(provider)
		} else if first, _ := r.refusedSince.LoadOrStore(provider, time.Now()); time.Since(first.(time.Time)) < refusalGrace && identity.Readyz(ctx, creds.RESTConfig()) != nil {
			setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonRequestFailed,
				fmt.Sprintf("%s refuses the peering identity (%v); authenticating again if it still does after %s", provider, err, refusalGrace))
			waits.WithLabelValues(waitRefusalGrace).Inc()
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		if (errors.Is(err, errNotVerified) || refused) && attempt == 0 {
			r.refusedSince.Delete(provider)
			// The provider revoked the identity, its RBAC was lost, or it
			// cannot verify us with the key of the last exchange:
			// authenticate again once.
			ctrl.LoggerFrom(ctx).Info("The provider refused the peering identity; authenticating again", "provider", provider, "error", err.Error())
			creds = nil
			continue
		}
		break
	}
	if err != nil {
		setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonRequestFailed,
			fmt.Sprintf("Creating the PeeringRequest in %s failed: %v", provider, err))
		waits.WithLabelValues(waitRequestRetry).Inc()
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// refusalGrace is how long a provider that is not ready must keep
// refusing the identity before this cluster authenticates again; a ready
// provider that refuses it has revoked it, and is answered at once.
const refusalGrace = 10 * time.Second

// credentials loads the identity in the provider, or returns nil when a
// new one is needed (none yet, expiring, or for another API server or CA).
func (r *Outgoing) credentials(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster) (*identity.Credentials, *corev1.Secret, error) {
	creds, secret, err := r.storedCredentials(ctx, fc.Spec.ClusterIdentity.ClusterID)
	if creds == nil || err != nil {
		return nil, nil, err
	}
	if !usable(creds, secret, fc) {
		return nil, nil, nil
	}
	return creds, secret, nil
}

// usable tells whether stored credentials can still be used with fc: a
// readable certificate valid for a day more, the provider's certificate
// kept, and the same API server.
func usable(creds *identity.Credentials, secret *corev1.Secret, fc *discoveryv1alpha1.ForeignCluster) bool {
	_, notAfter, err := identity.CertificateUser(creds.Certificate)
	return err == nil && time.Until(notAfter) >= 24*time.Hour && len(secret.Data[identity.ProviderCertKey]) > 0 && creds.Server == fc.Status.APIServerURL
}

// storedCredentials loads the identity in provider as stored, usable or
// not (an expired one still tries to delete the PeeringRequest); nil when
// there is none.
func (r *Outgoing) storedCredentials(ctx context.Context, provider string) (*identity.Credentials, *corev1.Secret, error) {
	var secret corev1.Secret
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: identity.RemoteSecretName(provider)}, &secret)
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	d := secret.Data
	if len(d[identity.KeyKey]) == 0 || len(d[identity.CertKey]) == 0 || len(d[identity.ServerKey]) == 0 {
		return nil, nil, nil
	}
	return &identity.Credentials{Server: string(d[identity.ServerKey]), CACert: d[identity.CAKey], Certificate: d[identity.CertKey], Key: d[identity.KeyKey]}, &secret, nil
}

// authenticate runs the token exchange with the provider's auth service,
// issues the provider's identity in this cluster, and stores both.
func (r *Outgoing) authenticate(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster) (*identity.Credentials, *corev1.Secret, error) {
	provider := fc.Spec.ClusterIdentity.ClusterID
	fail := func(reason string, err error) (*identity.Credentials, *corev1.Secret, error) {
		setCondition(fc, discoveryv1alpha1.ConditionAuthenticated, metav1.ConditionFalse, reason, err.Error())
		setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, reason, "Not requested: authentication failed")
		return nil, nil, err
	}
	local, err := r.Local(ctx)
	if err != nil {
		return fail(discoveryv1alpha1.ReasonAuthFailed, fmt.Errorf("this cluster's identity is not available yet: %w", err))
	}
	var tokenSecret corev1.Secret
	token := ""
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: auth.RemoteTokenSecretName(provider)}, &tokenSecret); err == nil {
		token = string(tokenSecret.Data[auth.TokenKey])
	} else if !apierrors.IsNotFound(err) {
		return nil, nil, err
	}
	step := newSteps(ctx, "authenticate", "provider", provider)
	key, csr, err := identity.NewKeyAndCSR(identity.ConsumerUserPrefix + r.LocalClusterID)
	if err != nil {
		return nil, nil, err
	}
	step("key and CSR")
	resp, err := auth.RequestIdentity(ctx, fc.Spec.ForeignAuthURL, token, &auth.IdentityRequest{
		ClusterID: r.LocalClusterID, ClusterName: local.ClusterName, AuthURL: r.LocalAuthURL,
		Namespace: r.Namespace, CACert: local.CACert, CSR: string(csr),
	}, auth.ClientOptions{
		InsecureSkipVerify: fc.Spec.InsecureSkipTLSVerify != nil && *fc.Spec.InsecureSkipTLSVerify,
		// Nothing is sent to an auth service other than the one pinned.
		PinnedKey: fc.Status.AuthServiceKeyFingerprint,
	})
	if err != nil {
		var ee *auth.ExchangeError
		if errors.As(err, &ee) && ee.Reason == auth.ReasonPolicy {
			return fail(discoveryv1alpha1.ReasonRefusedByProvider, err)
		}
		if errors.As(err, &ee) && knownExchangeReasons[ee.Reason] {
			return fail(ee.Reason, err)
		}
		return fail(discoveryv1alpha1.ReasonAuthFailed, err)
	}
	step("token exchange")
	// The provider must be the cluster this ForeignCluster trusts: same ID,
	// same CA bundle and API server as pinned at discovery.
	same, err := samePinnedCA(ctx, r.Client, r.Namespace, provider, []byte(resp.CACert))
	if err != nil {
		return nil, nil, err
	}
	switch {
	case resp.ClusterID != provider:
		return fail(discoveryv1alpha1.ReasonAuthFailed, fmt.Errorf("the auth service answered as cluster %s, not %s", resp.ClusterID, provider))
	case !same:
		return fail(discoveryv1alpha1.ReasonCAMismatch, fmt.Errorf("the provider's CA is not the one pinned for it (%s): see the CATrusted condition", fc.Status.TrustedCAFingerprint))
	case resp.APIServerURL != fc.Status.APIServerURL:
		return fail(discoveryv1alpha1.ReasonAuthFailed, fmt.Errorf("the auth service names API server %s, not %s as discovered", resp.APIServerURL, fc.Status.APIServerURL))
	}
	user, _, err := identity.CertificateUser([]byte(resp.Certificate))
	if err != nil || user != identity.ConsumerUserPrefix+r.LocalClusterID {
		return fail(discoveryv1alpha1.ReasonAuthFailed, fmt.Errorf("the provider issued a certificate for %q, not %s", user, identity.ConsumerUserPrefix+r.LocalClusterID))
	}
	// Before this cluster signs anything for the answer: the certificate
	// must work on the pinned API server, which only the provider's own
	// signer can arrange. Without a token, nothing else proves the answer
	// came from the provider.
	creds := &identity.Credentials{Server: resp.APIServerURL, CACert: []byte(resp.CACert), Certificate: []byte(resp.Certificate), Key: key}
	// Both checks only read from the provider: they run at once.
	var checks errgroup.Group
	checks.Go(func() error { return r.checkIdentity(ctx, creds, identity.ConsumerUserPrefix+r.LocalClusterID) })
	checks.Go(func() error { return r.checkProviderCSR(ctx, creds, resp.ProviderCSR) })
	if err := checks.Wait(); err != nil {
		return fail(discoveryv1alpha1.ReasonAuthFailed, err)
	}
	step("identity and provider CSR checked at the provider")
	providerCert, err := identity.Issue(ctx, r.Client, nil, []byte(resp.ProviderCSR), identity.ProviderUserPrefix+provider, r.Lifetime)
	if err != nil {
		return fail(discoveryv1alpha1.ReasonAuthFailed, fmt.Errorf("issuing the provider's identity in this cluster: %w", err))
	}
	step("provider identity issued")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: identity.RemoteSecretName(provider)}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, secret, func() error {
		secret.Labels = peerLabels(provider)
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		secret.Annotations[discoveryv1alpha1.AuthenticatedByAnnotation] = resp.AuthenticatedBy
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data[identity.KeyKey] = key
		secret.Data[identity.CertKey] = []byte(resp.Certificate)
		secret.Data[identity.CAKey] = []byte(resp.CACert)
		secret.Data[identity.ServerKey] = []byte(resp.APIServerURL)
		secret.Data[identity.ProviderCertKey] = providerCert
		if len(secret.Data[identity.VirtualKubeletKeyKey]) == 0 {
			vkKey, vkCSR, err := identity.NewKeyAndCSR(identity.VirtualKubeletUserPrefix + r.LocalClusterID)
			if err != nil {
				return err
			}
			secret.Data[identity.VirtualKubeletKeyKey], secret.Data[identity.VirtualKubeletCSRKey] = vkKey, vkCSR
		}
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("storing the identity in %s: %w", provider, err)
	}
	step("identity stored")
	setCondition(fc, discoveryv1alpha1.ConditionAuthenticated, metav1.ConditionTrue, "IdentityIssued",
		fmt.Sprintf("%s issued the identity %s%s (authenticated by %s)", provider, identity.ConsumerUserPrefix, r.LocalClusterID, resp.AuthenticatedBy))
	return creds, secret, nil
}

// storeVirtualKubeletIdentity keeps, next to its key, the certificate the
// provider issued to the virtual kubelet, and the kubeconfig made of both
// (key identity.VirtualKubeletKubeconfigKey), which the provider's Advertisement
// points at.
func (r *Outgoing) storeVirtualKubeletIdentity(ctx context.Context, secret *corev1.Secret, creds *identity.Credentials, pr *discoveryv1alpha1.PeeringRequest) error {
	cert := []byte(pr.Status.VirtualKubeletCertificate)
	if len(cert) == 0 || bytes.Equal(secret.Data[identity.VirtualKubeletCertKey], cert) || !samePublicKey(string(secret.Data[identity.VirtualKubeletCSRKey]), string(cert)) {
		return nil
	}
	vk := &identity.Credentials{Server: creds.Server, CACert: creds.CACert, Certificate: cert, Key: secret.Data[identity.VirtualKubeletKeyKey]}
	kubeconfig, err := vk.Kubeconfig(identity.VirtualKubeletUserPrefix+r.LocalClusterID, discoveryv1alpha1.TenantNamespace(r.LocalClusterID))
	if err != nil {
		return err
	}
	secret.Data[identity.VirtualKubeletCertKey] = cert
	secret.Data[identity.VirtualKubeletKubeconfigKey] = kubeconfig
	return r.Client.Update(ctx, secret)
}

// knownExchangeReasons are the refusals an auth service may name that are
// used as condition reasons as they are; anything else a remote party says
// becomes AuthenticationFailed.
var knownExchangeReasons = map[string]bool{
	auth.ReasonBadRequest: true, auth.ReasonTokenRequired: true, auth.ReasonWrongToken: true, auth.ReasonReplayed: true,
	auth.ReasonExpired: true, auth.ReasonNotReady: true, auth.ReasonInternal: true, auth.ReasonTooMany: true,
}

// errNotVerified says the provider could not verify this cluster with the
// current PeeringRequest: a new token exchange is needed.
var errNotVerified = errors.New("the provider could not verify this cluster")

// checkIdentity asks the API server who creds are.
func (r *Outgoing) checkIdentity(ctx context.Context, creds *identity.Credentials, want string) error {
	got, err := identity.WhoAmI(ctx, creds.RESTConfig())
	if err != nil {
		return fmt.Errorf("the issued certificate does not work on the provider's API server %s: %w", creds.Server, err)
	}
	if got != want {
		return fmt.Errorf("the provider's API server sees the issued certificate as %q, not %q", got, want)
	}
	return nil
}

// checkProviderCSR makes sure csr, which the answer asks this cluster to
// sign, is the one the provider published for this cluster on its own API
// server (annotation ProviderCSRAnnotation of ClusterRole
// liqo-consumer-<this cluster>), reached with the pinned CA as the
// identity just issued: the answer itself is authenticated only with a
// token. A new grant may take a moment to reach the provider's authorizer.
func (r *Outgoing) checkProviderCSR(ctx context.Context, creds *identity.Credentials, csr string) error {
	cfg := creds.RESTConfig()
	cfg.Timeout = 5 * time.Second
	// The typed client: no API discovery in the provider for one read.
	remote, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var role *rbacv1.ClusterRole
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		role, last = remote.RbacV1().ClusterRoles().Get(ctx, ConsumerRBACName(r.LocalClusterID), metav1.GetOptions{})
		if apierrors.IsForbidden(last) {
			waits.WithLabelValues(waitRBACPropagation).Inc()
			return false, nil
		}
		return true, nil
	})
	if last != nil || err != nil {
		return fmt.Errorf("reading the provider's CSR on its API server %s: %w", creds.Server, errors.Join(last, err))
	}
	if role.Annotations[discoveryv1alpha1.ProviderCSRAnnotation] != csr {
		return errors.New("the answer asks this cluster to sign a CSR that is not the one the provider published for it on its API server: " +
			"someone between the two clusters may have changed the answer")
	}
	return nil
}

// ensurePeeringRequest creates or repairs this cluster's PeeringRequest in
// the provider, and reflects the provider's answer in the conditions.
func (r *Outgoing) ensurePeeringRequest(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster, creds *identity.Credentials, secret *corev1.Secret) error {
	provider := fc.Spec.ClusterIdentity.ClusterID
	local, err := r.Local(ctx)
	if err != nil {
		return err
	}
	step := newSteps(ctx, "request", "provider", provider)
	// Polled every few hundred milliseconds while pending: one client
	// per identity, not one (and an API discovery) per call.
	remote, err := r.clients.For(creds.RESTConfig(), r.Scheme)
	if err != nil {
		return err
	}
	step("client")
	setCondition(fc, discoveryv1alpha1.ConditionAuthenticated, metav1.ConditionTrue, "IdentityIssued",
		fmt.Sprintf("%s issued the identity %s%s (authenticated by %s)", provider, identity.ConsumerUserPrefix, r.LocalClusterID, secret.Annotations[discoveryv1alpha1.AuthenticatedByAnnotation]))
	want := discoveryv1alpha1.PeeringRequestSpec{
		ClusterIdentity:     discoveryv1alpha1.ClusterIdentity{ClusterID: r.LocalClusterID, ClusterName: local.ClusterName},
		Namespace:           r.Namespace,
		AuthURL:             r.LocalAuthURL,
		APIServerURL:        local.APIServerURL,
		CACert:              local.CACert,
		ProviderCertificate: string(secret.Data[identity.ProviderCertKey]),
		VirtualKubeletCSR:   string(secret.Data[identity.VirtualKubeletCSRKey]),
	}
	var pr discoveryv1alpha1.PeeringRequest
	err = remote.Get(ctx, client.ObjectKey{Name: r.LocalClusterID}, &pr)
	step("get")
	switch {
	case apierrors.IsNotFound(err):
		pr = discoveryv1alpha1.PeeringRequest{ObjectMeta: metav1.ObjectMeta{Name: r.LocalClusterID}, Spec: want}
		if err := remote.Create(ctx, &pr); err != nil {
			return err
		}
		step("create")
		ctrl.LoggerFrom(ctx).Info("PeeringRequest created", "provider", provider)
	case err != nil:
		return err
	case !pr.DeletionTimestamp.IsZero():
		return fmt.Errorf("the PeeringRequest in %s is being deleted; it is created again once gone", provider)
	case !reflect.DeepEqual(pr.Spec, want):
		pr.Spec = want
		if err := remote.Update(ctx, &pr); err != nil {
			return err
		}
	}
	if err := r.storeVirtualKubeletIdentity(ctx, secret, creds, &pr); err != nil {
		return err
	}
	if v := meta.FindStatusCondition(pr.Status.Conditions, discoveryv1alpha1.PeeringRequestConsumerVerified); v != nil &&
		v.Status == metav1.ConditionFalse && v.ObservedGeneration == pr.Generation {
		return fmt.Errorf("%w: %s", errNotVerified, v.Message)
	}
	if c := meta.FindStatusCondition(pr.Status.Conditions, discoveryv1alpha1.PeeringRequestAccepted); c != nil && c.Status == metav1.ConditionTrue {
		setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionTrue, discoveryv1alpha1.ReasonAccepted,
			fmt.Sprintf("%s admitted and accepted the PeeringRequest: %s", provider, c.Message))
	} else {
		watchAcceptance(ctx, r.acceptance, fc.Name, r.LocalClusterID, creds.RESTConfig(), r.Scheme)
		msg := fmt.Sprintf("%s admitted the PeeringRequest; waiting for it to accept", provider)
		if c != nil {
			msg += ": " + c.Message
		}
		setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionTrue, discoveryv1alpha1.ReasonPending, msg)
	}
	return nil
}

// teardownScope is what the phases of a teardown share.
type teardownScope struct {
	fc       *discoveryv1alpha1.ForeignCluster
	provider string
	// creds is the identity held in the provider, nil once it went.
	creds *identity.Credentials
	// refused is the Authenticated condition when the provider refused
	// the peering (the reason of the teardown), or nil.
	refused *metav1.Condition
	// decided: an earlier pass recorded the outcome and only the
	// finalizer is left.
	decided bool
	// forced: the local side goes without the provider.
	forced bool
	// outcome says, for people, what happened in the provider.
	outcome string
	// finished: the finalizer may go once the status is written.
	finished bool
}

// teardown deletes the PeeringRequest in the provider, then everything
// local; when the provider cannot be reached for ForceUnpeerAfter, the
// local side completes alone and the condition says so. The state of a
// teardown lives in the PeeringRequested condition's reason (Unpeering,
// RemovedInProvider, ForcingUnpeer, then Unpeered, ForceUnpeered or
// RefusedByProvider); each pass writes the status once, at its end, and
// the finalizer goes only after the final status is written.
func (r *Outgoing) teardown(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster) (result ctrl.Result, err error) {
	s := &teardownScope{fc: fc, provider: fc.Spec.ClusterIdentity.ClusterID}
	if s.creds, _, err = r.storedCredentials(ctx, s.provider); err != nil {
		return ctrl.Result{}, err
	}
	if c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionAuthenticated); c != nil && c.Reason == discoveryv1alpha1.ReasonRefusedByProvider {
		s.refused = c
	}
	orig := fc.DeepCopy()
	defer func() {
		if perr := r.patchStatus(ctx, orig, fc); perr != nil {
			err = errors.Join(err, perr)
			return
		}
		if err != nil || !s.finished {
			return
		}
		if controllerutil.RemoveFinalizer(fc, discoveryv1alpha1.PeeringFinalizer) {
			if uerr := r.Client.Update(ctx, fc); uerr != nil {
				err = client.IgnoreNotFound(uerr)
				return
			}
		}
		ctrl.LoggerFrom(ctx).Info("Unpeered", "provider", s.provider, "forced", s.forced)
	}()
	// A phase that changed something in the provider ends the pass, so
	// that the status records it before the identity that could tell goes.
	return phase.Run(ctx, s, r.startTeardown, r.removeInProvider, r.removeLocal, r.recordOutcome)
}

// startTeardown reads where an earlier pass left the teardown, or starts
// it: the condition's transition time is when the unpeering started.
func (r *Outgoing) startTeardown(_ context.Context, s *teardownScope) (ctrl.Result, bool, error) {
	cond := meta.FindStatusCondition(s.fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
	reason := ""
	if cond != nil {
		reason = cond.Reason
	}
	switch reason {
	case discoveryv1alpha1.ReasonForceUnpeered, discoveryv1alpha1.ReasonUnpeered:
		// A pass that wrote its outcome and then failed to remove the
		// finalizer (another writer's change in between) leaves the
		// outcome for the next pass, which has no identity left to judge
		// by: keep it.
		s.decided = s.creds == nil
	case discoveryv1alpha1.ReasonUnpeering:
		return ctrl.Result{}, true, nil
	case discoveryv1alpha1.ReasonRemovedInProvider:
		s.outcome = cond.Message // what the pass that removed it wrote
		return ctrl.Result{}, true, nil
	case discoveryv1alpha1.ReasonForcingUnpeer:
		s.forced = true
		return ctrl.Result{}, true, nil
	}
	if !s.decided {
		// Drop the old condition so that a False of long ago does not count.
		meta.RemoveStatusCondition(&s.fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
		setCondition(s.fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonUnpeering,
			fmt.Sprintf("Deleting the PeeringRequest in %s", s.provider))
	}
	return ctrl.Result{}, true, nil
}

// removeInProvider deletes this cluster's PeeringRequest in the provider
// while an identity is held there, retrying for ForceUnpeerAfter, and
// records the outcome in the condition's reason before the identity goes.
func (r *Outgoing) removeInProvider(ctx context.Context, s *teardownScope) (ctrl.Result, bool, error) {
	cond := meta.FindStatusCondition(s.fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
	if s.decided || cond.Reason != discoveryv1alpha1.ReasonUnpeering {
		return ctrl.Result{}, true, nil // decided by an earlier pass
	}
	if s.creds == nil {
		s.outcome = "no identity was held in the provider; the local side was removed"
		return ctrl.Result{}, true, nil
	}
	outcome, err := r.deleteRemote(ctx, s.creds)
	if err != nil {
		limit := r.ForceUnpeerAfter
		if limit == 0 {
			limit = DefaultForceUnpeerAfter
		}
		if waited := time.Since(cond.LastTransitionTime.Time); waited < limit {
			setCondition(s.fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonUnpeering,
				fmt.Sprintf("Deleting the PeeringRequest in %s failed (%v); retrying, the local side is removed anyway in %s", s.provider, err, (limit-waited).Round(time.Second)))
			return ctrl.Result{RequeueAfter: 2 * time.Second}, false, nil
		}
		setCondition(s.fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonForcingUnpeer,
			"The provider stayed unreachable: removing the local side without it")
	} else {
		setCondition(s.fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonRemovedInProvider, outcome)
	}
	// Recorded, in the reason, before the identity goes: the next pass
	// removes the local side.
	return ctrl.Result{RequeueAfter: 10 * time.Millisecond}, false, nil
}

// removeLocal removes the identity, the provider's offer, and the tenant
// namespace unless the provider's own peering towards this cluster
// shares it.
func (r *Outgoing) removeLocal(ctx context.Context, s *teardownScope) (ctrl.Result, bool, error) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: identity.RemoteSecretName(s.provider)}}
	if err := r.Client.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, false, err
	}
	adv := &sharingv1alpha1.Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: discoveryv1alpha1.TenantNamespace(s.provider), Name: sharingv1alpha1.AdvertisementName(s.provider)}}
	if err := r.Client.Delete(ctx, adv); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, false, err
	}
	meta.RemoveStatusCondition(&s.fc.Status.Conditions, discoveryv1alpha1.ConditionAdvertisementAccepted)
	var incoming discoveryv1alpha1.PeeringRequest
	err := r.Client.Get(ctx, client.ObjectKey{Name: s.provider}, &incoming)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, false, err
	}
	if err := releaseTenant(ctx, r.Client, s.provider, ProviderRole, VirtualKubeletRole, err == nil && incoming.DeletionTimestamp.IsZero()); err != nil {
		return ctrl.Result{}, false, err
	}
	return ctrl.Result{}, true, nil
}

// recordOutcome writes the teardown's outcome in the conditions; the
// finalizer goes once they are written.
func (r *Outgoing) recordOutcome(_ context.Context, s *teardownScope) (ctrl.Result, bool, error) {
	fc, provider := s.fc, s.provider
	setCondition(fc, discoveryv1alpha1.ConditionAuthenticated, metav1.ConditionFalse, discoveryv1alpha1.ReasonNotJoined, "Not joined: no identity is held in the cluster")
	switch {
	case s.decided:
		// Recorded by the pass that decided it.
	case s.refused != nil:
		setCondition(fc, discoveryv1alpha1.ConditionAuthenticated, metav1.ConditionFalse, discoveryv1alpha1.ReasonRefusedByProvider, s.refused.Message)
		setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonRefusedByProvider, fmt.Sprintf(
			"%s refused the peering, so join was set to false and the local side removed; set join to true again once its operator allows it", provider))
	case s.forced:
		setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonForceUnpeered, fmt.Sprintf(
			"%s was unreachable; the local side was removed without it. Its PeeringRequest %s may remain there until its operator deletes it (kubectl delete peeringrequest %s)",
			provider, r.LocalClusterID, r.LocalClusterID))
	default:
		setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonUnpeered, "Not joined: "+s.outcome)
	}
	s.finished = true
	return ctrl.Result{}, true, nil
}

// deleteRemote deletes this cluster's PeeringRequest in the provider. Gone
// already, or refused because the identity was revoked, both count as done.
func (r *Outgoing) deleteRemote(ctx context.Context, creds *identity.Credentials) (string, error) {
	cfg := creds.RESTConfig()
	cfg.Timeout = 5 * time.Second
	remote, err := r.clients.For(cfg, r.Scheme)
	if err != nil {
		return "", err
	}
	err = remote.Delete(ctx, &discoveryv1alpha1.PeeringRequest{ObjectMeta: metav1.ObjectMeta{Name: r.LocalClusterID}})
	// Gone, or this cluster's identity refused: the provider revokes it
	// exactly when its side of the peering is removed.
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return "the peering was removed on both sides", nil
	}
	return "", err
}

func setCondition(fc *discoveryv1alpha1.ForeignCluster, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: fc.Generation})
}

func (r *Outgoing) patchStatus(ctx context.Context, orig, fc *discoveryv1alpha1.ForeignCluster) error {
	if equality.Semantic.DeepEqual(orig.Status, fc.Status) {
		return nil
	}
	return client.IgnoreNotFound(foreigncluster.PatchStatus(ctx, r.Client, nil, orig, fc))
}

// SetupWithManager registers the reconciler. Besides spec changes, it
// reacts to the status changes that unblock a peering: the CA trusted, the
// API server address known.
func (r *Outgoing) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Local == nil || r.LocalClusterID == "" || r.Namespace == "" {
		return errors.New("peering.Outgoing needs Client, Local, LocalClusterID and Namespace")
	}
	r.acceptance = remotewatch.New(acceptanceWatchLimit)
	unblocked := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*discoveryv1alpha1.ForeignCluster)
		n, ok2 := e.ObjectNew.(*discoveryv1alpha1.ForeignCluster)
		if !ok1 || !ok2 {
			return false
		}
		return o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() || o.Status.APIServerURL != n.Status.APIServerURL || o.Status.TrustedCAFingerprint != n.Status.TrustedCAFingerprint ||
			meta.IsStatusConditionTrue(o.Status.Conditions, discoveryv1alpha1.ConditionCATrusted) != meta.IsStatusConditionTrue(n.Status.Conditions, discoveryv1alpha1.ConditionCATrusted)
	}}
	return ctrl.NewControllerManagedBy(mgr).
		For(&discoveryv1alpha1.ForeignCluster{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, unblocked))).
		// A token stored by liqoctl add is tried at once.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			id := o.GetLabels()[discoveryv1alpha1.ClusterIDLabel]
			if id == "" || o.GetName() != auth.RemoteTokenSecretName(id) {
				return nil
			}
			fc, err := foreigncluster.Find(ctx, mgr.GetClient(), id)
			if err != nil || fc == nil {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(fc)}}
		})).
		// A peering waiting for its tenant namespace to finish going
		// (a fresh one is made once it is gone) starts again at once.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			fc, err := foreigncluster.Find(ctx, mgr.GetClient(), o.GetLabels()[discoveryv1alpha1.ClusterIDLabel])
			if err != nil || fc == nil {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(fc)}}
		}), builder.WithPredicates(tenantGone)).
		// The provider accepting (or refusing) a PeeringRequest.
		WatchesRawSource(source.Channel(r.acceptance.Events, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		Named("peering").
		Complete(r)
}
