// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package foreigncluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
)

// CASecretKey is the key of the remote CA certificate in its Secret.
const CASecretKey = "ca.crt"

// CASecretName is the Secret, in the Liqo namespace, that holds the CA
// trusted for a remote cluster.
func CASecretName(clusterID string) string { return "liqo-remote-ca-" + clusterID }

// +kubebuilder:rbac:groups=discovery.liqo.io,resources=foreignclusters,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.liqo.io,resources=foreignclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete

// Reconciler completes ForeignClusters from their auth service, keeps the
// remote API server address current, pins the remote CA and guards against
// a changed one, and remembers the join decision.
type Reconciler struct {
	// Client reads and writes ForeignClusters and Secrets.
	Client client.Client
	// APIReader, if set, reads a ForeignCluster again from the API server
	// when writing its status met another writer's change.
	APIReader client.Reader
	// Namespace is the Liqo namespace, where remote CAs are stored.
	Namespace string
	// LocalClusterID is this cluster's own ID.
	LocalClusterID string
	// Choices remembers join decisions.
	Choices *Choices
	// GetIdentity asks a remote auth service; injectable for tests.
	GetIdentity func(ctx context.Context, url string, o auth.ClientOptions) (*auth.Response, error)
	// Resync is how often a ForeignCluster's identity is fetched again, to
	// notice an address or CA change; defaults to 30 seconds.
	Resync time.Duration
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var fc discoveryv1alpha1.ForeignCluster
	if err := r.Client.Get(ctx, req.NamespacedName, &fc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !fc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if id := fc.Spec.ClusterIdentity.ClusterID; id != "" && r.Choices != nil {
		if err := r.Choices.Set(ctx, id, fc.Spec.Join); err != nil {
			return ctrl.Result{}, fmt.Errorf("remembering the join decision: %w", err)
		}
	}
	if fc.Spec.ForeignAuthURL == "" {
		return ctrl.Result{}, nil
	}

	orig := fc.DeepCopy()
	// The auth service must present the key pinned at first contact, or
	// the one an operator trusted after it changed.
	pinned := fc.Status.AuthServiceKeyFingerprint
	if trusted := fc.Annotations[discoveryv1alpha1.TrustAuthKeyAnnotation]; trusted != "" {
		pinned = trusted
	}
	resp, fetchErr := r.GetIdentity(ctx, fc.Spec.ForeignAuthURL, auth.ClientOptions{
		InsecureSkipVerify: fc.Spec.InsecureSkipTLSVerify != nil && *fc.Spec.InsecureSkipTLSVerify,
		PinnedKey:          pinned,
	})
	var mismatch *auth.KeyMismatchError
	if errors.As(fetchErr, &mismatch) {
		fc.Status.PendingAuthKeyFingerprint = mismatch.Presented
		// What CA an unknown key's service presents says nothing: it is
		// checked once the key is trusted.
		fc.Status.PendingCAFingerprint = ""
		setCondition(&fc, discoveryv1alpha1.ConditionReachable, metav1.ConditionFalse, reasonAuthKeyChanged, fmt.Sprintf(
			"The auth service at %s presents key %s, not %s trusted for this cluster: someone else may answer at that address. "+
				"If the cluster's auth service key was replaced on purpose, check the new one out of band and trust it with: liqoctl trust %s",
			fc.Spec.ForeignAuthURL, mismatch.Presented, mismatch.Pinned, fc.Name))
		return ctrl.Result{RequeueAfter: r.resync()}, r.patchStatus(ctx, orig, &fc)
	}
	if fetchErr != nil {
		setCondition(&fc, discoveryv1alpha1.ConditionReachable, metav1.ConditionFalse, "AuthServiceUnreachable", fetchErr.Error())
		if err := r.patchStatus(ctx, orig, &fc); err != nil {
			return ctrl.Result{}, err
		}
		// Not an error of ours: ask again later, without hammering the
		// peer or the status (the checker watches liveness meanwhile).
		ctrl.LoggerFrom(ctx).V(1).Info("Auth service unreachable", "url", fc.Spec.ForeignAuthURL, "error", fetchErr.Error())
		return ctrl.Result{RequeueAfter: r.unreachableRetry()}, nil
	}
	id := resp.Identity

	if err := r.complete(ctx, &fc, id); err != nil {
		return ctrl.Result{}, err
	}
	if fc.Spec.ClusterIdentity.ClusterID == id.ClusterID && id.ClusterName != "" && id.ClusterName != fc.Spec.ClusterIdentity.ClusterName &&
		len(id.ClusterName) <= maxClusterName {
		// The name follows the answer of the (pinned) auth service, not
		// announcements, which anyone can make.
		patch := client.MergeFromWithOptions(fc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		fc.Spec.ClusterIdentity.ClusterName = id.ClusterName
		if err := r.Client.Patch(ctx, &fc, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("renaming ForeignCluster %s: %w", fc.Name, err)
		}
	}
	// complete() may have written the object: compare the status against
	// what is stored now.
	orig = fc.DeepCopy()
	fc.Status.PendingAuthKeyFingerprint = "" // the key presented is the one trusted
	if fc.Spec.ClusterIdentity.ClusterID != id.ClusterID {
		setCondition(&fc, discoveryv1alpha1.ConditionReachable, metav1.ConditionFalse, reasonIdentityMismatch,
			fmt.Sprintf("The auth service at %s belongs to cluster %s, not %s: fix spec.foreignAuthUrl", fc.Spec.ForeignAuthURL, id.ClusterID, fc.Spec.ClusterIdentity.ClusterID))
		return ctrl.Result{RequeueAfter: r.resync()}, r.patchStatus(ctx, orig, &fc)
	}
	setCondition(&fc, discoveryv1alpha1.ConditionReachable, metav1.ConditionTrue, "AuthServiceAnswered", "The auth service answered")
	if resp.ServingKey != "" {
		fc.Status.AuthServiceKeyFingerprint = resp.ServingKey // pinned on first contact, or as the operator trusted
	}
	if err := r.checkCA(ctx, &fc, []byte(id.CACert)); err != nil {
		return ctrl.Result{}, err
	}
	// Only a cluster that proved it holds the trusted CA may move its API
	// server: anyone on a LAN can announce a known ClusterID.
	if meta.IsStatusConditionTrue(fc.Status.Conditions, discoveryv1alpha1.ConditionCATrusted) {
		fc.Status.APIServerURL = id.APIServerURL
	}
	if err := r.patchStatus(ctx, orig, &fc); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.resync()}, nil
}

// maxClusterName is the schema's bound on spec.clusterIdentity.clusterName:
// a longer name in an answer is not taken.
const maxClusterName = 253

// reasonIdentityMismatch marks an auth service that answers for another
// cluster.
const reasonIdentityMismatch = "IdentityMismatch"

// reasonAuthKeyChanged marks an auth service presenting a key other than
// the pinned one.
const reasonAuthKeyChanged = "AuthServiceKeyChanged"

func (r *Reconciler) resync() time.Duration {
	if r.Resync == 0 {
		return 30 * time.Second
	}
	return r.Resync
}

// unreachableRetry is how soon an unreachable auth service is asked again.
func (r *Reconciler) unreachableRetry() time.Duration {
	if r.Resync > 0 && r.Resync < 5*time.Second {
		return r.Resync
	}
	return 5 * time.Second
}

// complete fills in the identity of a ForeignCluster created with only an
// auth URL, and merges away a discovered duplicate of the same cluster.
func (r *Reconciler) complete(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster, id *auth.Identity) error {
	if fc.Spec.ClusterIdentity.ClusterID == "" || fc.Labels[discoveryv1alpha1.ClusterIDLabel] == "" {
		if id.ClusterID == r.LocalClusterID {
			return fmt.Errorf("ForeignCluster %s points at this cluster's own auth service", fc.Name)
		}
		patch := client.MergeFromWithOptions(fc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if fc.Spec.ClusterIdentity.ClusterID == "" {
			fc.Spec.ClusterIdentity.ClusterID = id.ClusterID
		}
		if fc.Spec.ClusterIdentity.ClusterName == "" {
			fc.Spec.ClusterIdentity.ClusterName = id.ClusterName
		}
		if fc.Labels == nil {
			fc.Labels = map[string]string{}
		}
		fc.Labels[discoveryv1alpha1.ClusterIDLabel] = fc.Spec.ClusterIdentity.ClusterID
		if fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] == "" {
			fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] = string(discoveryv1alpha1.ManualDiscovery)
		}
		if err := r.Client.Patch(ctx, fc, patch); err != nil {
			return fmt.Errorf("completing ForeignCluster %s: %w", fc.Name, err)
		}
	}
	if fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] != string(discoveryv1alpha1.ManualDiscovery) {
		return nil
	}
	return r.mergeCopies(ctx, fc)
}

