// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/phase"
)

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=selfsubjectreviews,verbs=create

// Incoming is the provider's PeeringRequest reconciler.
type Incoming struct {
	// Client reads through to the API server and writes.
	Client client.Client
	// Scheme builds clients for the consumer.
	Scheme *runtime.Scheme
	// Namespace is the Liqo namespace.
	Namespace string
	// LocalClusterID is this cluster's ID.
	LocalClusterID string
	// Policy decides who may peer.
	Policy *Policy
	// Config returns the ClusterConfig in force.
	Config func() *configv1alpha1.ClusterConfig
	// Lifetime of the virtual kubelet's certificate.
	Lifetime time.Duration
}

// Reconcile implements reconcile.Reconciler.
func (r *Incoming) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pr discoveryv1alpha1.PeeringRequest
	if err := r.Client.Get(ctx, req.NamespacedName, &pr); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone without our finalizer (someone removed it by hand): what
			// exists only for an accepted request goes all the same. The
			// exchange's RBAC stays: it precedes the request.
			return ctrl.Result{}, r.dropAccepted(ctx, req.Name)
		}
		return ctrl.Result{}, err
	}
	id := pr.Spec.ClusterIdentity.ClusterID
	if !pr.DeletionTimestamp.IsZero() {
		if err := r.revoke(ctx, id); err != nil {
			return ctrl.Result{}, err
		}
		if controllerutil.RemoveFinalizer(&pr, discoveryv1alpha1.PeeringFinalizer) {
			return ctrl.Result{}, client.IgnoreNotFound(r.Client.Update(ctx, &pr))
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(&pr, discoveryv1alpha1.PeeringFinalizer) {
		if err := r.Client.Update(ctx, &pr); err != nil {
			return ctrl.Result{}, err
		}
	}
	// The policy may have changed since the webhook admitted the request.
	if err := r.Policy.Check(ctx, id, false); err != nil {
		var pe *PolicyError
		if errors.As(err, &pe) {
			ctrl.LoggerFrom(ctx).Info("Peering no longer allowed: deleting the PeeringRequest", "consumer", id, "rule", pe.Rule)
			return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, &pr))
		}
		return ctrl.Result{}, err
	}

	s := &incomingScope{pr: &pr, id: id, period: reconcilePeriod(r.Config), step: newSteps(ctx, "accept", "consumer", id)}
	orig := pr.DeepCopy()
	result, err := phase.Run(ctx, s, r.verify, r.accept)
	if perr := r.patchStatus(ctx, orig, &pr); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	return result, err
}

// incomingScope is what the phases of an acceptance share.
type incomingScope struct {
	pr     *discoveryv1alpha1.PeeringRequest
	id     string
	period time.Duration
	step   func(string)
}

// verify checks that the request comes from the consumer it names; until
// it does, nothing is granted.
func (r *Incoming) verify(ctx context.Context, s *incomingScope) (ctrl.Result, bool, error) {
	secretRef, verr := r.verifyConsumer(ctx, s.pr)
	s.step("consumer verified")
	if verr != nil {
		setPRCondition(s.pr, discoveryv1alpha1.PeeringRequestConsumerVerified, metav1.ConditionFalse, "VerificationFailed", verr.Error())
		setPRCondition(s.pr, discoveryv1alpha1.PeeringRequestAccepted, metav1.ConditionFalse, "ConsumerNotVerified",
			"The consumer is not verified yet; it repairs this by authenticating again")
		waits.WithLabelValues(waitConsumerNotVerified).Inc()
		return ctrl.Result{RequeueAfter: min(s.period, 5*time.Second)}, false, nil
	}
	setPRCondition(s.pr, discoveryv1alpha1.PeeringRequestConsumerVerified, metav1.ConditionTrue, "Verified",
		"The consumer's certificate works on its API server, with the identity this cluster asked for")
	s.pr.Status.KubeconfigSecretRef = secretRef
	return ctrl.Result{}, true, nil
}

