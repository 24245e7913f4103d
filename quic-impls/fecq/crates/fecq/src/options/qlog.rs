//! qlog and the TLS key log (`--qlog-dir`, `--keylog-file`; issue 34), shared by both stacks.
//!
//! **qlog**: one JSON-SEQ file per connection, `DIR/<vantage>-<ODCID>.sqlog`, holding the stack's
//! own events (quinn-proto's and noq-proto's `qlog` feature: the stack's streamer writes its
//! records into a [`StackWriter`]) and fecq's events (`fecq:datagram_sent`: every QUIC datagram
//! sent, its length and whether it carries application data; the FEC events `fecq:repair_sent`,
//! `fecq:source_recovered`, `fecq:block_abandoned`, `fecq:recovery_signalled`; from the FEC
//! layer's [`FecEvent`]s, crate::socket) in the same file, on the same clock: both count
//! milliseconds from the connection log's `start`, which is given to the stack's streamer as its
//! reference. Records are whole when they reach the file (the stack's bytes are gathered up to
//! the end of each record first), so both writers interleave safely. The stack's header record
//! is completed where the stack leaves it vague (quinn-proto: vantage point `unknown`, no group
//! id): the endpoint's role and the connection's original destination connection id.
//!
//! Buffered ([`BufWriter`]); flushed when a connection ends, and by [`flush_all`] on the exit
//! paths (end of a client, a server's SIGTERM). Nothing of this exists without the options: no
//! file, no formatting, the layer records no events.
//!
//! **Key log**: NSS key log lines (`LABEL <client random> <secret>`, hex) of the TLS secrets QUIC
//! uses, appended to the file as they come (rustls `KeyLog`), for tshark/Wireshark.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::layer::{FecEvent, FecEventKind, Signal};
use crate::options::config::Capture;

/// RFC 7464's record separator, in front of every JSON-SEQ record.
const RS: u8 = 0x1e;

/// The qlog files of one endpoint (one socket): where they go, whose view they are.
pub struct Logs {
    dir: PathBuf,
    vantage: &'static str,
    multipath: bool,
    /// Connections logged, with the remote address they were opened for (None: every peer of
    /// this socket, a client's one connection).
    conns: Mutex<Vec<(Option<SocketAddr>, Arc<ConnLog>)>>,
    /// What the stack keeps to open a connection's log later (quinn's server: its config).
    pub stack: OnceLock<Box<dyn std::any::Any + Send + Sync>>,
}

impl std::fmt::Debug for Logs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logs")
            .field("dir", &self.dir)
            .field("vantage", &self.vantage)
            .finish_non_exhaustive()
    }
}

impl Logs {
    /// The logs of an endpoint (`server`: its role) when `--qlog-dir` is given; the directory is
    /// created.
    pub fn new(
        capture: &Capture,
        server: bool,
        multipath: bool,
    ) -> Result<Option<Arc<Self>>, String> {
        let Some(dir) = capture.qlog_dir.as_ref() else {
            return Ok(None);
        };
        std::fs::create_dir_all(dir).map_err(|e| format!("--qlog-dir {}: {e}", dir.display()))?;
        Ok(Some(Arc::new(Logs {
            dir: dir.clone(),
            vantage: if server { "server" } else { "client" },
            multipath,
            conns: Mutex::new(Vec::new()),
            stack: OnceLock::new(),
        })))
    }

    /// A new connection's log: `remote` (None: this socket's only connection), its original
    /// destination connection id if known now (else taken from the stack's first event).
    pub fn open(&self, remote: Option<SocketAddr>, odcid: Option<String>) -> Arc<ConnLog> {
        // The wall clock at `start`: the file's reference_time, so that traces of several endpoints
        // (a run's two ends, its competing flows) line up on one time axis.
        let epoch_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64() * 1e3);
        let log = Arc::new(ConnLog {
            start: Instant::now(),
            multipath: self.multipath,
            file: Mutex::new(LogFile {
                dir: self.dir.clone(),
                vantage: self.vantage,
                epoch_ms,
                odcid,
                out: None,
                header: None,
                pending: Vec::new(),
            }),
        });
        let mut conns = self.conns.lock().unwrap();
        conns.retain(|(_, c)| Arc::strong_count(c) > 1);
        conns.push((remote, log.clone()));
        open_logs().lock().unwrap().push(Arc::downgrade(&log));
        log
    }

    /// Write the layer's events into their connections' logs; `key` maps a remote address to its
    /// connection's group key (crate::layer). Events of a connection without a log are dropped.
    pub fn write(&self, events: &[FecEvent], key: impl Fn(SocketAddr) -> SocketAddr) {
        let conns = self.conns.lock().unwrap();
        for e in events {
            let log = conns
                .iter()
                .rev()
                .find(|(remote, _)| remote.is_none_or(|r| key(r) == e.group));
            if let Some((_, log)) = log {
                log.fec_event(e);
            }
        }
    }
}