// mergeCopies keeps one ForeignCluster per ClusterID: a copy made by
// discovery gives way to the one the operator created, after handing over
// its CA Secret and its sources. Checked on every reconcile, so that a
// merge cut short (a failed write) is finished on the next.
func (r *Reconciler) mergeCopies(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster) error {
	var list discoveryv1alpha1.ForeignClusterList
	if err := r.Client.List(ctx, &list, client.MatchingLabels{discoveryv1alpha1.ClusterIDLabel: fc.Spec.ClusterIdentity.ClusterID}); err != nil {
		return err
	}
	var copies []*discoveryv1alpha1.ForeignCluster
	var merged []discoveryv1alpha1.DiscoverySource
	for i := range list.Items {
		if other := &list.Items[i]; other.UID != fc.UID && discoveredType(other) {
			copies = append(copies, other)
			merged = append(merged, other.Status.Sources...)
		}
	}
	if len(copies) == 0 {
		return nil
	}
	// The CA Secret may belong to a copy about to go: hand it over first,
	// so that the garbage collector does not take it along.
	var secret corev1.Secret
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: CASecretName(fc.Spec.ClusterIdentity.ClusterID)}, &secret)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if err == nil {
		if err := r.ownCA(ctx, &secret, fc); err != nil {
			return err
		}
	}
	// The sources are handed over before the copies go: a status write
	// lost to a conflict after would lose them for good (a cluster added
	// by hand takes no LAN sighting afterwards).
	if err := r.handOver(ctx, fc, merged); err != nil {
		return fmt.Errorf("merging the sources of %s's copies into %s: %w", fc.Spec.ClusterIdentity.ClusterID, fc.Name, err)
	}
	for _, other := range copies {
		if err := r.Client.Delete(ctx, other); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("merging ForeignCluster %s into %s: %w", other.Name, fc.Name, err)
		}
	}
	return nil
}

