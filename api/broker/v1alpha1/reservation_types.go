// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxReservations bounds the consumers holding a reservation of one
// provider.
const MaxReservations = 1024

// ConsumerReservation is what one consumer's policy holds of a provider's
// offer.
type ConsumerReservation struct {
	// Consumer is the consumer's ClusterID.
	Consumer string `json:"consumer"`
	// Resources held for the consumer: its share of what its namespaces
	// request, which no other consumer's policy is promised.
	Resources corev1.ResourceList `json:"resources"`
	// Since when it holds them.
	Since metav1.Time `json:"since"`
}

// ReservationStatus is what consumers hold of one provider.
type ReservationStatus struct {
	// Consumers holding part of the provider's offer.
	// +listType=map
	// +listMapKey=consumer
	// +kubebuilder:validation:MaxItems=1024
	// +optional
	Consumers []ConsumerReservation `json:"consumers,omitempty"`
	// Reserved is their sum.
	// +optional
	Reserved corev1.ResourceList `json:"reserved,omitempty"`
}

// Reservation is the ledger of what consumers' policies hold of one
// provider's offer, in the broker cluster's Liqo namespace, named after
// the provider's ClusterID. liqo-broker writes it at decision time, with
// the API server's optimistic concurrency: two consumers deciding at once
// never both hold what only one of them fits in.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="Consumers",type=string,JSONPath=`.status.consumers[*].consumer`
// +kubebuilder:printcolumn:name="Reserved",type=string,JSONPath=`.status.reserved`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Reservation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status ReservationStatus `json:"status,omitempty"`
}

// ReservationList is a list of Reservation.
//
// +kubebuilder:object:root=true
type ReservationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Reservation `json:"items"`
}

func init() {
	register(&Reservation{}, &ReservationList{})
}