/// The list of every log opened in this process, for [`flush_all`].
fn open_logs() -> &'static Mutex<Vec<Weak<ConnLog>>> {
    static OPEN: OnceLock<Mutex<Vec<Weak<ConnLog>>>> = OnceLock::new();
    OPEN.get_or_init(|| Mutex::new(Vec::new()))
}

/// Flush every qlog file still open (the exit paths: the process ends without running the
/// destructors of what its runtime's tasks hold).
pub fn flush_all() {
    let mut open = open_logs().lock().unwrap();
    open.retain(|log| match log.upgrade() {
        Some(log) => {
            log.flush();
            true
        }
        None => false,
    });
}

/// One connection's qlog file.
pub struct ConnLog {
    /// The reference of every time in the file (the stack's streamer gets it too).
    pub start: Instant,
    multipath: bool,
    file: Mutex<LogFile>,
}

struct LogFile {
    dir: PathBuf,
    vantage: &'static str,
    /// Milliseconds since the Unix epoch at the connection log's `start`.
    epoch_ms: f64,
    odcid: Option<String>,
    out: Option<BufWriter<File>>,
    /// The stack's header record, until the file is opened.
    header: Option<Value>,
    /// Records waiting for the file to be opened.
    pending: Vec<u8>,
}

impl ConnLog {
    /// The writer to give the stack's qlog streamer; `rtt_in_seconds`: the stack writes the RTTs
    /// of its metrics updates in seconds (quinn-proto 0.11.19 does, where qlog says
    /// milliseconds), turned into milliseconds here.
    pub fn stack_writer(self: &Arc<Self>, rtt_in_seconds: bool) -> Box<dyn Write + Send + Sync> {
        Box::new(StackWriter {
            log: self.clone(),
            rtt_in_seconds,
            partial: Vec::new(),
        })
    }

    /// Milliseconds from `start` to `t`.
    fn ms(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.start).as_secs_f64() * 1e3
    }

    fn fec_event(&self, e: &FecEvent) {
        let path = self.multipath.then_some(e.path);
        let (name, mut data) = match &e.kind {
            FecEventKind::RepairSent {
                block,
                symbol,
                bytes,
            } => (
                "fecq:repair_sent",
                json!({"block": block, "symbol": symbol, "length": bytes}),
            ),
            FecEventKind::DatagramSent { bytes, app_data } => (
                "fecq:datagram_sent",
                json!({"length": bytes, "app_data": app_data}),
            ),
            FecEventKind::TransferOver => ("fecq:transfer_over", json!({})),
            FecEventKind::SourceRecovered { block, symbol } => (
                "fecq:source_recovered",
                json!({"block": block, "symbol": symbol}),
            ),
            FecEventKind::BlockAbandoned { block, symbols } => (
                "fecq:block_abandoned",
                json!({"block": block, "symbols": symbols}),
            ),
            FecEventKind::RecoverySignalled { symbol, trigger } => (
                "fecq:recovery_signalled",
                json!({"symbol": symbol, "trigger": match trigger {
                    Signal::Ce => "ce",
                    Signal::Hide => "hide",
                }}),
            ),
        };
        if let (Some(p), Some(map)) = (path, data.as_object_mut()) {
            map.insert("path_id".into(), json!(p));
        }
        let event =
            json!({"time": (self.ms(e.time) * 1e3).round() / 1e3, "name": name, "data": data});
        let mut record = vec![RS];
        if serde_json::to_writer(&mut record, &event).is_ok() {
            record.push(b'\n');
            self.file.lock().unwrap().record(&record, false);
        }
    }

    /// Write what is buffered to the file (opening it if nothing named it yet).
    pub fn flush(&self) {
        let mut f = self.file.lock().unwrap();
        if f.out.is_none() && (f.header.is_some() || !f.pending.is_empty()) {
            f.open();
        }
        if let Some(out) = f.out.as_mut() {
            let _ = out.flush();
        }
    }
}