// handOver adds sources to fc's status (a source fc has already keeps its
// own), read again and retried on a conflict with the other writers.
func (r *Reconciler) handOver(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster, sources []discoveryv1alpha1.DiscoverySource) error {
	if len(sources) == 0 {
		return nil
	}
	var latest client.Reader = r.Client
	if r.APIReader != nil {
		latest = r.APIReader
	}
	return retry.OnError(cacheLagBackoff, apierrors.IsConflict, func() error {
		var cur discoveryv1alpha1.ForeignCluster
		if err := latest.Get(ctx, client.ObjectKeyFromObject(fc), &cur); err != nil {
			return err
		}
		next := cur.DeepCopy()
		for _, s := range sources {
			if !slices.ContainsFunc(next.Status.Sources, func(have discoveryv1alpha1.DiscoverySource) bool { return have.Name == s.Name }) {
				next.Status.Sources = append(next.Status.Sources, s)
			}
		}
		if len(next.Status.Sources) == len(cur.Status.Sources) {
			return nil
		}
		if err := r.Client.Status().Patch(ctx, next, client.MergeFromWithOptions(&cur, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		*fc = *next // what the server holds now
		return nil
	})
}

// checkCA pins the remote CA on first contact and refuses to silently
// accept a different one later.
func (r *Reconciler) checkCA(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster, caPEM []byte) error {
	fc.Status.PendingCAFingerprint = "" // set again below while a changed CA waits for an operator
	fp, err := auth.Fingerprint(caPEM)
	if err != nil {
		setCondition(fc, discoveryv1alpha1.ConditionCATrusted, metav1.ConditionFalse, "InvalidCA", err.Error())
		return nil
	}
	key := client.ObjectKey{Namespace: r.Namespace, Name: CASecretName(fc.Spec.ClusterIdentity.ClusterID)}
	if fc.Annotations[discoveryv1alpha1.UntrustedCAAnnotation] == "true" {
		// The CA presented, when it is not the one stored (or none is),
		// is shown as pending: trusting again shows it, and names it.
		var stored corev1.Secret
		if err := r.Client.Get(ctx, key, &stored); client.IgnoreNotFound(err) != nil {
			return err
		}
		if storedFP, _ := auth.Fingerprint(stored.Data[CASecretKey]); storedFP != fp {
			fc.Status.PendingCAFingerprint = fp
		}
		setCondition(fc, discoveryv1alpha1.ConditionCATrusted, metav1.ConditionFalse, "Untrusted",
			fmt.Sprintf("An operator marked the CA untrusted (annotation %s); trust it again with: liqoctl trust %s", discoveryv1alpha1.UntrustedCAAnnotation, fc.Name))
		return nil
	}
	var secret corev1.Secret
	err = r.Client.Get(ctx, key, &secret)
	switch {
	case apierrors.IsNotFound(err) && fc.Annotations[discoveryv1alpha1.TrustCAAnnotation] != "" && fc.Annotations[discoveryv1alpha1.TrustCAAnnotation] != fp:
		// An operator trusted another CA than the one presented: no
		// first use pins this one.
		fc.Status.PendingCAFingerprint = fp
		setCondition(fc, discoveryv1alpha1.ConditionCATrusted, metav1.ConditionFalse, "CAChanged", fmt.Sprintf(
			"The remote CA is %s, not %s an operator trusted; if that is expected, check it out of band and trust it with: liqoctl trust %s",
			fp, fc.Annotations[discoveryv1alpha1.TrustCAAnnotation], fc.Name))
		return nil
	case apierrors.IsNotFound(err):
		secret = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: key.Namespace, Name: key.Name,
				Labels:          map[string]string{discoveryv1alpha1.ClusterIDLabel: fc.Spec.ClusterIdentity.ClusterID},
				OwnerReferences: caOwners(fc),
			},
			Data: map[string][]byte{CASecretKey: caPEM},
		}
		if err := r.Client.Create(ctx, &secret); err != nil {
			return fmt.Errorf("storing the CA of %s: %w", fc.Spec.ClusterIdentity.ClusterID, err)
		}
		fc.Status.TrustedCAFingerprint = fp
		setCondition(fc, discoveryv1alpha1.ConditionCATrusted, metav1.ConditionTrue, "TrustedOnFirstUse", "The CA presented on first contact is trusted")
		return nil
	case err != nil:
		return err
	}
	if err := r.ownCA(ctx, &secret, fc); err != nil {
		return err
	}
	trusted, err := auth.Fingerprint(secret.Data[CASecretKey])
	if err != nil {
		trusted = "" // a damaged Secret is treated as a changed CA
	}
	if trusted == fp {
		fc.Status.TrustedCAFingerprint = fp
		// While the operator's annotation names it, the condition keeps
		// saying who trusted it, instead of changing at the next pass.
		if fc.Annotations[discoveryv1alpha1.TrustCAAnnotation] == fp {
			setCondition(fc, discoveryv1alpha1.ConditionCATrusted, metav1.ConditionTrue, "TrustedByOperator", "An operator trusted the new remote CA")
		} else {
			setCondition(fc, discoveryv1alpha1.ConditionCATrusted, metav1.ConditionTrue, "Trusted", "The remote CA is the one trusted")
		}
		return nil
	}
	if fc.Annotations[discoveryv1alpha1.TrustCAAnnotation] != fp {
		fc.Status.TrustedCAFingerprint = trusted // still the stored one
		fc.Status.PendingCAFingerprint = fp
		setCondition(fc, discoveryv1alpha1.ConditionCATrusted, metav1.ConditionFalse, "CAChanged", fmt.Sprintf(
			"The remote CA changed from %s to %s; if that is expected, check the new one out of band and trust it with: liqoctl trust %s",
			trusted, fp, fc.Name))
		return nil
	}
	secret.Data = map[string][]byte{CASecretKey: caPEM}
	if err := r.Client.Update(ctx, &secret); err != nil {
		return fmt.Errorf("storing the new CA of %s: %w", fc.Spec.ClusterIdentity.ClusterID, err)
	}
	fc.Status.TrustedCAFingerprint = fp
	setCondition(fc, discoveryv1alpha1.ConditionCATrusted, metav1.ConditionTrue, "TrustedByOperator", "An operator trusted the new remote CA")
	return nil
}

