package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/ioutil"
	"os"
	"time"

	quic "github.com/lucas-clemente/quic-go"
	"github.com/lucas-clemente/quic-go/rquic/rLogger"
)

// statsWait: how long the client waits for the server's counters after the download (never past --timeout).
const statsWait = 5 * time.Second

// runClient downloads --size bytes and writes the metrics JSON (quic-impls/rquic/README.md, "Metrics").
func runClient(o *options) int {
	start := time.Now()
	deadline := start.Add(o.timeout())
	m := map[string]interface{}{
		"ok": false, "error": nil, "timed_out": false, "workload": o.workload, "size": o.size,
		"fec": o.fec, "rquic": o.describe(), "timeout_s": o.timeoutS,
	}
	if o.fec != "none" {
		m["ratio_initial"], m["dynamic"], m["reduns"], m["overlap"] = o.ratio, o.dynamic, o.reduns, o.overlap
		m["tperiod_ms"], m["periods"], m["gamma"], m["delta"] = o.tperiodMS, o.periods, o.gamma, o.delta
		m["tperiod_rtts"] = o.tperiodRTT
		m["bto_ms"], m["bto_rtts"] = o.btoMS, o.btoRTT
	}
	finish := func(code int, err error) int {
		m["elapsed_ms"] = ms(time.Since(start))
		if err != nil {
			m["error"] = err.Error()
		}
		m["timed_out"] = code == exitTimeout
		m["ok"] = code == 0
		if werr := writeJSON(o.out, m); werr != nil {
			fmt.Fprintf(os.Stderr, "rquic-fecbench client: writing %s: %v\n", o.out, werr)
			return exitFailed
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "rquic-fecbench client: %v\n", err)
		}
		return code
	}
	failed := func(what string, err error) int {
		if !time.Now().Before(deadline) {
			return finish(exitTimeout, fmt.Errorf("timed out after %g s (%s)", o.timeoutS, what))
		}
		return finish(exitFailed, fmt.Errorf("%s: %v", what, err))
	}

	s, err := newSetup(o)
	if err != nil {
		return finish(exitFailed, err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	// DialAddr, not Dial on a counted socket: quic-go gives a client on a socket of its own a zero-length
	// connection ID (rQUIC's headers sit after it), on a given socket a 4-byte one.
	sess, err := quic.DialAddrContext(ctx, o.server, clientTLS(s.keylog), s.quic)
	if err != nil {
		return failed("handshake", err)
	}
	m["handshake_ms"] = ms(time.Since(start))
	closeSession := func(wait time.Duration) {
		sess.CloseWithError(0, "done")
		select { // the connection's qlog is complete once its session has ended
		case <-sess.Context().Done():
		case <-time.After(wait):
		}
		rLogger.Stop()
	}

	what, err := "", error(nil)
	if o.workload == "page" {
		m["size"] = nil
		what, err = loadPage(ctx, sess, o.pageGraph, m)
	} else {
		what, err = download(ctx, sess, o, m, deadline)
	}
	if err != nil {
		closeSession(time.Second)
		if what == "" { // complete, but not what was asked
			return finish(exitFailed, err)
		}
		return failed(what, err)
	}

	// What the data sender did: the server's counters.
	if server, err := fetchStats(sess, minTime(deadline, time.Now().Add(statsWait))); err != nil {
		m["stats_error"] = err.Error()
	} else {
		m["server"] = server
		for _, k := range []string{"lost", "congestion_events", "cwnd_final", "rtt_ms", "min_rtt_ms", "pto_count",
			"repair_sent", "source_sent", "bytes_sent"} {
			m[k] = server[k]
		}
		repairs, _ := server["repair_sent"].(float64)
		sources, _ := server["source_sent"].(float64)
		m["packets_sent"] = server["datagrams_sent"]
		if repairs > 0 {
			m["coding_ratio_mean"] = sources / repairs    // rQUIC's Eq. 7: Q = 1/O − 1
			m["overhead"] = repairs / (sources + repairs) // rQUIC's Eq. 5: O = CP / (PP + CP)
		}
	}
	closeSession(2 * time.Second)
	client := s.tracers.last().snapshot()
	for k, v := range rquicCounters() {
		client[k] = v
	}
	m["client"] = client
	m["recovered"], m["repair_received"] = client["recovered"], client["repair_received"]
	m["bto_releases"] = client["bto_releases"]
	m["packets_received"] = client["quic_packets_received"]
	return finish(0, nil)
}

// download: request sent → its last byte received (dct_ms); what failed and why, or ("", err) for a
// download that ended short.
func download(ctx context.Context, sess quic.Session, o *options, m map[string]interface{},
	deadline time.Time) (string, error) {
	str, err := sess.OpenStreamSync(ctx)
	if err != nil {
		return "opening the stream", err
	}
	requested := time.Now()
	if _, err := fmt.Fprintf(str, "GET %d\n", o.size); err != nil {
		return "sending the request", err
	}
	str.Close()
	str.SetReadDeadline(deadline)
	got, err := io.Copy(ioutil.Discard, str)
	m["bytes_app"] = got
	if err != nil {
		return fmt.Sprintf("download (%d of %d bytes)", got, o.size), err
	}
	m["dct_ms"] = ms(time.Since(requested))
	if got != o.size {
		return "", fmt.Errorf("download ended after %d of %d bytes", got, o.size)
	}
	return "", nil
}

func fetchStats(sess quic.Session, until time.Time) (map[string]interface{}, error) {
	ctx, cancel := context.WithDeadline(context.Background(), until)
	defer cancel()
	str, err := sess.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := str.Write([]byte("STATS\n")); err != nil {
		return nil, err
	}
	str.Close()
	str.SetReadDeadline(until)
	body, err := ioutil.ReadAll(str)
	if err != nil {
		return nil, err
	}
	out := map[string]interface{}{}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("the server's counters: %v", err)
	}
	return out, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func writeJSON(path string, m map[string]interface{}) error {
	if path == "-" {
		return errors.New("no --out file")
	}
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".part"
	if err := ioutil.WriteFile(tmp, append(body, '\n'), 0644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