// accept grants the peering: the tenant namespace with the virtual
// kubelet's Role, its certificate, and the consumer's ForeignCluster
// marked as peering in. The three do not depend on each other: they run
// at once (each is a few API calls, the certificate a wait for the
// signer), and the consumer waits for the slowest, not for the sum.
func (r *Incoming) accept(ctx context.Context, s *incomingScope) (ctrl.Result, bool, error) {
	var tenant string
	var g errgroup.Group
	g.Go(func() (err error) {
		rules := virtualKubeletRules
		if r.Config != nil && acceptsIntroducer(r.Config(), s.id) {
			rules = slices.Concat(rules, introducerRules)
		}
		tenant, err = ensureTenant(ctx, r.Client, s.id, VirtualKubeletRole, identity.VirtualKubeletUserPrefix+s.id, rules)
		return err
	})
	g.Go(func() error { return r.answerVirtualKubeletCSR(ctx, s.pr) })
	g.Go(func() error { return r.markIncoming(ctx, s.pr, true) })
	if err := g.Wait(); err != nil {
		return ctrl.Result{}, false, err
	}
	s.pr.Status.TenantNamespace = tenant
	s.step("tenant, virtual kubelet certificate, ForeignCluster")
	setPRCondition(s.pr, discoveryv1alpha1.PeeringRequestAccepted, metav1.ConditionTrue, "Accepted",
		fmt.Sprintf("Tenant namespace %s and the virtual kubelet's identity are ready", tenant))
	return ctrl.Result{RequeueAfter: s.period}, true, nil
}

// verifyConsumer proves that the PeeringRequest comes from the cluster
// that owns spec.apiServerURL: the certificate in spec.providerCertificate,
// which only that cluster's CSR API could issue for the key this cluster
// generated during the token exchange, must authenticate there as
// liqo-provider-<this cluster>. It stores the resulting kubeconfig.
func (r *Incoming) verifyConsumer(ctx context.Context, pr *discoveryv1alpha1.PeeringRequest) (*discoveryv1alpha1.SecretReference, error) {
	id := pr.Spec.ClusterIdentity.ClusterID
	var secret corev1.Secret
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: PeerSecretName(id)}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errors.New("no token exchange is recorded for this consumer: it must authenticate again")
		}
		return nil, err
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	ref := &discoveryv1alpha1.SecretReference{Namespace: secret.Namespace, Name: secret.Name}
	fingerprint := verificationFingerprint(pr)
	if bytes.Equal(secret.Data[peerSecretVerified], fingerprint) {
		return ref, nil // this exact request was verified already
	}
	// The key must be the one of the last exchange (a verified older key
	// stays usable through its kubeconfig until then).
	key := secret.Data[PeerSecretProviderKey]
	if _, err := tls.X509KeyPair([]byte(pr.Spec.ProviderCertificate), key); err != nil {
		return nil, fmt.Errorf("spec.providerCertificate does not match the key of the last token exchange: %w", err)
	}
	// A ClusterID, once verified at an API server, stays bound to it until
	// the peering ends: holding the token is not enough to take over
	// another consumer's ID.
	if url, ca := secret.Data[peerSecretBoundURL], secret.Data[peerSecretBoundCA]; len(url) > 0 &&
		(string(url) != pr.Spec.APIServerURL || !bytes.Equal(bytes.TrimSpace(ca), bytes.TrimSpace([]byte(pr.Spec.CACert)))) {
		return nil, fmt.Errorf("cluster %s was verified at %s with another CA; a request for it from %s is refused (if it really moved, unpeer it first)",
			id, url, pr.Spec.APIServerURL)
	}
	if secret.Annotations[discoveryv1alpha1.AuthenticatedByAnnotation] == "lan-trust" {
		// No token: the CA and API server must be the ones pinned when the
		// cluster was discovered.
		if err := r.checkPinned(ctx, pr); err != nil {
			return nil, err
		}
	}
	creds := &identity.Credentials{
		Server: pr.Spec.APIServerURL, CACert: []byte(pr.Spec.CACert),
		Certificate: []byte(pr.Spec.ProviderCertificate), Key: key,
	}
	want := identity.ProviderUserPrefix + r.LocalClusterID
	got, err := identity.WhoAmI(ctx, creds.RESTConfig())
	if err != nil {
		// The consumer reads this status: say what failed, not what the
		// network around the URL looks like.
		return nil, fmt.Errorf("the certificate in spec.providerCertificate was not accepted by %s (%s)", pr.Spec.APIServerURL, reasonOf(err))
	}
	if got != want {
		return nil, fmt.Errorf("the consumer's API server sees the certificate as %q, not %q", got, want)
	}
	kubeconfig, err := creds.Kubeconfig(want, discoveryv1alpha1.TenantNamespace(r.LocalClusterID))
	if err != nil {
		return nil, err
	}
	secret.Data[PeerSecretKubeconfig] = kubeconfig
	secret.Data[peerSecretVerified] = fingerprint
	if len(secret.Data[peerSecretBoundURL]) == 0 {
		secret.Data[peerSecretBoundURL] = []byte(pr.Spec.APIServerURL)
		secret.Data[peerSecretBoundCA] = []byte(pr.Spec.CACert)
	}
	if err := r.Client.Update(ctx, &secret); err != nil {
		return nil, err
	}
	return ref, nil
}

