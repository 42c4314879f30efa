// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package playground

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"

	"github.com/liqo-go/liqo/internal/network/gateway"
)

// TunnelBytes is what crossed the gateway's tunnel interface on m's
// first real node so far, received and sent (a playground with a
// network, as root).
func (m *Member) TunnelBytes(ctx context.Context) (rx, tx uint64, err error) {
	out, err := exec.CommandContext(ctx, "ip", "-n", m.RealNodeNetns(0), "-j", "-s", "link", "show", "dev", gateway.DefaultInterface).CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("the counters of %s's %s: %w: %s", m.Name, gateway.DefaultInterface, err, out)
	}
	var links []struct {
		Stats struct {
			RX struct {
				Bytes uint64 `json:"bytes"`
			} `json:"rx"`
			TX struct {
				Bytes uint64 `json:"bytes"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return 0, 0, fmt.Errorf("the counters of %s's %s: %w: %s", m.Name, gateway.DefaultInterface, err, out)
	}
	if len(links) != 1 {
		return 0, 0, fmt.Errorf("the counters of %s's %s: %d interfaces listed: %s", m.Name, gateway.DefaultInterface, len(links), out)
	}
	return links[0].Stats.RX.Bytes, links[0].Stats.TX.Bytes, nil
}
