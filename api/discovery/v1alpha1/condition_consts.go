// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

// Reasons of a ForeignCluster's Authenticated and PeeringRequested
// conditions (the consumer's side of a peering).
const (
	// ReasonNotJoined: spec.join is false; nothing is asked of the peer.
	ReasonNotJoined = "NotJoined"
	// ReasonWaitingForPeer: the peer's address is not known yet.
	ReasonWaitingForPeer = "WaitingForDiscovery"
	// ReasonCANotTrusted: the peer's CA changed or was marked untrusted.
	ReasonCANotTrusted = "CANotTrusted"
	// ReasonAuthFailed: the token exchange failed; the message says why.
	ReasonAuthFailed = "AuthenticationFailed"
	// ReasonRefusedByProvider: the provider's webhook or policy refused
	// the PeeringRequest.
	ReasonRefusedByProvider = "RefusedByProvider"
	// ReasonRequestFailed: the provider could not be asked for a moment;
	// an accepted offer stays accepted through it.
	ReasonRequestFailed = "RequestFailed"
	// ReasonPending: the PeeringRequest waits for the provider's answer.
	ReasonPending = "WaitingForAcceptance"
	// ReasonAccepted: the provider accepted the PeeringRequest.
	ReasonAccepted = "Accepted"
	// ReasonUnpeering: the peering is being torn down; the provider's side
	// first.
	ReasonUnpeering = "Unpeering"
	// ReasonRemovedInProvider: the provider's side is gone (the message
	// says how); the local side is being removed.
	ReasonRemovedInProvider = "RemovedInProvider"
	// ReasonForcingUnpeer: the provider stayed unreachable; the local side
	// is being removed without it.
	ReasonForcingUnpeer = "ForcingUnpeer"
	// ReasonUnpeered: the provider confirmed the teardown.
	ReasonUnpeered = "Unpeered"
	// ReasonForceUnpeered: the provider did not answer in time; the local
	// side was torn down alone.
	ReasonForceUnpeered = "ForceUnpeered"
	// ReasonCAMismatch: the provider's API server answered with another CA
	// than the one pinned.
	ReasonCAMismatch = "CAMismatch"
)

// CausePeeringRefused is the cause type the provider's PeeringRequest
// webhook puts in the details of every refusal: a consumer tells a refusal
// of the peering itself (policy, identity rule) from its identity lacking
// the rights (RBAC), which both come as Forbidden.
const CausePeeringRefused = "PeeringRefused"

// The Resolved condition of a SearchDomain and its reasons.
const (
	// ConditionResolved is True when the domain's last resolution
	// succeeded.
	ConditionResolved = "Resolved"
	// ReasonResolved: every instance the domain lists was read.
	ReasonResolved = "Resolved"
	// ReasonRecordsDropped: some were dropped or refused; the message says
	// how many, why, and the first of each reason.
	ReasonRecordsDropped = "RecordsDropped"
)
