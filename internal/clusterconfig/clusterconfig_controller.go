// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package clusterconfig

import (
	"context"
	"errors"
	"fmt"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
)

// +kubebuilder:rbac:groups=config.liqo.io,resources=clusterconfigs,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=config.liqo.io,resources=clusterconfigs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch

// Reconciler keeps the ClusterConfig singleton present and its status
// current, and publishes it to Store.
type Reconciler struct {
	// Client reads and writes ClusterConfig.
	Client client.Client
	// ClusterID is the identity settled by the clusterid package.
	ClusterID string
	// ClusterNameOverride, from the --cluster-name flag, wins over the spec.
	ClusterNameOverride string
	// AuthURL is the auth service's URL as peers reach it, published in
	// the status for `liqoctl generate-add-command`.
	AuthURL string
	// Store receives the configuration in force.
	Store *Store
	// Seed fills the address ranges of a ClusterConfig recreated with
	// defaults (see EnsureDefault).
	Seed configv1alpha1.NetworkConfig
}

// EffectiveClusterName is the name this cluster announces: the override,
// else the spec's, else one derived from the ClusterID.
func EffectiveClusterName(override string, cfg *configv1alpha1.ClusterConfig, clusterID string) string {
	switch {
	case override != "":
		return override
	case cfg != nil && cfg.Spec.ClusterName != "":
		return cfg.Spec.ClusterName
	case len(clusterID) >= 8:
		return "cluster-" + clusterID[:8]
	default:
		return "cluster-" + clusterID
	}
}

// EnsureDefault creates the ClusterConfig singleton, with the schema's
// defaults and the address ranges of seed, when it does not exist; when
// it exists, seed fills only the ranges it leaves empty, so that what an
// operator wrote wins.
func EnsureDefault(ctx context.Context, c client.Client, seed configv1alpha1.NetworkConfig) error {
	cfg := &configv1alpha1.ClusterConfig{ObjectMeta: metav1.ObjectMeta{Name: configv1alpha1.ClusterConfigName}}
	cfg.Spec.NetworkConfig = seed
	err := c.Create(ctx, cfg)
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the default ClusterConfig: %w", err)
	}
	if seed.PodCIDR == "" && seed.ServiceCIDR == "" {
		return nil
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
		return fmt.Errorf("reading the ClusterConfig: %w", err)
	}
	patch := client.MergeFromWithOptions(cfg.DeepCopy(), client.MergeFromWithOptimisticLock{})
	net := &cfg.Spec.NetworkConfig
	if net.PodCIDR == "" {
		net.PodCIDR = seed.PodCIDR
	}
	if net.ServiceCIDR == "" {
		net.ServiceCIDR = seed.ServiceCIDR
	}
	if err := c.Patch(ctx, cfg, patch); err != nil {
		return fmt.Errorf("filling the ClusterConfig's address ranges: %w", err)
	}
	return nil
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var cfg configv1alpha1.ClusterConfig
	if err := r.Client.Get(ctx, req.NamespacedName, &cfg); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		log.Info("ClusterConfig missing, recreating it with defaults")
		return ctrl.Result{}, EnsureDefault(ctx, r.Client, r.Seed)
	}
	if !cfg.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(cfg.DeepCopy())
	// A class not found out now keeps the one in force; the rest is
	// applied all the same, and this is tried again.
	class, classErr := ConsumerStorageClass(ctx, r.Client, &cfg)
	if classErr == nil {
		cfg.Status.ConsumerStorageClass = class
	}
	r.Store.set(&cfg)
	cfg.Status.ClusterID = r.ClusterID
	cfg.Status.ClusterName = EffectiveClusterName(r.ClusterNameOverride, &cfg, r.ClusterID)
	cfg.Status.AuthURL = r.AuthURL
	meta.SetStatusCondition(&cfg.Status.Conditions, metav1.Condition{
		Type:               configv1alpha1.ConditionReady,
		Status:             metav1.ConditionTrue,
		Reason:             "Applied",
		Message:            "The configuration is in force",
		ObservedGeneration: cfg.Generation,
	})
	if err := r.Client.Status().Patch(ctx, &cfg, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("updating ClusterConfig status: %w", err)
	}
	return ctrl.Result{}, classErr
}

// DefaultStorageClassAnnotation marks a cluster's default StorageClass
// (and its beta form, which the API server still honours).
const (
	DefaultStorageClassAnnotation     = "storageclass.kubernetes.io/is-default-class"
	betaDefaultStorageClassAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
)

// NoProvisioner is the provisioner of a class of volumes made by hand.
const NoProvisioner = "kubernetes.io/no-provisioner"

// ConsumerStorageClass is the StorageClass consumers' claims are made
// with here: the one cfg names, or the cluster's default class (the
// newest, when several claim it, as the API server picks), or none. A
// default class of volumes made by hand is not given to consumers unless
// named: any of its volumes that is Available binds a consumer's claim,
// and they may be this cluster's own.
func ConsumerStorageClass(ctx context.Context, c client.Reader, cfg *configv1alpha1.ClusterConfig) (string, error) {
	if name := cfg.Spec.SharingConfig.ConsumerStorageClass; name != "" {
		return name, nil
	}
	var classes storagev1.StorageClassList
	if err := c.List(ctx, &classes); err != nil {
		return "", fmt.Errorf("listing StorageClasses: %w", err)
	}
	var def *storagev1.StorageClass
	for i := range classes.Items {
		sc := &classes.Items[i]
		if sc.Annotations[DefaultStorageClassAnnotation] != "true" && sc.Annotations[betaDefaultStorageClassAnnotation] != "true" {
			continue
		}
		if def == nil || sc.CreationTimestamp.After(def.CreationTimestamp.Time) ||
			(sc.CreationTimestamp.Equal(&def.CreationTimestamp) && sc.Name < def.Name) {
			def = sc
		}
	}
	if def == nil || def.Provisioner == NoProvisioner {
		return "", nil
	}
	return def.Name, nil
}

// SetupWithManager registers the reconciler; only the singleton's name is
// reconciled, since the schema forbids any other.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Store == nil || r.ClusterID == "" {
		return errors.New("clusterconfig.Reconciler needs Client, Store and ClusterID")
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&configv1alpha1.ClusterConfig{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == configv1alpha1.ClusterConfigName
		}))).
		// The default StorageClass is the consumers' one unless the
		// spec names another.
		Watches(&storagev1.StorageClass{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: configv1alpha1.ClusterConfigName}}}
		})).
		Named("clusterconfig").
		Complete(r)
}
