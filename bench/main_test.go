// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package bench

import (
	"os"
	"testing"

	"github.com/liqo-go/liqo/internal/network/gateway/gatewaytest"
)

// TestMain lets the network benchmark run this binary again as a gateway
// inside a namespace.
func TestMain(m *testing.M) {
	gatewaytest.Main()
	os.Exit(m.Run())
}
