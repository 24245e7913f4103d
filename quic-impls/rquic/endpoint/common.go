package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	quic "github.com/lucas-clemente/quic-go"
	"github.com/lucas-clemente/quic-go/rquic"
	"github.com/lucas-clemente/quic-go/rquic/rLogger"
)

// setup: what both sides share: rQUIC's configuration, the QUIC configuration with the tracers, the
// TLS key log, and rQUIC's own trace (its coding ratio and congestion window over time, rLogger's CSV)
// beside the qlog when one is asked for.
type setup struct {
	quic    *quic.Config
	tracers *tracers
	keylog  io.Writer
	wire    wire
}

// wire: the datagrams and bytes (UDP payload) the server wrote to its socket: QUIC packets with rQUIC's
// headers, coded packets (which quic-go's tracer does not see) and everything else, as fecq counts them.
type wire struct {
	datagrams int64
	bytes     int64
}

func (w *wire) counts() map[string]interface{} {
	return map[string]interface{}{"datagrams_sent": atomic.LoadInt64(&w.datagrams),
		"bytes_sent": atomic.LoadInt64(&w.bytes)}
}

// countingConn: the UDP socket quic-go sends on (it writes with WriteTo only: send_conn.go), counted.
type countingConn struct {
	*net.UDPConn
	w *wire
}

func (c countingConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	n, err := c.UDPConn.WriteTo(p, addr)
	if err == nil {
		atomic.AddInt64(&c.w.datagrams, 1)
		atomic.AddInt64(&c.w.bytes, int64(n))
	}
	return n, err
}

// socket: a UDP socket bound to addr, counted (the server's: quic.Listen on it is quic.ListenAddr).
func (s *setup) socket(addr string) (countingConn, error) {
	local, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return countingConn{}, err
	}
	c, err := net.ListenUDP("udp", local)
	if err != nil {
		return countingConn{}, err
	}
	return countingConn{c, &s.wire}, nil
}

func newSetup(o *options) (*setup, error) {
	conf, err := o.rquicConf()
	if err != nil {
		return nil, fmt.Errorf("rQUIC configuration: %v", err)
	}
	// The period of rQUIC's residual-loss measurement in smoothed RTTs (fecbench.patch), a process-wide
	// switch as rQUIC's own (BTOMargin, PauseEncodingWith): one connection per process here.
	rquic.TPeriodRTTs = o.tperiodRTT
	// The decoder's buffer timeout, fixed or in smoothed RTTs (fecbench.patch; 0: rQUIC's rule), likewise.
	rquic.BTOMs, rquic.BTORTTs = o.btoMS, o.btoRTT
	s := &setup{tracers: &tracers{}}
	// fecbench's one time limit is the design's timeout_s: neither end gives up earlier on its own (the
	// client's own deadline is timeout_s; its QUIC timers are set a little beyond, so that it is the one).
	limit := o.timeout()
	if o.role == "client" {
		limit += 5 * time.Second
	}
	s.quic = &quic.Config{
		RQuic:            conf,
		HandshakeTimeout: limit,
		MaxIdleTimeout:   limit,
		Tracer:           s.tracers.tracer(o.role, o.qlogDir),
	}
	if o.keylogFile != "" {
		f, err := os.OpenFile(o.keylogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0600)
		if err != nil {
			return nil, fmt.Errorf("--keylog-file: %v", err)
		}
		s.keylog = f
	}
	if o.qlogDir != "" {
		// rLogger's trace: "<ns since start>,<cwnd bytes>," at each window change (quic-go's cubic_sender,
		// patched by rQUIC) and ",<code ratio>" pairs at each ratio change (rencoder), file <side>_rquic.csv.
		if err := rLogger.Init(filepath.Join(o.qlogDir, o.role+"_rquic"), true, false, false); err != nil {
			return nil, fmt.Errorf("rQUIC trace: %v", err)
		}
	}
	return s, nil
}

// rquicCounters: rQUIC's own per-process counters (rLogger; one connection per process in a run):
// source and coded packets sent, losses its ratio adaptation was told of, source and coded packets
// received by the decoder, packets it recovered; and packets its buffer released after waiting a BTO
// (fecbench.patch).
func rquicCounters() map[string]int64 {
	var txSrc, txCod, txRet, rxSrc, rxCod, rxRec int64
	fmt.Sscanf(rLogger.CountersReport(), "%d,%d,%d,%d,%d,%d", &txSrc, &txCod, &txRet, &rxSrc, &rxCod, &rxRec)
	return map[string]int64{"source_sent": txSrc, "repair_sent": txCod, "losses_seen_by_ratio": txRet,
		"source_received": rxSrc, "repair_received": rxCod, "recovered": rxRec, "bto_releases": rquic.BTOReleases}
}

// serverTLS: a throwaway self-signed certificate made in memory (no file a second instance would share).
func serverTLS(keylog io.Writer) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	template := x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fecbench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour), DNSNames: []string{"fecbench"}}
	der, err := x509.CreateCertificate(rand.Reader, &template, &template, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{alpn}, KeyLogWriter: keylog}, nil
}

func clientTLS(keylog io.Writer) *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, NextProtos: []string{alpn}, KeyLogWriter: keylog}
}
