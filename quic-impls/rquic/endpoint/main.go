// Command rquic-fecbench: a download server and client for fecbench, built on rQUIC (Zverev et al.,
// IEEE Access 2021: pgOrtiz90's quic-go fork with a coding layer below QUIC). The coding itself is
// rQUIC's: this program only sets its configuration (rquic.Conf, written as rQUIC's own JSON and read
// back with rquic.ReadConfFromJson) and reports what happened in fecbench's metrics format
// (quic-impls/rquic/README.md).
//
//	rquic-fecbench server --listen ADDR:PORT --conf FILE [coding options] [--qlog-dir DIR] [--keylog-file FILE]
//	rquic-fecbench client --server ADDR:PORT --size BYTES --out FILE --timeout S --conf FILE [coding options] [...]
//	rquic-fecbench client --server ADDR:PORT --workload page --page FILE --out FILE ... (a page load: page.go)
//	rquic-fecbench check-args server|client [options]   (exit 0: accepted; 2: refused, naming the value)
//	rquic-fecbench --version
//
// Exit status: 0 done, 1 failed, 2 bad arguments, 124 the client gave up at --timeout, 127 unsupported
// (a workload other than download and page).
package main

import (
	"flag"
	"fmt"
	"io/ioutil"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lucas-clemente/quic-go/rquic"
)

// version is set by build.sh (-ldflags -X main.version=...): rQUIC's commit and the inputs' hashes.
var version = "unknown"

const (
	exitFailed      = 1
	exitUsage       = 2
	exitTimeout     = 124
	exitUnsupported = 127
	alpn            = "fecbench-rquic"
)

// options: everything either side accepts. Coding options must be the same on both sides (fecbench
// passes them to both): the data sender encodes and the receiver decodes with them.
type options struct {
	role       string
	listen     string
	server     string
	workload   string
	size       int64
	page       string
	pageGraph  *pageGraph
	out        string
	timeoutS   float64
	conf       string
	fec        string
	ratio      float64
	dynamic    string
	reduns     int
	overlap    int
	tperiodMS  int
	tperiodRTT float64
	btoMS      float64
	btoRTT     float64
	periods    int
	gamma      float64
	delta      float64
	qlogDir    string
	keylogFile string
}

func usageError(format string, a ...interface{}) error {
	return fmt.Errorf(format, a...)
}

func parse(role string, args []string) (*options, error) {
	o := &options{role: role}
	fs := flag.NewFlagSet("rquic-fecbench "+role, flag.ContinueOnError)
	fs.SetOutput(ioutil.Discard)
	fs.StringVar(&o.listen, "listen", "", "server: ADDR:PORT to listen on (UDP)")
	fs.StringVar(&o.server, "server", "", "client: the server's ADDR:PORT")
	fs.StringVar(&o.workload, "workload", "download", "download or page")
	fs.StringVar(&o.page, "page", "", "client, page workload: the page graph (fecbench-page-1 JSON)")
	fs.Int64Var(&o.size, "size", -1, "client: bytes to download")
	fs.StringVar(&o.out, "out", "", "client: where to write the metrics JSON")
	fs.Float64Var(&o.timeoutS, "timeout", 60, "seconds: the client gives up then (exit 124); both: handshake and idle timeouts")
	fs.StringVar(&o.conf, "conf", "", "where this side's rQUIC configuration (rQUIC's JSON) is written, then read back")
	fs.StringVar(&o.fec, "fec", "none", "none, xor (SchemeXor) or rlc (SchemeRlcSys)")
	fs.Float64Var(&o.ratio, "ratio", rquic.DefaultRatioVal, "initial code ratio Q: source packets per coded packet (2-63)")
	fs.StringVar(&o.dynamic, "dynamic", "on", "on: Q adapts to the residual loss (rQUIC's Algorithm 1); off: Q stays")
	fs.IntVar(&o.reduns, "reduns", rquic.DefaultReduns, "coded packets per generation (r)")
	fs.IntVar(&o.overlap, "overlap", rquic.DefaultOverlap, "overlapping generations (phi)")
	fs.IntVar(&o.tperiodMS, "tperiod-ms", int(rquic.DefaultTPeriod/time.Millisecond), "residual-loss measurement period T in ms")
	fs.Float64Var(&o.tperiodRTT, "tperiod-rtts", 0, "T in smoothed RTTs (the paper's T = 3 RTT; fecbench.patch); 0: --tperiod-ms")
	fs.Float64Var(&o.btoMS, "bto-ms", 0, "the decoder's buffer timeout (BTO) in ms (fecbench.patch); 0: rQUIC's max_ack_delay - 1 ms")
	fs.Float64Var(&o.btoRTT, "bto-rtts", 0, "BTO in smoothed RTTs (Figs. 12, 13: BTO = RTT; fecbench.patch); 0: --bto-ms")
	fs.IntVar(&o.periods, "periods", rquic.DefaultNumPeriods, "periods averaged (N)")
	fs.Float64Var(&o.gamma, "gamma", rquic.DefaultGammaTarget, "residual-loss target (gamma)")
	fs.Float64Var(&o.delta, "delta", rquic.DefaultDeltaRatio, "ratio change per period (delta)")
	fs.StringVar(&o.qlogDir, "qlog-dir", "", "write a qlog per connection (and rQUIC's trace) into this folder")
	fs.StringVar(&o.keylogFile, "keylog-file", "", "append the TLS secrets (NSS key log format) to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usageError("unexpected argument %q", fs.Arg(0))
	}
	return o, o.check()
}

