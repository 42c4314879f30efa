// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package auth

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/liqo-go/liqo/api"
)

func TestEnsureToken(t *testing.T) {
	tests := []struct {
		name     string
		existing []client.Object
		keep     string // the token that must be kept, if any
	}{
		{"creates one", nil, ""},
		{"keeps the existing one", []client.Object{&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "liqo", Name: TokenSecret},
			Data:       map[string][]byte{TokenKey: []byte("kept")},
		}}, "kept"},
		{"fills in an empty Secret", []client.Object{&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "liqo", Name: TokenSecret},
		}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(tt.existing...).Build()
			first, err := EnsureToken(t.Context(), c, "liqo")
			if err != nil {
				t.Fatal(err)
			}
			if tt.keep != "" && first != tt.keep {
				t.Fatalf("token %q, want the existing %q", first, tt.keep)
			}
			if tt.keep == "" && len(first) != 64 {
				t.Fatalf("new token %q is not 32 bytes in hex", first)
			}
			again, err := EnsureToken(t.Context(), c, "liqo")
			if err != nil || again != first {
				t.Fatalf("second call = %q, %v; want %q", again, err, first)
			}
		})
	}
}
