//! Options shared by every role and both stacks (`Common`), and what follows from them.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use fec_core::Scheme;

use crate::layer::{Protect, Signal};
use crate::options::cc::{self, CcAlgo, RepairCc, ScaledFactory};
use crate::options::tail::TailArgs;

/// What an endpoint writes to explain itself (crate::options::qlog): nothing unless asked.
#[derive(Args, Clone, Debug, Default)]
pub struct Capture {
    /// Write one qlog file per connection (JSON-SEQ, `<server|client>-<ODCID>.sqlog`) into this
    /// directory (created if missing): the stack's events and fecq's FEC events (`fecq:*`)
    #[arg(long, value_name = "DIR")]
    pub qlog_dir: Option<PathBuf>,
    /// Append the TLS secrets to this file in the NSS key log format (decrypts a packet capture
    /// in tshark/Wireshark)
    #[arg(long, value_name = "FILE")]
    pub keylog_file: Option<PathBuf>,
}

/// What `--ack-eliciting-threshold` and `--max-ack-delay` ask of the peer.
#[derive(Clone, Copy, Debug)]
pub struct AckRequest {
    pub threshold: u32,
    pub max_delay: Option<Duration>,
    pub reordering: u32,
}

#[derive(Args, Clone, Debug)]
pub struct Common {
    /// FEC scheme: none | xor:K[:I] | rs:N,K | rlc:N,K,W (both ends must agree)
    #[arg(long, default_value = "none")]
    pub fec: Scheme,
    /// Which QUIC packets FEC protects: stream (those carrying application data, STREAM or
    /// DATAGRAM frames: the 2019 paper's FEC protected stream data only) | all (every packet:
    /// handshake, ACK-only and control packets too)
    #[arg(long, default_value = "stream")]
    pub fec_protect: Protect,
    /// How recovered datagrams are shown to congestion control: ce (ECN-CE marked) | hide
    #[arg(long, default_value = "ce")]
    pub signal: Signal,
    /// Congestion control: cubic | newreno | bbr | none (no window and no pacing: the sender
    /// sends at the application's rate, as the thesis's real-time runs did)
    #[arg(long, default_value = "cubic")]
    pub cc: CcAlgo,
    /// Whether FEC repairs count against the congestion window: counted (the window is scaled by
    /// 1 / (1 + repair ratio)) | free (repairs on top of the window); no effect with --cc none
    #[arg(long, default_value = "counted")]
    pub repair_cc: RepairCc,
    /// Packet reordering threshold before a loss is declared (quinn default 3)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub reorder_packets: u32,
    /// Time reordering threshold, in RTTs (quinn default 1.125)
    #[arg(long, default_value_t = 1.125)]
    pub reorder_time: f32,
    /// ACK frequency asked of the peer (draft-ietf-quic-ack-frequency; quinn and noq both speak
    /// it): ack-eliciting packets it may receive before it must acknowledge; 0 = every packet.
    /// Default: no request, RFC 9000's behaviour (an ACK every other ack-eliciting packet)
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub ack_eliciting_threshold: Option<u32>,
    /// Longest time in milliseconds the peer may hold back an ACK (asked through the same
    /// extension; the peer clamps it to at most max(RTT, 25 ms)). Default: the peer's own, 25 ms
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub max_ack_delay: Option<u64>,
    /// UDP receive buffer size in bytes
    #[arg(long, default_value_t = 8 << 20)]
    pub rcvbuf: usize,
    /// UDP send buffer size in bytes
    #[arg(long, default_value_t = 8 << 20)]
    pub sndbuf: usize,
    /// Give up after this many seconds (client, loopback): write the metrics so far (`timed_out`,
    /// `bytes_app`, `elapsed_ms`) and exit with status 124
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
    /// Least idle time in milliseconds before a partial FEC block is flushed; the flush waits
    /// max(this, 4 × the peer's smoothed inter-send gap)
    #[arg(long, default_value_t = 10)]
    pub flush_ms: u64,
    /// QUIC idle timeout in seconds: a connection that receives nothing for this long (or 3
    /// probe timeouts, if longer) is closed silently; the lower of both ends' values applies
    #[arg(long, default_value_t = 30.0)]
    pub idle_timeout: f64,
    /// Send a PING after this many seconds without sending (0: off; single path, `--path-keepalive`
    /// with --multipath). Why on by default: the emulated loss models advance per packet, so when
    /// the application goes quiet (a messages run's end, between exchanges) a bad-state burst of
    /// N packets would otherwise last N exponentially backed-off probes, i.e. past the idle timeout
    #[arg(long, default_value_t = 0.2)]
    pub keepalive: f64,
    /// Initial congestion window in packets of 1200 bytes (default: the controller's, RFC 9002's
    /// 10 packets); a replicated paper's stack may have used another (quic-go of 2018: 32)
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..=100_000))]
    pub initial_window: Option<u64>,
    /// Largest congestion window in packets of 1200 bytes (default: none; quic-go of 2018: 107)
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..=1_000_000))]
    pub max_window: Option<u64>,
    /// TEST ONLY, never in a measurement: sleep this many microseconds before each datagram this
    /// endpoint's stack sends (0, the default: off). A deliberately slowed build for fecbench's CI
    /// recipe test (ci-recipes/README.md), which its compare must catch
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub test_send_delay_us: u64,
    /// TEST ONLY, never in a measurement: drop every repair datagram this endpoint receives,
    /// unread (the sender still sends them): a build whose FEC stopped recovering, for fecbench's
    /// A/B test (ci-recipes/fecbench-ci-ab), which its compare must catch
    #[arg(long)]
    pub test_ignore_repairs: bool,
    /// TEST ONLY, never in a measurement: sleep this many microseconds per datagram this
    /// endpoint's FEC layer rebuilds (0, the default: off): a build whose recovery got slower, so
    /// only runs with a loss slow down, for fecbench's measured false alarms and detections of its
    /// CI recipe (ci-recipes/README.md)
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub test_recovery_delay_us: u64,
    /// Tail FEC options (--fec-mode, --tail-max): crate::options::tail.
    #[command(flatten)]
    pub tail: TailArgs,
    /// qlog and key log (--qlog-dir, --keylog-file): crate::options::qlog.
    #[command(flatten)]
    pub capture: Capture,
}