// Keys of the provider's peer Secret that record verification.
const (
	peerSecretVerified = "verified"
	peerSecretBoundURL = "bound-api-server"
	peerSecretBoundCA  = "bound-ca.crt" //nolint:gosec // a key's name, not a credential
)

// verificationFingerprint identifies what was verified: the API server,
// its CA and the certificate together, so that changing any of them
// verifies again.
func verificationFingerprint(pr *discoveryv1alpha1.PeeringRequest) []byte {
	h := sha256.New()
	for _, part := range []string{pr.Spec.APIServerURL, pr.Spec.CACert, pr.Spec.ProviderCertificate} {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	return []byte(hex.EncodeToString(h.Sum(nil)))
}

// reasonOf summarizes an error for a status a remote party reads.
func reasonOf(err error) string {
	switch {
	case apierrors.IsUnauthorized(err):
		return "unauthorized"
	case apierrors.IsForbidden(err):
		return "forbidden"
	case apierrors.ReasonForError(err) != metav1.StatusReasonUnknown:
		return string(apierrors.ReasonForError(err))
	default:
		return "unreachable, or not the API server of that CA"
	}
}

func (r *Incoming) checkPinned(ctx context.Context, pr *discoveryv1alpha1.PeeringRequest) error {
	id := pr.Spec.ClusterIdentity.ClusterID
	fc, err := foreigncluster.Find(ctx, r.Client, id)
	if err != nil {
		return err
	}
	if fc == nil {
		return fmt.Errorf("cluster %s was trusted as a LAN peer but is no longer known", id)
	}
	same, err := samePinnedCA(ctx, r.Client, r.Namespace, id, []byte(pr.Spec.CACert))
	if err != nil {
		return err
	}
	if !same {
		return fmt.Errorf("spec.caCert is not the CA pinned at discovery (%s)", fc.Status.TrustedCAFingerprint)
	}
	if fc.Status.APIServerURL != pr.Spec.APIServerURL {
		return fmt.Errorf("spec.apiServerURL %s is not the API server discovered for the cluster (%s)", pr.Spec.APIServerURL, fc.Status.APIServerURL)
	}
	return nil
}

// answerVirtualKubeletCSR issues the virtual kubelet's certificate when
// the request is new or its key changed.
func (r *Incoming) answerVirtualKubeletCSR(ctx context.Context, pr *discoveryv1alpha1.PeeringRequest) error {
	if pr.Spec.VirtualKubeletCSR == "" {
		pr.Status.VirtualKubeletCertificate = ""
		return nil
	}
	if pr.Status.VirtualKubeletCertificate != "" && samePublicKey(pr.Spec.VirtualKubeletCSR, pr.Status.VirtualKubeletCertificate) {
		return nil
	}
	id := pr.Spec.ClusterIdentity.ClusterID
	cert, err := identity.Issue(ctx, r.Client, nil, []byte(pr.Spec.VirtualKubeletCSR), identity.VirtualKubeletUserPrefix+id, r.Lifetime)
	if err != nil {
		return err
	}
	pr.Status.VirtualKubeletCertificate = string(cert)
	return nil
}

func samePublicKey(csrPEM, certPEM string) bool {
	b1, _ := pem.Decode([]byte(csrPEM))
	b2, _ := pem.Decode([]byte(certPEM))
	if b1 == nil || b2 == nil {
		return false
	}
	csr, err1 := x509.ParseCertificateRequest(b1.Bytes)
	cert, err2 := x509.ParseCertificate(b2.Bytes)
	if err1 != nil || err2 != nil {
		return false
	}
	return bytes.Equal(csr.RawSubjectPublicKeyInfo, cert.RawSubjectPublicKeyInfo)
}

// markIncoming records on the consumer's ForeignCluster whether it peers
// with this cluster, creating one (IncomingPeering) for an unknown
// consumer, and deleting that one again when the peering ends.
func (r *Incoming) markIncoming(ctx context.Context, pr *discoveryv1alpha1.PeeringRequest, incoming bool) error {
	id := pr.Spec.ClusterIdentity.ClusterID
	fc, err := foreigncluster.Find(ctx, r.Client, id)
	if err != nil {
		return err
	}
	if fc == nil {
		if !incoming {
			return nil
		}
		fc = &discoveryv1alpha1.ForeignCluster{
			ObjectMeta: metav1.ObjectMeta{Name: id, Labels: map[string]string{
				discoveryv1alpha1.ClusterIDLabel:     id,
				discoveryv1alpha1.DiscoveryTypeLabel: string(discoveryv1alpha1.IncomingPeeringDiscovery),
			}},
			Spec: discoveryv1alpha1.ForeignClusterSpec{
				ClusterIdentity:       pr.Spec.ClusterIdentity,
				ForeignAuthURL:        pr.Spec.AuthURL,
				InsecureSkipTLSVerify: ptr.To(true),
			},
		}
		if err := r.Client.Create(ctx, fc); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ForeignCluster %s for the incoming peering: %w", id, err)
		}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			return err
		}
	}
	if fc.Status.IncomingPeering == incoming {
		return nil
	}
	orig := fc.DeepCopy()
	fc.Status.IncomingPeering = incoming
	return foreigncluster.PatchStatus(ctx, r.Client, nil, orig, fc)
}

