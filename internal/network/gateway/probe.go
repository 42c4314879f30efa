// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package gateway

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// ProbeInterval is how often the gateway probes each peer through the
// tunnel; a peer is established while it answered one of the last
// ProbeLosses probes.
const (
	ProbeInterval = time.Second
	ProbeLosses   = 3
)

// prober sends an ICMP echo request through the tunnel to each peer's
// gateway every ProbeInterval and times the replies. The echo goes to the
// peer's tunnel address as this cluster sees it, so a reply proves the
// whole path: WireGuard, routes and both sides' translation.
type prober struct {
	conn   *icmp.PacketConn
	now    func() time.Time
	onDown func(peerID string)

	mu      sync.Mutex
	targets map[netip.Addr]*target
	done    chan struct{}
	wg      sync.WaitGroup
}

type target struct {
	peerID string
	// id is the ICMP echo identifier of the target's probes: conntrack
	// keys an echo flow by it. A target that goes silent gets a new one,
	// so that its probes make a new flow: one that conntrack recorded
	// wrong (before the rules were there) would otherwise live on, kept
	// alive by the probes themselves.
	id        int
	since     time.Time
	seq       uint16
	sent      map[uint16]time.Time
	lastReply time.Time
	rtt       time.Duration
	silent    int
}

// probeStatus is what the prober knows of one peer.
type probeStatus struct {
	established bool
	latency     time.Duration
	lastReply   time.Time
}

// newProber starts probing; onDown is called, apart, every second probe
// while a peer has not answered the last two, and every probe while it
// never answered.
func newProber(onDown func(string)) (*prober, error) {
	c, err := icmp.ListenPacket("ip4:icmp", "0.0.0.0")
	if err != nil {
		return nil, fmt.Errorf("opening the ICMP socket of the prober: %w", err)
	}
	p := &prober{conn: c, now: time.Now, onDown: onDown,
		targets: map[netip.Addr]*target{}, done: make(chan struct{})}
	p.wg.Add(2)
	go p.receive()
	go p.send()
	return p, nil
}

// setTargets replaces the peers probed, keeping what is known of those
// that stay.
func (p *prober) setTargets(peers []Peer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := map[netip.Addr]*target{}
	for _, peer := range peers {
		a := peer.ProbeAddress()
		if t, ok := p.targets[a]; ok && t.peerID == peer.ID {
			next[a] = t
			continue
		}
		next[a] = &target{peerID: peer.ID, id: newEchoID(), since: p.now(), sent: map[uint16]time.Time{}}
	}
	p.targets = next
}

func (p *prober) status(peerID string) probeStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.targets {
		if t.peerID == peerID {
			return probeStatus{
				established: !t.lastReply.IsZero() && p.now().Sub(t.lastReply) < ProbeLosses*ProbeInterval,
				latency:     t.rtt,
				lastReply:   t.lastReply,
			}
		}
	}
	return probeStatus{}
}

func (p *prober) send() {
	defer p.wg.Done()
	tick := time.NewTicker(ProbeInterval)
	defer tick.Stop()
	for {
		p.sendAll()
		select {
		case <-p.done:
			return
		case <-tick.C:
		}
	}
}

func (p *prober) sendAll() {
	p.mu.Lock()
	now := p.now()
	type out struct {
		to  netip.Addr
		msg []byte
	}
	var msgs []out
	var down []string
	for a, t := range p.targets {
		// What was not answered within the losses window is lost.
		for seq, at := range t.sent {
			if now.Sub(at) >= ProbeLosses*ProbeInterval {
				delete(t.sent, seq)
			}
		}
		// Silent: no answer to the last two probes, said every other
		// interval. A peer that never answered is said silent every
		// interval from the first on: it is most likely a server that was
		// configured after this side's first handshake (which it
		// dropped), and its first contact is what peering waits for.
		if t.lastReply.IsZero() && now.Sub(t.since) >= ProbeInterval {
			t.silent++
			down = append(down, t.peerID)
			t.id = newEchoID()
		} else if !t.lastReply.IsZero() && now.Sub(t.lastReply) >= 2*ProbeInterval {
			t.silent++
			if t.silent%2 == 1 {
				down = append(down, t.peerID)
				t.id = newEchoID()
			}
		}
		b, err := t.echo(now)
		if err != nil {
			continue
		}
		msgs = append(msgs, out{a, b})
	}
	p.mu.Unlock()
	for _, m := range msgs {
		// A send fails while there is no route yet; the next tick tries
		// again.
		_, _ = p.conn.WriteTo(m.msg, &net.IPAddr{IP: net.IP(m.to.AsSlice())})
	}
	// Outside the lock, and apart: what onDown does may wait for things
	// that wait for the prober.
	for _, id := range down {
		if p.onDown != nil {
			go p.onDown(id)
		}
	}
}

// echo is the target's next probe, recorded as sent at now.
func (t *target) echo(now time.Time) ([]byte, error) {
	t.seq++
	b, err := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: t.id, Seq: int(t.seq), Data: []byte("liqo-probe")}}).Marshal(nil)
	if err != nil {
		return nil, err
	}
	t.sent[t.seq] = now
	return b, nil
}

// probeNow sends peerID a probe at once: after its session was started
// over, that probe is what opens the new handshake, a probe interval
// sooner than the next tick.
func (p *prober) probeNow(peerID string) {
	p.mu.Lock()
	var to netip.Addr
	var msg []byte
	for a, t := range p.targets {
		if t.peerID == peerID {
			if b, err := t.echo(p.now()); err == nil {
				to, msg = a, b
			}
		}
	}
	p.mu.Unlock()
	if msg != nil {
		_, _ = p.conn.WriteTo(msg, &net.IPAddr{IP: net.IP(to.AsSlice())})
	}
}

func (p *prober) receive() {
	defer p.wg.Done()
	buf := make([]byte, 1500)
	for {
		n, from, err := p.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		msg, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || msg.Type != ipv4.ICMPTypeEchoReply {
			continue
		}
		echo, ok := msg.Body.(*icmp.Echo)
		if !ok {
			continue
		}
		ipAddr, ok := from.(*net.IPAddr)
		if !ok || echo.Seq < 0 || echo.Seq > math.MaxUint16 {
			continue
		}
		a, ok := netip.AddrFromSlice(ipAddr.IP)
		if !ok {
			continue
		}
		p.reply(a.Unmap(), echo.ID, uint16(echo.Seq))
	}
}

func (p *prober) reply(from netip.Addr, id int, seq uint16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.targets[from]
	if !ok || id != t.id {
		return
	}
	at, ok := t.sent[seq]
	if !ok {
		return
	}
	delete(t.sent, seq)
	now := p.now()
	t.rtt = now.Sub(at)
	t.lastReply = now
	t.silent = 0
}

// newEchoID is a random ICMP echo identifier.
func newEchoID() int {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return int(b[0])<<8 | int(b[1])
}

func (p *prober) close() {
	close(p.done)
	_ = p.conn.Close()
	p.wg.Wait()
}