// caOwners returns the owners the CA Secret of fc should have: fc itself
// while only discovery knows of the cluster, so that the pin goes with a
// ForeignCluster that ages out (a flood of announcements leaves nothing
// behind); none once the cluster is joined, was added by hand or peers
// with this one, so that the pin outlives its ForeignCluster.
func caOwners(fc *discoveryv1alpha1.ForeignCluster) []metav1.OwnerReference {
	if !discoveredOnly(fc) || fc.Spec.Join || fc.UID == "" {
		return nil
	}
	return []metav1.OwnerReference{{
		APIVersion: discoveryv1alpha1.GroupVersion.String(), Kind: "ForeignCluster", Name: fc.Name, UID: fc.UID,
	}}
}

// ownCA gives the CA Secret the owners caOwners says.
func (r *Reconciler) ownCA(ctx context.Context, secret *corev1.Secret, fc *discoveryv1alpha1.ForeignCluster) error {
	want := caOwners(fc)
	if equality.Semantic.DeepEqual(secret.OwnerReferences, want) {
		return nil
	}
	patch := client.MergeFromWithOptions(secret.DeepCopy(), client.MergeFromWithOptimisticLock{})
	secret.OwnerReferences = want
	if err := r.Client.Patch(ctx, secret, patch); err != nil {
		return fmt.Errorf("updating the owner of the CA Secret of %s: %w", fc.Spec.ClusterIdentity.ClusterID, err)
	}
	return nil
}

func setCondition(fc *discoveryv1alpha1.ForeignCluster, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: fc.Generation})
}

func (r *Reconciler) patchStatus(ctx context.Context, orig, fc *discoveryv1alpha1.ForeignCluster) error {
	// Other writers (the registry, the checker) patch the same lists: lose
	// nobody's update (see PatchStatus).
	if err := PatchStatus(ctx, r.Client, r.APIReader, orig, fc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("updating ForeignCluster %s status: %w", fc.Name, err)
	}
	return nil
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Namespace == "" || r.LocalClusterID == "" {
		return errors.New("foreigncluster.Reconciler needs Client, Namespace and LocalClusterID")
	}
	if r.GetIdentity == nil {
		r.GetIdentity = auth.GetIdentity
	}
	return ctrl.NewControllerManagedBy(mgr).
		// Status changes (sightings every few seconds) do not need a fetch
		// from the auth service: the periodic resync covers them.
		For(&discoveryv1alpha1.ForeignCluster{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Named("foreigncluster").
		Complete(r)
}
