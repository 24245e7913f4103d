package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/ioutil"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	quic "github.com/lucas-clemente/quic-go"
	"github.com/lucas-clemente/quic-go/rquic/rLogger"
)

// The application protocol, one bidirectional stream per request, opened by the client:
//
//	"GET <n>\n"  → n bytes, then the end of the stream (the download);
//	"PAGE <q> <n>\n" + q bytes → n bytes, then the end of the stream (a page's object: page.go);
//	"STATS\n"    → this server's counters as one JSON object (asked once the download is complete).
// Streams are served concurrently: a page's downloads run at once, as a browser's do.
const maxRequest = 64

func runServer(o *options) int {
	s, err := newSetup(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rquic-fecbench server: %v\n", err)
		return exitFailed
	}
	tlsConf, err := serverTLS(s.keylog)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rquic-fecbench server: certificate: %v\n", err)
		return exitFailed
	}
	conn, err := s.socket(o.listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rquic-fecbench server: listen %s: %v\n", o.listen, err)
		return exitFailed
	}
	ln, err := quic.Listen(conn, tlsConf, s.quic) // quic.ListenAddr's own steps, on a counted socket
	if err != nil {
		fmt.Fprintf(os.Stderr, "rquic-fecbench server: listen %s: %v\n", o.listen, err)
		return exitFailed
	}
	fmt.Printf("listening %s fec %s\n", ln.Addr(), o.describe())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var mu sync.Mutex
	var sessions []quic.Session
	go func() {
		for {
			sess, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			mu.Lock()
			sessions = append(sessions, sess)
			mu.Unlock()
			go serveSession(sess, s)
		}
	}()
	<-stop
	// Close what is still open (each connection's qlog is written when it closes), then report.
	mu.Lock()
	for _, sess := range sessions {
		sess.CloseWithError(0, "server stopping")
	}
	for _, sess := range sessions {
		select {
		case <-sess.Context().Done():
		case <-time.After(time.Second):
		}
	}
	mu.Unlock()
	ln.Close()
	conn.Close()
	rLogger.Stop()
	line, _ := json.Marshal(serverStats(s))
	fmt.Printf("stopped %s\n", line)
	return 0
}

func serverStats(s *setup) map[string]interface{} {
	out := s.tracers.last().snapshot()
	for k, v := range rquicCounters() {
		out[k] = v
	}
	for k, v := range s.wire.counts() {
		out[k] = v
	}
	return out
}

func serveSession(sess quic.Session, s *setup) {
	for {
		str, err := sess.AcceptStream(context.Background())
		if err != nil {
			return
		}
		go func(str quic.Stream) {
			if err := serveStream(str, s); err != nil {
				fmt.Fprintf(os.Stderr, "rquic-fecbench server: stream %d: %v\n", str.StreamID(), err)
				str.CancelWrite(1)
			}
		}(str)
	}
}

func serveStream(str quic.Stream, s *setup) error {
	request, err := readLine(str)
	if err != nil {
		return err
	}
	switch {
	case request == "STATS":
		body, _ := json.Marshal(serverStats(s))
		if _, err := str.Write(body); err != nil {
			return err
		}
	case strings.HasPrefix(request, "GET "):
		n, err := strconv.ParseInt(strings.TrimPrefix(request, "GET "), 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("bad request %q", request)
		}
		if err := writeBytes(str, n); err != nil {
			return err
		}
	case strings.HasPrefix(request, "PAGE "):
		var up, down int64
		if n, err := fmt.Sscanf(request, "PAGE %d %d", &up, &down); n != 2 || err != nil || up < 0 || down < 0 {
			return fmt.Errorf("bad request %q", request)
		}
		if got, err := io.CopyN(ioutil.Discard, str, up); err != nil {
			return fmt.Errorf("request of %d bytes: %d read: %v", up, got, err)
		}
		if err := writeBytes(str, down); err != nil {
			return err
		}
	default:
		return fmt.Errorf("bad request %q", request)
	}
	return str.Close()
}

func readLine(r io.Reader) (string, error) {
	var line []byte
	b := make([]byte, 1)
	for len(line) < maxRequest {
		if _, err := io.ReadFull(r, b); err != nil {
			return "", fmt.Errorf("reading the request: %v", err)
		}
		if b[0] == '\n' {
			return string(line), nil
		}
		line = append(line, b[0])
	}
	return "", fmt.Errorf("request longer than %d bytes", maxRequest)
}

// payload: the bytes a download carries (a fixed pattern: the receiver counts them, QUIC's AEAD checks them).
var payload = func() []byte {
	b := make([]byte, 64*1024)
	for i := range b {
		b[i] = byte(i*131 + i/256)
	}
	return b
}()

func writeBytes(w io.Writer, n int64) error {
	for n > 0 {
		chunk := payload
		if int64(len(chunk)) > n {
			chunk = chunk[:n]
		}
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		n -= int64(len(chunk))
	}
	return nil
}
