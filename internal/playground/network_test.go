// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package playground

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/liqo-go/liqo/internal/localcluster"
)

// TestNetworkSupportedSaysWhatIsMissing: a playground's network needs real
// nodes (root, Debian packages, the node's binaries) and the gateway's
// image; what is missing is named, with how to get it, so that `liqoctl
// playground up --network` can say why the network is off.
func TestNetworkSupportedSaysWhatIsMissing(t *testing.T) {
	empty := t.TempDir()
	if err := NetworkSupported(empty, ""); err == nil {
		t.Error("a bin directory without the node's binaries supports a network")
	}
	bin, err := localcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), GatewayImageFile)
	err = NetworkSupported(bin, missing)
	if nodes := localcluster.RealNodesSupported(bin); nodes != nil {
		// No real node here: that is what is said, before the image.
		if err == nil || err.Error() != nodes.Error() {
			t.Errorf("without real nodes: %v, want %v", err, nodes)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "make ") {
		t.Errorf("without the gateway's image: %v, want the archive named and the make target", err)
	}
}
