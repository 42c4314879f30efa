// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package foreigncluster

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ChoicesConfigMap holds, per ClusterID, the last join decision taken for
// that cluster.
const ChoicesConfigMap = "liqo-peering-choices"

// Choices remembers the join decision of every cluster this one has known,
// like a laptop remembers which Wi-Fi networks to join: a cluster
// rediscovered after its ForeignCluster was deleted gets the decision it
// had, and autojoin applies only to clusters never seen before.
type Choices struct {
	// Client reads and writes the ConfigMap.
	Client client.Client
	// Namespace is the Liqo namespace.
	Namespace string
}

// Get returns the remembered decision for clusterID, if any.
func (c *Choices) Get(ctx context.Context, clusterID string) (join, ok bool, err error) {
	var cm corev1.ConfigMap
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ChoicesConfigMap}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return false, false, nil
		}
		return false, false, fmt.Errorf("reading remembered peering choices: %w", err)
	}
	v, ok := cm.Data[clusterID]
	if !ok {
		return false, false, nil
	}
	join, err = strconv.ParseBool(v)
	return join, err == nil, nil
}

// maxChoices bounds the decisions remembered: a flood of announced
// clusters, autojoined, must not grow the ConfigMap past its size limit.
const maxChoices = 4096

// Set remembers the decision for clusterID. Not joining a cluster never
// joined is what every new cluster gets without autojoin, and is not
// written down: only decisions a cluster was ever joined under are kept.
func (c *Choices) Set(ctx context.Context, clusterID string, join bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ChoicesConfigMap}, &cm)
		if apierrors.IsNotFound(err) {
			if !join {
				return nil
			}
			cm = corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: ChoicesConfigMap},
				Data:       map[string]string{clusterID: strconv.FormatBool(join)},
			}
			return c.Client.Create(ctx, &cm)
		}
		if err != nil {
			return err
		}
		old, known := cm.Data[clusterID]
		if old == strconv.FormatBool(join) || !known && (!join || len(cm.Data) >= maxChoices) {
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[clusterID] = strconv.FormatBool(join)
		return c.Client.Update(ctx, &cm)
	})
}
