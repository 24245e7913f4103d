package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/lucas-clemente/quic-go/logging"
	"github.com/lucas-clemente/quic-go/qlog"
)

// counts: what one end's QUIC connection did, from quic-go's tracing callbacks (logging.ConnectionTracer).
// Coded packets are not in them: rQUIC sends those beside the packet handler (session.sendPackedPacket),
// so they are counted by rQUIC's own counters (rLogger), added where the metrics are written.
type counts struct {
	mu               sync.Mutex
	packetsSent      int64
	bytesSent        int64
	packetsReceived  int64
	bytesReceived    int64
	lost             int64
	lostReordering   int64
	lostTimeout      int64
	congestionEvents int64
	ptoCount         int64
	cwnd             int64
	srtt             time.Duration
	minRTT           time.Duration
	state            logging.CongestionState
	closed           chan struct{}
	closeOnce        sync.Once
}

func newCounts() *counts {
	return &counts{closed: make(chan struct{}), state: logging.CongestionStateSlowStart}
}

func (c *counts) snapshot() map[string]interface{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return map[string]interface{}{
		"quic_packets_sent":     c.packetsSent,
		"quic_bytes_sent":       c.bytesSent,
		"quic_packets_received": c.packetsReceived,
		"quic_bytes_received":   c.bytesReceived,
		"lost":                  c.lost,
		"lost_reordering":       c.lostReordering,
		"lost_timeout":          c.lostTimeout,
		"congestion_events":     c.congestionEvents,
		"pto_count":             c.ptoCount,
		"cwnd_final":            c.cwnd,
		"rtt_ms":                ms(c.srtt),
		"min_rtt_ms":            ms(c.minRTT),
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// counter: a logging.ConnectionTracer that only counts.
type counter struct{ c *counts }

var _ logging.ConnectionTracer = counter{}

func (t counter) StartedConnection(local, remote net.Addr, version logging.VersionNumber, srcConnID, destConnID logging.ConnectionID) {
}
func (t counter) ClosedConnection(logging.CloseReason)                                          {}
func (t counter) SentTransportParameters(*logging.TransportParameters)                          {}
func (t counter) ReceivedTransportParameters(*logging.TransportParameters)                      {}
func (t counter) ReceivedVersionNegotiationPacket(*logging.Header, []logging.VersionNumber)     {}
func (t counter) ReceivedRetry(*logging.Header)                                                 {}
func (t counter) BufferedPacket(logging.PacketType)                                             {}
func (t counter) DroppedPacket(logging.PacketType, logging.ByteCount, logging.PacketDropReason) {}
func (t counter) UpdatedKeyFromTLS(logging.EncryptionLevel, logging.Perspective)                {}
func (t counter) UpdatedKey(logging.KeyPhase, bool)                                             {}
func (t counter) DroppedEncryptionLevel(logging.EncryptionLevel)                                {}
func (t counter) SetLossTimer(logging.TimerType, logging.EncryptionLevel, time.Time)            {}
func (t counter) LossTimerExpired(logging.TimerType, logging.EncryptionLevel)                   {}
func (t counter) LossTimerCanceled()                                                            {}

func (t counter) SentPacket(hdr *logging.ExtendedHeader, size logging.ByteCount, ack *logging.AckFrame, frames []logging.Frame) {
	t.c.mu.Lock()
	t.c.packetsSent++
	t.c.bytesSent += int64(size)
	t.c.mu.Unlock()
}

func (t counter) ReceivedPacket(hdr *logging.ExtendedHeader, size logging.ByteCount, frames []logging.Frame) {
	t.c.mu.Lock()
	t.c.packetsReceived++
	t.c.bytesReceived += int64(size)
	t.c.mu.Unlock()
}

func (t counter) UpdatedMetrics(rttStats *logging.RTTStats, cwnd, bytesInFlight logging.ByteCount, packetsInFlight int) {
	t.c.mu.Lock()
	t.c.cwnd = int64(cwnd)
	t.c.srtt = rttStats.SmoothedRTT()
	t.c.minRTT = rttStats.MinRTT()
	t.c.mu.Unlock()
}

func (t counter) LostPacket(level logging.EncryptionLevel, pn logging.PacketNumber, reason logging.PacketLossReason) {
	t.c.mu.Lock()
	t.c.lost++
	if reason == logging.PacketLossReorderingThreshold {
		t.c.lostReordering++
	} else {
		t.c.lostTimeout++
	}
	t.c.mu.Unlock()
}

// UpdatedCongestionState: each entry into recovery is one congestion event (the window reduced once).
func (t counter) UpdatedCongestionState(state logging.CongestionState) {
	t.c.mu.Lock()
	if state == logging.CongestionStateRecovery && t.c.state != logging.CongestionStateRecovery {
		t.c.congestionEvents++
	}
	t.c.state = state
	t.c.mu.Unlock()
}

func (t counter) UpdatedPTOCount(value uint32) {
	if value > 0 {
		t.c.mu.Lock()
		t.c.ptoCount++
		t.c.mu.Unlock()
	}
}

func (t counter) Close() { t.c.closeOnce.Do(func() { close(t.c.closed) }) }

// tracers hands each connection a counter and remembers them in order; config() adds quic-go's qlog
// tracer beside it when asked (logging.NewMultiplexedTracer).
type tracers struct {
	mu    sync.Mutex
	order []*counts
}

var _ logging.Tracer = (*tracers)(nil)

func (t *tracers) TracerForConnection(p logging.Perspective, odcid logging.ConnectionID) logging.ConnectionTracer {
	c := newCounts()
	t.mu.Lock()
	t.order = append(t.order, c)
	t.mu.Unlock()
	return counter{c}
}

// tracer: the counters, and with qlogDir quic-go's own qlog tracer (qlog draft-02 JSON: events as arrays
// of relative_time, category, event, data), one file per connection, named as fecq's:
// <ODCID>_<side>.qlog.
func (t *tracers) tracer(side, qlogDir string) logging.Tracer {
	if qlogDir == "" {
		return t
	}
	q := qlog.NewTracer(func(p logging.Perspective, odcid []byte) io.WriteCloser {
		f, err := os.Create(filepath.Join(qlogDir, fmt.Sprintf("%x_%s.qlog", odcid, side)))
		if err != nil {
			fmt.Fprintf(os.Stderr, "qlog: %v\n", err)
			return nil
		}
		return f
	})
	return logging.NewMultiplexedTracer(t, q)
}

func (t *tracers) SentPacket(net.Addr, *logging.Header, logging.ByteCount, []logging.Frame) {}
func (t *tracers) DroppedPacket(net.Addr, logging.PacketType, logging.ByteCount, logging.PacketDropReason) {
}

// last: the counts of the connection traced last (the client has one; the server one per run).
func (t *tracers) last() *counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.order) == 0 {
		return newCounts()
	}
	return t.order[len(t.order)-1]
}