// revoke takes back everything issued to consumer id: its RBAC (so its
// certificates are refused everything), its tenant namespace (and with it
// the virtual kubelet's Role and binding), the provider key, and the
// ForeignCluster created only because of the peering.
func (r *Incoming) revoke(ctx context.Context, id string) error {
	r.withdrawAdvertisement(ctx, id)
	name := ConsumerRBACName(id)
	for _, obj := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: PeerSecretName(id)}},
	} {
		if err := r.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("revoking %s: %w", name, err)
		}
	}
	return r.dropAccepted(ctx, id)
}

// withdrawAdvertisement deletes, best effort and within 5 s, this
// cluster's Advertisement in the consumer, while the kubeconfig still
// exists: the consumer removes it too when it unpeers.
func (r *Incoming) withdrawAdvertisement(ctx context.Context, id string) {
	cfg, err := (&Channels{Reader: r.Client, Namespace: r.Namespace}).AsProvider(ctx, id)
	if err != nil || cfg == nil {
		return
	}
	cfg.Timeout = 5 * time.Second
	remote, err := client.New(cfg, client.Options{Scheme: r.Scheme})
	if err != nil {
		return
	}
	_ = remote.Delete(ctx, &sharingv1alpha1.Advertisement{ObjectMeta: metav1.ObjectMeta{
		Namespace: discoveryv1alpha1.TenantNamespace(r.LocalClusterID), Name: sharingv1alpha1.AdvertisementName(r.LocalClusterID),
	}})
}

