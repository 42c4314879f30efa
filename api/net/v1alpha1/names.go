// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

// NetworkConfigName is the name of the NetworkConfig cluster clusterID
// writes into its tenant namespace in a peer.
func NetworkConfigName(clusterID string) string { return "network-" + clusterID }

// The Processed condition of a NetworkConfig and its reasons.
const (
	// ConditionProcessed is True when the reader took the parameters and
	// decided how it sees the writer's ranges.
	ConditionProcessed = "Processed"
	// ReasonRemapped: the ranges are seen as the status says.
	ReasonRemapped = "Remapped"
	// ReasonInvalid: the parameters cannot be used; the message names the
	// field.
	ReasonInvalid = "Invalid"
	// ReasonPoolExhausted: a range overlaps one in use and no free range of
	// its size is left in the remapping pool.
	ReasonPoolExhausted = "PoolExhausted"
)

// The Established condition of a TunnelEndpoint and its reasons.
const (
	// ConditionEstablished is True while the peer's gateway answers probes
	// through the tunnel.
	ConditionEstablished = "Established"
	// ReasonConnected: the peer answers.
	ReasonConnected = "Connected"
	// ReasonNoAnswer: the peer's gateway does not answer through the
	// tunnel.
	ReasonNoAnswer = "NoAnswer"
	// ReasonWaitingForPeer: the peer has not said yet how it sees this
	// cluster.
	ReasonWaitingForPeer = "WaitingForPeer"
	// ReasonGatewayError: the gateway could not apply the endpoint; the
	// message says why.
	ReasonGatewayError = "GatewayError"
	// ReasonRefused: the gateway left this peer out, alone, because its
	// parameters would disturb the node or another peer (a key another
	// peer holds, an endpoint at a refused address, ranges over what the
	// node uses); the message names the field.
	ReasonRefused = "Refused"
)

// NodeRangesAnnotation remembers, on a TunnelEndpoint, the routes and
// addresses of the gateway's node that were in the way of the peer's
// ranges (status.rangesInUse, as the gateway reported them over time):
// the remapping keeps away from all of them, not only from those the
// gateway reports now.
const NodeRangesAnnotation = "net.liqo.io/node-ranges"

// GatewayKeySecret is the Secret, in the Liqo namespace, holding the
// gateway's WireGuard private key (key "privateKey"), kept across
// restarts so peers need not learn a new key.
const (
	GatewayKeySecret = "liqo-gateway-key"
	GatewayKeyField  = "privateKey"
)

// The gateway's pods carry GatewayComponentLabel=GatewayComponentValue (as
// the chart labels them): a server's endpoint is the node address of one,
// and the route agents send the peers' traffic to that node.
const (
	GatewayComponentLabel = "app.kubernetes.io/component"
	GatewayComponentValue = "gateway"
)
