// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering_test

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func clusterRole(name string) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