// checkWorkload: a download's size, a page's graph (read here: a bad one is a usage error).
func (o *options) checkWorkload() error {
	switch o.workload {
	case "download":
		if o.size < 0 {
			return usageError("--size BYTES is required (>= 0)")
		}
	case "page":
		if o.page == "" {
			return usageError("--page FILE is required with --workload page")
		}
		g, err := readPage(o.page)
		if err != nil {
			return usageError("--page %s: %v", o.page, err)
		}
		o.pageGraph = g
	}
	return nil
}

// check refuses values rQUIC would not use as asked (it would clamp or ignore them silently).
func (o *options) check() error {
	switch o.role {
	case "server":
		if o.listen == "" {
			return usageError("--listen ADDR:PORT is required")
		}
	case "client":
		if o.server == "" {
			return usageError("--server ADDR:PORT is required")
		}
		if err := o.checkWorkload(); err != nil {
			return err
		}
		if o.out == "" {
			return usageError("--out FILE is required")
		}
	}
	if !(o.timeoutS > 0) {
		return usageError("--timeout must be a number of seconds > 0: %v", o.timeoutS)
	}
	if _, ok := schemes[o.fec]; !ok && o.fec != "none" {
		return usageError("--fec must be none, xor or rlc: %q", o.fec)
	}
	if o.ratio < rquic.MinRatio || o.ratio > rquic.MaxRatio {
		return usageError("--ratio must be in [%g, %g] (rQUIC's MinRatio, MaxRatio): %g", rquic.MinRatio, rquic.MaxRatio, o.ratio)
	}
	if o.dynamic != "on" && o.dynamic != "off" {
		return usageError("--dynamic must be on or off: %q", o.dynamic)
	}
	if o.reduns < 1 || o.reduns > 8 {
		return usageError("--reduns must be in 1..8: %d", o.reduns)
	}
	if o.overlap < 1 || o.overlap > 8 {
		return usageError("--overlap must be in 1..8: %d", o.overlap)
	}
	if o.fec == "xor" && o.reduns != 1 {
		// rQUIC's XOR builder sends r identical copies of its one coded packet.
		return usageError("--reduns must be 1 with --fec xor (XOR has one coded packet per generation): %d", o.reduns)
	}
	if o.tperiodMS < 1 || o.tperiodMS > 600000 {
		return usageError("--tperiod-ms must be in 1..600000: %d", o.tperiodMS)
	}
	if o.tperiodRTT < 0 || o.tperiodRTT > 100 {
		return usageError("--tperiod-rtts must be in [0, 100] (0: --tperiod-ms): %g", o.tperiodRTT)
	}
	if !(o.btoMS >= 0 && o.btoMS <= 600000) {
		return usageError("--bto-ms must be in [0, 600000] (0: rQUIC's rule, max_ack_delay - 1 ms): %g", o.btoMS)
	}
	if !(o.btoRTT >= 0 && o.btoRTT <= 100) {
		return usageError("--bto-rtts must be in [0, 100] (0: --bto-ms): %g", o.btoRTT)
	}
	if o.btoMS > 0 && o.btoRTT > 0 {
		return usageError("--bto-ms and --bto-rtts set the same timeout: give one (%g ms, %g RTTs)", o.btoMS, o.btoRTT)
	}
	if o.periods < 1 || o.periods > 100 {
		return usageError("--periods must be in 1..100: %d", o.periods)
	}
	if !(o.gamma > 0 && o.gamma < 1) {
		return usageError("--gamma must be in (0, 1): %g", o.gamma)
	}
	if !(o.delta > 0 && o.delta < 1) {
		return usageError("--delta must be in (0, 1): %g", o.delta)
	}
	return nil
}

var schemes = map[string]string{"xor": "SchemeXor", "rlc": "SchemeRlcSys"}