impl Common {
    pub fn check(&self) -> Result<(), String> {
        if !(self.reorder_time >= 1.0 && self.reorder_time <= 100.0) {
            return Err(format!(
                "--reorder-time {} must be in 1..=100",
                self.reorder_time
            ));
        }
        if !(self.timeout > 0.0 && self.timeout.is_finite()) {
            return Err(format!("--timeout {} must be > 0", self.timeout));
        }
        if !(self.idle_timeout >= 0.001 && self.idle_timeout <= 86_400.0) {
            return Err(format!(
                "--idle-timeout {} must be in [0.001, 86400] seconds",
                self.idle_timeout
            ));
        }
        if !(self.keepalive == 0.0
            || (self.keepalive >= 0.001 && self.keepalive < self.idle_timeout))
        {
            return Err(format!(
                "--keepalive {} must be 0 (off) or in [0.001, --idle-timeout) seconds",
                self.keepalive
            ));
        }
        if self.rcvbuf < 4096 || self.sndbuf < 4096 {
            return Err("--rcvbuf and --sndbuf must be at least 4096".to_string());
        }
        if let (Some(initial), Some(max)) = (self.initial_window, self.max_window) {
            if initial > max {
                return Err(format!(
                    "--initial-window {initial} is above --max-window {max} (packets)"
                ));
            }
        }
        self.tail.check(self.fec)?;
        if self
            .capture
            .qlog_dir
            .as_ref()
            .is_some_and(|d| d.as_os_str().is_empty())
        {
            return Err("--qlog-dir must name a directory".to_string());
        }
        if self
            .capture
            .keylog_file
            .as_ref()
            .is_some_and(|f| f.as_os_str().is_empty())
        {
            return Err("--keylog-file must name a file".to_string());
        }
        Ok(())
    }

    /// The ACK frequency to ask of the peer, when an option asks for one.
    pub fn ack_request(&self) -> Option<AckRequest> {
        if self.ack_eliciting_threshold.is_none() && self.max_ack_delay.is_none() {
            return None;
        }
        Some(AckRequest {
            // 1 is what an endpoint does without the extension (RFC 9000 §13.2.2).
            threshold: self.ack_eliciting_threshold.unwrap_or(1),
            max_delay: self.max_ack_delay.map(Duration::from_millis),
            // The extension's recommendation: one below the loss-detection packet threshold.
            reordering: self.reorder_packets.saturating_sub(1),
        })
    }

    pub fn window_limits(&self) -> cc::WindowLimits {
        cc::WindowLimits {
            initial: self.initial_window,
            max: self.max_window,
        }
    }

    /// Fraction of the congestion window left to QUIC packets (crate::options::cc::window_scale).
    pub fn window_scale(&self) -> f64 {
        if !self.tail.scales_window() {
            return 1.0;
        }
        cc::window_scale(self.cc, self.repair_cc, self.fec.repair_ratio())
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout)
    }

    /// The congestion controller every stack builds (crate::options::cc, the stack's glue).
    pub fn controller(&self) -> ScaledFactory {
        ScaledFactory {
            algo: self.cc,
            scale: self.window_scale(),
            limits: self.window_limits(),
            ce_episodes: self.fec != Scheme::None && self.signal == Signal::Ce,
        }
    }

    /// The least idle time after which a partial FEC block is flushed (crate::layer::flush).
    pub fn flush_after(&self) -> Duration {
        Duration::from_millis(self.flush_ms.max(1))
    }

    /// QUIC's idle timeout, in milliseconds.
    pub fn idle_timeout_ms(&self) -> u32 {
        (self.idle_timeout * 1e3).round() as u32
    }

    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.idle_timeout)
    }

    /// The single-path keep-alive: a PING after this long without sending (None: off).
    pub fn keepalive_interval(&self) -> Option<Duration> {
        (self.keepalive > 0.0).then(|| Duration::from_secs_f64(self.keepalive))
    }
}
