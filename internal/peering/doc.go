// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package peering runs both ends of a peering (docs/peering.md).
//
// On the provider: the Issuer answers the auth service's token exchange
// with a certificate for liqo-consumer-<id> that may create that
// consumer's PeeringRequest and nothing else; the Validator is the
// admission webhook that applies the peering policy to PeeringRequests;
// the Incoming reconciler verifies an admitted PeeringRequest, creates the
// tenant namespace and the virtual kubelet's identity, and revokes all of
// it when the PeeringRequest goes.
//
// On the consumer: the Outgoing reconciler turns a joined ForeignCluster
// into a PeeringRequest in the provider, repairs drift every reconcile
// period, and tears everything down on join=false, bounded in time when
// the provider is unreachable.
package peering