// dropAccepted deletes the tenant namespace and unmarks (or deletes) the
// consumer's ForeignCluster.
func (r *Incoming) dropAccepted(ctx context.Context, id string) error {
	fc, err := foreigncluster.Find(ctx, r.Client, id)
	if err != nil {
		return err
	}
	// The namespaces id offloaded to are offloading's to release: it
	// watches this PeeringRequest go.
	// This cluster's own peering towards id shares the tenant namespace.
	outgoing := fc != nil && controllerutil.ContainsFinalizer(fc, discoveryv1alpha1.PeeringFinalizer)
	if err := releaseTenant(ctx, r.Client, id, VirtualKubeletRole, ProviderRole, outgoing); err != nil {
		return err
	}
	if fc == nil {
		return nil
	}
	// A ForeignCluster that exists only because of the peering goes with
	// it, unless an operator set something on it (an incoming "No" must
	// outlive the peering it ended).
	if fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] == string(discoveryv1alpha1.IncomingPeeringDiscovery) && !fc.Spec.Join &&
		(fc.Spec.IncomingPeeringEnabled == "" || fc.Spec.IncomingPeeringEnabled == discoveryv1alpha1.PeeringEnabledAuto) {
		return client.IgnoreNotFound(r.Client.Delete(ctx, fc))
	}
	if !fc.Status.IncomingPeering {
		return nil
	}
	orig := fc.DeepCopy()
	fc.Status.IncomingPeering = false
	return client.IgnoreNotFound(foreigncluster.PatchStatus(ctx, r.Client, nil, orig, fc))
}

func setPRCondition(pr *discoveryv1alpha1.PeeringRequest, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: pr.Generation})
}

func (r *Incoming) patchStatus(ctx context.Context, orig, pr *discoveryv1alpha1.PeeringRequest) error {
	if equality.Semantic.DeepEqual(orig.Status, pr.Status) {
		return nil
	}
	// The Broadcaster writes a condition too: lose neither.
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, pr, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}

func reconcilePeriod(cfg func() *configv1alpha1.ClusterConfig) time.Duration {
	if cfg != nil {
		if cc := cfg(); cc != nil && cc.Spec.PeeringConfig.ReconcilePeriodSeconds > 0 {
			return time.Duration(cc.Spec.PeeringConfig.ReconcilePeriodSeconds) * time.Second
		}
	}
	return 30 * time.Second
}

// notMadeByAcceptance drops the creation of the ForeignCluster an
// acceptance makes for an unknown consumer: the request is not news to
// itself.
var notMadeByAcceptance = predicate.Funcs{CreateFunc: func(e event.CreateEvent) bool {
	return e.Object.GetLabels()[discoveryv1alpha1.DiscoveryTypeLabel] != string(discoveryv1alpha1.IncomingPeeringDiscovery)
}}

// deletionChanged passes an object's deletion starting.
var deletionChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
}}

// SetupWithManager registers the reconciler; ForeignCluster changes (an
// operator disabling incoming peering) reach the PeeringRequest of the
// same cluster.
func (r *Incoming) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		// Its own status writes and the Broadcaster's are not news: each
		// cost a whole pass (a review in the consumer, the tenant checked
		// again) while the consumer waited for the acceptance.
		For(&discoveryv1alpha1.PeeringRequest{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, deletionChanged))).
		Watches(&discoveryv1alpha1.ForeignCluster{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if id := o.GetLabels()[discoveryv1alpha1.ClusterIDLabel]; id != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: id}}}
			}
			return nil
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{}, notMadeByAcceptance)).
		// A request waiting for its tenant namespace to finish going
		// starts again at once.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetLabels()[discoveryv1alpha1.ClusterIDLabel]}}}
		}), builder.WithPredicates(tenantGone)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		Named("peeringrequest").
		Complete(r)
}