impl LogFile {
    /// One whole record (RS … newline); `stack`: the stack's (its first one is the header).
    fn record(&mut self, record: &[u8], stack: bool) {
        if stack && self.header.is_none() && self.out.is_none() {
            let text = record.strip_prefix(&[RS]).unwrap_or(record);
            if let Ok(header) = serde_json::from_slice::<Value>(text) {
                if header.get("trace").is_some() {
                    self.header = Some(header);
                    if self.odcid.is_some() {
                        self.open();
                    }
                    return;
                }
            }
        }
        if self.out.is_none() {
            if stack && self.odcid.is_none() {
                // quinn-proto's events carry the connection's group id: its client's ODCID.
                let text = record.strip_prefix(&[RS]).unwrap_or(record);
                self.odcid = serde_json::from_slice::<Value>(text)
                    .ok()
                    .and_then(|v| v.get("group_id")?.as_str().map(str::to_string));
            }
            if self.odcid.is_none() {
                self.pending.extend_from_slice(record);
                return;
            }
            self.open();
        }
        if let Some(out) = self.out.as_mut() {
            let _ = out.write_all(record);
        }
    }

    /// Create the file, write the header (completed) and what waited.
    fn open(&mut self) {
        static UNNAMED: AtomicU64 = AtomicU64::new(0);
        let id = self.odcid.clone().unwrap_or_else(|| {
            format!(
                "pid{}-{}",
                std::process::id(),
                UNNAMED.fetch_add(1, Ordering::Relaxed)
            )
        });
        let path = self.dir.join(format!("{}-{id}.sqlog", self.vantage));
        let file = match File::create(&path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("fecq: qlog {}: {e}", path.display());
                self.pending.clear();
                self.header = None;
                return;
            }
        };
        let mut out = BufWriter::with_capacity(64 << 10, file);
        let header = complete_header(
            self.header.take(),
            self.vantage,
            self.odcid.as_deref(),
            self.epoch_ms,
        );
        let mut record = vec![RS];
        let _ = serde_json::to_writer(&mut record, &header);
        record.push(b'\n');
        let _ = out.write_all(&record);
        let _ = out.write_all(&std::mem::take(&mut self.pending));
        self.out = Some(out);
    }
}

/// The stack's header record with what it left out: the vantage point's type, the group id
/// (the connection's ODCID), the reference time (wall clock at the log's start, ms since the
/// epoch: qlog 0.3's `reference_time`, times relative to it), fecq's event namespace; a header
/// of its own when the stack wrote none.
fn complete_header(
    header: Option<Value>,
    vantage: &str,
    odcid: Option<&str>,
    epoch_ms: f64,
) -> Value {
    let mut header = header.unwrap_or_else(|| {
        json!({"qlog_version": "0.3", "qlog_format": "JSON-SEQ",
               "trace": {"configuration": {"time_offset": 0.0}}})
    });
    let Some(trace) = header.get_mut("trace").and_then(Value::as_object_mut) else {
        return header;
    };
    let point = trace
        .entry("vantage_point")
        .or_insert_with(|| json!({}))
        .as_object_mut();
    if let Some(point) = point {
        let known = point
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t != "unknown");
        if !known {
            point.insert("type".into(), json!(vantage));
        }
        point.entry("name").or_insert_with(|| json!("fecq"));
    }
    if let Some(common) = trace
        .entry("common_fields")
        .or_insert_with(|| json!({}))
        .as_object_mut()
    {
        if let Some(odcid) = odcid {
            common.entry("group_id").or_insert_with(|| json!(odcid));
            common.entry("ODCID").or_insert_with(|| json!(odcid));
        }
        common
            .entry("reference_time")
            .or_insert_with(|| json!(epoch_ms));
        common
            .entry("time_format")
            .or_insert_with(|| json!("relative"));
    }
    trace.entry("title").or_insert_with(|| json!("fecq"));
    header
}