// rquicConf writes this side's configuration as rQUIC's JSON (its bulk programs' format) to --conf, or
// to a temporary file, and reads it back with rQUIC's own reader. A download's server encodes and its
// client decodes (the paper's bulk set-up: the client's conf is the server's complement); without FEC
// neither does, and QUIC runs as quic-go of the fork, without rQUIC headers.
func (o *options) rquicConf() (*rquic.Conf, error) {
	cj := &rquic.ConfJson{}
	if o.fec != "none" {
		cj.CConfJson = &rquic.CConfJson{
			Scheme:      schemes[o.fec],
			Overlap:     float64(o.overlap),
			Reduns:      float64(o.reduns),
			RatioVal:    o.ratio,
			Dynamic:     map[string]float64{"on": 1, "off": -1}[o.dynamic],
			TPeriodMS:   float64(o.tperiodMS),
			NumPeriods:  float64(o.periods),
			GammaTarget: o.gamma,
			DeltaRatio:  o.delta,
		}
		if o.role == "server" {
			cj.EnableEncoder = true
		} else {
			cj.EnableDecoder = true
		}
	}
	path := o.conf
	if path == "" {
		f, err := ioutil.TempFile("", "rquic-conf-*.json")
		if err != nil {
			return nil, err
		}
		path = f.Name()
		f.Close()
		defer os.Remove(path)
	}
	if o.role == "client" && cj.EnableDecoder {
		// WriteJson keeps only the flags of a side that does not encode: a decoder needs no coding conf.
		cj.CConfJson = nil
	}
	if err := cj.WriteJson(path); err != nil {
		return nil, err
	}
	conf, err := rquic.ReadConfFromJson(path)
	if err != nil {
		return nil, err
	}
	conf.Populate()
	return conf, nil
}

func (o *options) timeout() time.Duration {
	return time.Duration(o.timeoutS * float64(time.Second))
}

func (o *options) describe() string {
	if o.fec == "none" {
		return "none"
	}
	period := fmt.Sprintf("%d ms", o.tperiodMS)
	if o.tperiodRTT > 0 {
		period = fmt.Sprintf("%g RTT (%d ms before an RTT sample)", o.tperiodRTT, o.tperiodMS)
	}
	bto := "max_ack_delay - 1 ms"
	if o.btoMS > 0 {
		bto = fmt.Sprintf("%g ms", o.btoMS)
	}
	if o.btoRTT > 0 {
		bto = fmt.Sprintf("%g RTT (max_ack_delay - 1 ms before an RTT sample)", o.btoRTT)
	}
	return fmt.Sprintf("%s ratio %s dynamic %s r %d overlap %d T %s N %d gamma %g delta %g BTO %s", o.fec,
		strconv.FormatFloat(o.ratio, 'g', -1, 64), o.dynamic, o.reduns, o.overlap, period, o.periods, o.gamma, o.delta,
		bto)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: rquic-fecbench server|client|check-args|--version [options]")
		os.Exit(exitUsage)
	}
	switch cmd := os.Args[1]; cmd {
	case "--version", "version":
		fmt.Println("rquic-fecbench " + version)
	case "server", "client":
		o, err := parse(cmd, os.Args[2:])
		if err != nil {
			fmt.Fprintf(os.Stderr, "rquic-fecbench %s: %v\n", cmd, err)
			os.Exit(exitUsage)
		}
		if o.workload != "download" && o.workload != "page" {
			fmt.Fprintf(os.Stderr, "rquic-fecbench %s: workload %q is not supported (download, page)\n", cmd, o.workload)
			os.Exit(exitUnsupported)
		}
		if cmd == "server" {
			os.Exit(runServer(o))
		}
		os.Exit(runClient(o))
	case "check-args":
		if len(os.Args) < 3 || (os.Args[2] != "server" && os.Args[2] != "client") {
			fmt.Fprintln(os.Stderr, "usage: rquic-fecbench check-args server|client [options]")
			os.Exit(exitUsage)
		}
		// The addresses, size and output the harness fills in at run time may be absent here.
		args := append([]string{"--listen", "192.0.2.1:1", "--server", "192.0.2.1:1", "--size", "0", "--out", "-"},
			os.Args[3:]...)
		o, err := parse(os.Args[2], args)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rquic-fecbench %s: %v\n", os.Args[2], err)
			os.Exit(exitUsage)
		}
		fmt.Printf("arguments ok: %s fec %s\n", o.role, o.describe())
	default:
		fmt.Fprintf(os.Stderr, "rquic-fecbench: unknown command %q (server, client, check-args, --version)\n",
			strings.TrimSpace(cmd))
		os.Exit(exitUsage)
	}
}
