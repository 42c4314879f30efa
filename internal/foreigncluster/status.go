// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package foreigncluster

import (
	"context"
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
)

// statusAttempts bounds how many times PatchStatus writes a change that
// keeps meeting other writers' changes.
const statusAttempts = 5

// PatchStatus writes what changed in fc's status since orig, with an
// optimistic lock. A ForeignCluster's status has several writers (the
// ForeignCluster reconciler, the health checker, both directions of
// peering, the Advertisement operator, the virtual node): when another one
// wrote first, the change (conditions set or removed, fields set) is
// applied again on the latest version, read from latest (the API server,
// not a cache; c when nil), and written again, at most statusAttempts
// times. Before, each such conflict failed the whole reconcile, whose
// retries back off exponentially: a peering waited up to a second for the
// writes of its own Advertisement's acceptance. A change to a list other
// than the conditions (the discovery sources) is not merged: its writer
// decided on the list it read, so the conflict is returned and the writer
// reconciles again. On success fc is the version written.
func PatchStatus(ctx context.Context, c client.Client, latest client.Reader, orig, fc *discoveryv1alpha1.ForeignCluster) error {
	if equality.Semantic.DeepEqual(orig.Status, fc.Status) {
		return nil
	}
	if latest == nil {
		latest = c
	}
	change, err := newStatusChange(orig, fc)
	if err != nil {
		return err
	}
	base := orig
	for attempt := 1; ; attempt++ {
		err := c.Status().Patch(ctx, fc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if !apierrors.IsConflict(err) || !change.mergeable || attempt == statusAttempts {
			return err
		}
		var cur discoveryv1alpha1.ForeignCluster
		if err := latest.Get(ctx, client.ObjectKeyFromObject(fc), &cur); err != nil {
			return err
		}
		next := cur.DeepCopy()
		if err := change.apply(next); err != nil {
			return err
		}
		if equality.Semantic.DeepEqual(cur.Status, next.Status) {
			*fc = cur
			return nil // someone else wrote the same
		}
		base, *fc = &cur, *next
	}
}

// statusChange is what one writer changed in a ForeignCluster's status:
// conditions set or removed by type, and a JSON merge patch of the rest.
type statusChange struct {
	set       []metav1.Condition
	removed   []string
	rest      []byte
	mergeable bool
}

func newStatusChange(orig, fc *discoveryv1alpha1.ForeignCluster) (*statusChange, error) {
	ch := &statusChange{}
	for _, c := range fc.Status.Conditions {
		if o := meta.FindStatusCondition(orig.Status.Conditions, c.Type); o == nil || !equality.Semantic.DeepEqual(*o, c) {
			ch.set = append(ch.set, c)
		}
	}
	for _, o := range orig.Status.Conditions {
		if meta.FindStatusCondition(fc.Status.Conditions, o.Type) == nil {
			ch.removed = append(ch.removed, o.Type)
		}
	}
	before, err := statusWithoutConditions(&orig.Status)
	if err != nil {
		return nil, err
	}
	after, err := statusWithoutConditions(&fc.Status)
	if err != nil {
		return nil, err
	}
	if ch.rest, err = jsonpatch.CreateMergePatch(before, after); err != nil {
		return nil, fmt.Errorf("diffing ForeignCluster %s status: %w", fc.Name, err)
	}
	var patch any
	if err := json.Unmarshal(ch.rest, &patch); err != nil {
		return nil, err
	}
	ch.mergeable = !holdsList(patch)
	return ch, nil
}

// apply makes the same change to fc.
func (ch *statusChange) apply(fc *discoveryv1alpha1.ForeignCluster) error {
	rest, err := statusWithoutConditions(&fc.Status)
	if err != nil {
		return err
	}
	if rest, err = jsonpatch.MergePatch(rest, ch.rest); err != nil {
		return err
	}
	conditions := fc.Status.Conditions
	fc.Status = discoveryv1alpha1.ForeignClusterStatus{}
	if err := json.Unmarshal(rest, &fc.Status); err != nil {
		return err
	}
	fc.Status.Conditions = conditions
	for _, t := range ch.removed {
		meta.RemoveStatusCondition(&fc.Status.Conditions, t)
	}
	for _, c := range ch.set {
		meta.SetStatusCondition(&fc.Status.Conditions, c)
	}
	return nil
}

func statusWithoutConditions(s *discoveryv1alpha1.ForeignClusterStatus) ([]byte, error) {
	cp := s.DeepCopy()
	cp.Conditions = nil
	return json.Marshal(cp)
}

// holdsList reports whether a decoded JSON value holds an array anywhere.
func holdsList(v any) bool {
	switch v := v.(type) {
	case []any:
		return true
	case map[string]any:
		for _, e := range v {
			if holdsList(e) {
				return true
			}
		}
	}
	return false
}
