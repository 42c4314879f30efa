// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package clusterid settles the local cluster's identity: a ClusterID that is
// chosen once, stored in a ConfigMap in the Liqo namespace, and never
// changes afterwards, so that peers can recognise this cluster across
// restarts of its components.
package clusterid

import (
	"context"
	"fmt"
	"sort"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// ConfigMapName is the ConfigMap, in the Liqo namespace, that holds the
	// ClusterID.
	ConfigMapName = "liqo-clusterid-configmap"
	// ClusterIDKey is the ConfigMap key of the ClusterID.
	ClusterIDKey = "CLUSTER_ID"
	// SourceKey records where the ClusterID came from, for operators.
	SourceKey = "SOURCE"
)

// Source says where a ClusterID came from.
type Source string

// The possible sources of a ClusterID, in the order they are tried.
const (
	// FromConfigMap: an earlier run already chose it.
	FromConfigMap Source = "ConfigMap"
	// FromControlPlaneNode: the UID of the oldest control-plane node, which
	// is as stable as the cluster itself and visible to anyone who can read
	// nodes.
	FromControlPlaneNode Source = "ControlPlaneNode"
	// FromUUID: a new random UUID, when the cluster has no control-plane
	// node (a managed cluster, or one whose nodes are all workers).
	FromUUID Source = "UUID"
)

// controlPlaneLabels mark control-plane nodes: the current kubeadm label and
// the legacy one.
var controlPlaneLabels = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

// Ensurer settles the ClusterID. NewUUID is injectable so tests can pin it.
type Ensurer struct {
	// Client talks to the local API server; it must read through to the
	// server (no cache), since this runs before any cache has started.
	Client client.Client
	// Namespace is the Liqo namespace; it is created when missing.
	Namespace string
	// NewUUID generates the fallback ID; defaults to uuid.NewString.
	NewUUID func() string
}

// Ensure returns the ClusterID and where it came from, storing it on first
// use. Concurrent callers agree: the first to create the ConfigMap wins and
// the others read its value.
func (e *Ensurer) Ensure(ctx context.Context) (string, Source, error) {
	key := types.NamespacedName{Namespace: e.Namespace, Name: ConfigMapName}
	var cm corev1.ConfigMap
	err := e.Client.Get(ctx, key, &cm)
	switch {
	case err == nil:
		if id := cm.Data[ClusterIDKey]; id != "" {
			return id, FromConfigMap, nil
		}
	case apierrors.IsNotFound(err):
	default:
		return "", "", fmt.Errorf("reading ConfigMap %s: %w", key, err)
	}

	id, source, err := e.choose(ctx)
	if err != nil {
		return "", "", err
	}

	if cm.Name != "" {
		// The ConfigMap exists but has no ID (edited by hand): fill it in.
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[ClusterIDKey], cm.Data[SourceKey] = id, string(source)
		if err := e.Client.Update(ctx, &cm); err != nil {
			return "", "", fmt.Errorf("writing the ClusterID to ConfigMap %s: %w", key, err)
		}
		return id, source, nil
	}

	if err := e.ensureNamespace(ctx); err != nil {
		return "", "", err
	}
	cm = corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: ConfigMapName},
		Data:       map[string]string{ClusterIDKey: id, SourceKey: string(source)},
	}
	if err := e.Client.Create(ctx, &cm); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return e.Ensure(ctx)
		}
		return "", "", fmt.Errorf("creating ConfigMap %s: %w", key, err)
	}
	return id, source, nil
}

// choose picks a new ClusterID: the oldest control-plane node's UID, else a
// UUID.
func (e *Ensurer) choose(ctx context.Context) (string, Source, error) {
	var nodes []corev1.Node
	for _, label := range controlPlaneLabels {
		var list corev1.NodeList
		if err := e.Client.List(ctx, &list, client.HasLabels{label}); err != nil {
			return "", "", fmt.Errorf("listing control-plane nodes: %w", err)
		}
		nodes = append(nodes, list.Items...)
	}
	if len(nodes) > 0 {
		// Oldest first, by name on ties, so that every run picks the same
		// node while the control plane is unchanged.
		sort.Slice(nodes, func(i, j int) bool {
			ti, tj := nodes[i].CreationTimestamp, nodes[j].CreationTimestamp
			if !ti.Equal(&tj) {
				return ti.Before(&tj)
			}
			return nodes[i].Name < nodes[j].Name
		})
		return string(nodes[0].UID), FromControlPlaneNode, nil
	}
	newUUID := e.NewUUID
	if newUUID == nil {
		newUUID = uuid.NewString
	}
	return newUUID(), FromUUID, nil
}

func (e *Ensurer) ensureNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace}}
	if err := e.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", e.Namespace, err)
	}
	return nil
}

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create;update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;create
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
