// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The bounds of a Measurement's history.
const (
	// MinuteBuckets is how many one-minute buckets a Measurement keeps:
	// an hour.
	MinuteBuckets = 60
	// HourBuckets is how many one-hour buckets it keeps: a week.
	HourBuckets = 168
)

// Bucket is what the health checks of one minute, or one hour, found.
type Bucket struct {
	// Start of the bucket.
	Start metav1.Time `json:"start"`
	// Probes made in it.
	Probes int32 `json:"probes"`
	// Up are those the provider's API server answered ready.
	Up int32 `json:"up"`
	// LatencyMicros is the median round trip of the answered probes, in
	// microseconds.
	// +optional
	LatencyMicros int64 `json:"latencyMicros,omitempty"`
}

// MeasurementStatus is what the broker measured of one provider.
type MeasurementStatus struct {
	// LastProbe is when the provider was last probed.
	// +optional
	LastProbe *metav1.Time `json:"lastProbe,omitempty"`
	// Reachable says whether the last probe was answered ready.
	// +optional
	Reachable bool `json:"reachable"`
	// UnreachableSince is when the probes began to fail, while they do.
	// +optional
	UnreachableSince *metav1.Time `json:"unreachableSince,omitempty"`
	// LastError is the last failed probe's error.
	// +optional
	LastError string `json:"lastError,omitempty"`
	// LatencyMicros is the median round trip of the answered probes of
	// the last 15 seconds, in microseconds.
	// +optional
	LatencyMicros int64 `json:"latencyMicros,omitempty"`
	// TunnelLatencyMicros is the round trip through the network
	// fabric's tunnel to the provider's gateway, in microseconds, as this
	// cluster's gateway measures it (a probe a second; its
	// TunnelEndpoint), read at each probe; absent while no tunnel to the
	// provider is established.
	// +optional
	TunnelLatencyMicros int64 `json:"tunnelLatencyMicros,omitempty"`
	// Minutes are the last hour's one-minute buckets, oldest first.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=60
	// +optional
	Minutes []Bucket `json:"minutes,omitempty"`
	// Hours are the last week's one-hour buckets, oldest first.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=168
	// +optional
	Hours []Bucket `json:"hours,omitempty"`
}

// Measurement is what a broker cluster measures itself of one of its
// providers: health checks of the provider's API server made with the
// broker's identity there, every few seconds, with their history over a
// week, bounded. It lives in the Liqo namespace, named after the
// provider's ClusterID; the broker cluster's controller manager writes it
// (where no peer writes), liqo-broker reads it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="Reachable",type=boolean,JSONPath=`.status.reachable`
// +kubebuilder:printcolumn:name="Latency(us)",type=integer,JSONPath=`.status.latencyMicros`
// +kubebuilder:printcolumn:name="Tunnel(us)",type=integer,JSONPath=`.status.tunnelLatencyMicros`
// +kubebuilder:printcolumn:name="Last probe",type=date,JSONPath=`.status.lastProbe`
type Measurement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status MeasurementStatus `json:"status,omitempty"`
}

// MeasurementList is a list of Measurement.
//
// +kubebuilder:object:root=true
type MeasurementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Measurement `json:"items"`
}

func init() {
	register(&Measurement{}, &MeasurementList{})
}
