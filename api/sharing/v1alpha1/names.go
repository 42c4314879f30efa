// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

// AcceptAnnotation set to "true" on an Advertisement accepts it when
// spec.sharingConfig.autoAccept is off (the cap still applies).
const AcceptAnnotation = "sharing.liqo.io/accept"

// AdvertisementPrefix starts the name of every Advertisement.
const AdvertisementPrefix = "advertisement-"

// AdvertisementName is the name of the Advertisement provider writes into
// its tenant namespace in a consumer.
func AdvertisementName(providerID string) string { return AdvertisementPrefix + providerID }

// Reasons of an Advertisement's decision.
const (
	ReasonAccepted          = "Accepted"
	ReasonOverCap           = "OverMaxAcceptedResources"
	ReasonAwaitingOperator  = "AutoAcceptDisabled"
	ReasonWrongNamespace    = "WrongNamespace"
	ReasonExpired           = "Expired"
	ReasonUnknownProvider   = "UnknownProvider"
	ReasonProviderNotJoined = "NotJoined"
	ReasonNetworkOnly       = "NetworkOnly"
	ReasonPoolsOverOffer    = "PoolsOverOffer"
)