/// What the stack's qlog streamer writes into (a token at a time: serde_json's writer): its bytes
/// are gathered here, and passed on record by record.
struct StackWriter {
    log: Arc<ConnLog>,
    rtt_in_seconds: bool,
    /// The stack's bytes since the end of its last record.
    partial: Vec<u8>,
}

/// The RTT fields of a metrics update.
const RTT_FIELDS: [&str; 4] = ["min_rtt", "smoothed_rtt", "latest_rtt", "rtt_variance"];

/// A metrics update whose RTTs are in seconds, with them in milliseconds (None: any other record,
/// kept as is).
fn rtt_to_ms(record: &[u8]) -> Option<Vec<u8>> {
    let text = record.strip_prefix(&[RS]).unwrap_or(record);
    let is_metrics = text.windows(15).any(|w| w == b"metrics_updated")
        && text.windows(5).any(|w| w == b"_rtt\"");
    if !is_metrics {
        return None;
    }
    let mut event = serde_json::from_slice::<Value>(text).ok()?;
    let data = event.get_mut("data").and_then(Value::as_object_mut)?;
    for field in RTT_FIELDS {
        if let Some(s) = data.get(field).and_then(Value::as_f64) {
            data.insert(field.into(), json!((s * 1e6).round() / 1e3));
        }
    }
    let mut out = vec![RS];
    serde_json::to_writer(&mut out, &event).ok()?;
    out.push(b'\n');
    Some(out)
}

impl Write for StackWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // A record ends with a newline (JSON strings escape theirs).
        let Some(end) = buf.iter().rposition(|&b| b == b'\n') else {
            self.partial.extend_from_slice(buf);
            return Ok(buf.len());
        };
        self.partial.extend_from_slice(&buf[..=end]);
        let mut f = self.log.file.lock().unwrap();
        for record in self.partial.split_inclusive(|&b| b == b'\n') {
            match self.rtt_in_seconds.then(|| rtt_to_ms(record)).flatten() {
                Some(converted) => f.record(&converted, true),
                None => f.record(record, true),
            }
        }
        drop(f);
        self.partial.clear();
        self.partial.extend_from_slice(&buf[end + 1..]);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.log.file.lock().unwrap().out.as_mut() {
            Some(out) => out.flush(),
            None => Ok(()),
        }
    }
}

/// The TLS key log (`--keylog-file`): NSS key log lines, appended as the secrets come.
#[derive(Debug)]
pub struct KeyLogFile(Mutex<File>);

impl KeyLogFile {
    /// The key log of `capture`, if asked for (the file is created, or appended to).
    pub fn open(capture: &Capture) -> Result<Option<Arc<Self>>, String> {
        let Some(path) = capture.keylog_file.as_ref() else {
            return Ok(None);
        };
        Ok(Some(Arc::new(KeyLogFile(Mutex::new(append(path)?)))))
    }
}

fn append(path: &Path) -> Result<File, String> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("--keylog-file {}: {e}", path.display()))
}

/// The labels a QUIC capture needs (Wireshark's QUIC dissector); rustls also logs the exporter
/// secret, which decrypts nothing.
const KEY_LABELS: [&str; 5] = [
    "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
    "SERVER_HANDSHAKE_TRAFFIC_SECRET",
    "CLIENT_TRAFFIC_SECRET_0",
    "SERVER_TRAFFIC_SECRET_0",
    "CLIENT_EARLY_TRAFFIC_SECRET",
];

impl rustls::KeyLog for KeyLogFile {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        if !KEY_LABELS.contains(&label) {
            return;
        }
        let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
        let line = format!("{label} {} {}\n", hex(client_random), hex(secret));
        // One write per line (append mode): whole lines even with both ends in one file.
        let _ = self.0.lock().unwrap().write_all(line.as_bytes());
    }

    fn will_log(&self, label: &str) -> bool {
        KEY_LABELS.contains(&label)
    }
}
