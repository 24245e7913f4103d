//! The `fecq` command line. Exit status: 0 success, 1 failure (incomplete transfer, I/O error),
//! 2 usage (a bad option or value), 124 the client gave up at its `--timeout` (as timeout(1);
//! its metrics file says what arrived until then), 127 unsupported combination.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};

use crate::app::messages::{self, Mode};
use crate::app::page;
use crate::app::transfer::ReqResp;
use crate::app::{self, Workload};
use crate::link::loss::LossModel;
use crate::loopback::{self, LossSpec};
use crate::noq_stack::Noq;
use crate::options::config::Common;
use crate::options::metrics::{ms, Metrics};
use crate::options::multipath::MpArgs;
use crate::quic::QuicEndpoint;
use crate::quinn_stack::Quinn;
use crate::run::{self, ClientSetup};
use crate::stack::Stack;
use crate::stop::{Stop, STOPPED_PREFIX};

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_TIMEOUT: i32 = 124;
pub const EXIT_UNSUPPORTED: i32 = 127;
/// Stopped by SIGTERM or SIGINT, as a shell reports a process ended by SIGTERM (128 + 15).
pub const EXIT_STOPPED: i32 = 143;

#[derive(Parser, Debug)]
#[command(
    name = "fecq",
    version,
    about = "FEC-enabled QUIC endpoints (quinn over a FEC socket layer)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve downloads, uploads, exchanges and message streams until SIGTERM/SIGINT
    Server {
        /// Address to listen on, e.g. 10.0.1.2:4433 (with --multipath: the wildcard address at
        /// this port, so that every per-path server address reaches it)
        #[arg(long)]
        listen: SocketAddr,
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        mp: MpArgs,
    },
    /// Run one workload against a server and write its metrics
    Client {
        #[arg(long)]
        server: SocketAddr,
        /// Local address to bind (default: any address of the server's family, any port)
        #[arg(long)]
        bind: Option<SocketAddr>,
        #[command(flatten)]
        workload: WorkloadArgs,
        /// Metrics JSON file to write
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        mp: MpArgs,
    },
    /// Server and client in one process over loopback, with seeded in-process loss
    Loopback {
        #[command(flatten)]
        workload: WorkloadArgs,
        /// Loss probability of each datagram, in [0, 1)
        #[arg(long, default_value_t = 0.0)]
        loss: f64,
        /// uniform | burst (Gilbert: bursts of mean length --burst-len)
        #[arg(long, default_value = "uniform")]
        loss_model: LossModel,
        #[arg(long, default_value_t = 3.0)]
        burst_len: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Limit each direction's send rate to this many Mbit/s (a queue of 200 ms, tail drop)
        #[arg(long)]
        rate_mbit: Option<f64>,
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        common: Common,
        /// With --multipath, --local-addresses 127.0.0.1,127.0.0.2,… gives one path per address
        #[command(flatten)]
        mp: MpArgs,
    },
    /// Check options without running anything: ARGS are parsed and checked as `fecq server` or
    /// `fecq client` would (the role's own --listen/--server/--out filled in); exit 0, else 2
    /// (127: an unsupported combination) with a message naming the rejected value
    CheckArgs {
        /// server | client
        role: String,
        /// The options to check, as the role would get them
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Measure the codes, the FEC layer and loopback downloads
    Bench {
        /// Print the figures as JSON
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug, Clone)]
struct WorkloadArgs {
    /// download | upload | reqresp | messages | page
    #[arg(long, default_value = "download")]
    workload: String,
    /// page: the page graph (fecbench-page-1 JSON, written by the harness; app/page.rs)
    #[arg(long)]
    page: Option<String>,
    /// Bytes to download or upload
    #[arg(long)]
    size: Option<u64>,
    /// reqresp: sequential request/response exchanges on one connection
    #[arg(long, default_value_t = 10)]
    exchanges: u32,
    /// reqresp: bytes of each request (client -> server)
    #[arg(long)]
    request: Option<u64>,
    /// reqresp: bytes of each response (server -> client)
    #[arg(long)]
    response: Option<u64>,
    /// Messages per second
    #[arg(long, default_value_t = 30)]
    rate: u32,
    /// Packets per message
    #[arg(long, default_value_t = 8)]
    packets: u32,
    /// Seconds of messages
    #[arg(long, default_value_t = 25.0)]
    duration: f64,
    /// De-synchronisation buffer, in messages
    #[arg(long, default_value_t = 4)]
    buffer: u32,
    /// datagram (unreliable DATAGRAM frames) | stream (one reliable stream)
    #[arg(long, default_value = "datagram")]
    mode: Mode,
}

impl WorkloadArgs {
    fn workload(&self) -> Result<Workload, String> {
        match self.workload.as_str() {
            "download" => match self.size {
                Some(size) => Ok(Workload::Download { size }),
                None => Err("--workload download needs --size BYTES".into()),
            },
            "upload" => match self.size {
                Some(size) => Ok(Workload::Upload { size }),
                None => Err("--workload upload needs --size BYTES".into()),
            },
            "reqresp" => match (self.request, self.response) {
                (Some(request), Some(response)) => {
                    let p = ReqResp {
                        exchanges: self.exchanges,
                        request,
                        response,
                    };
                    p.check()?;
                    Ok(Workload::ReqResp(p))
                }
                _ => Err("--workload reqresp needs --request BYTES and --response BYTES".into()),
            },
            "page" => match &self.page {
                Some(path) => Ok(Workload::Page(Arc::new(page::Page::load(path)?))),
                None => Err("--workload page needs --page FILE".into()),
            },
            "messages" => {
                let p = messages::Params {
                    mode: self.mode,
                    rate: self.rate,
                    packets: self.packets,
                    duration: self.duration,
                    buffer: self.buffer,
                };
                p.check()?;
                Ok(Workload::Messages(p))
            }
            other => Err(format!(
                "unknown workload {other:?} (allowed: {})",
                WORKLOADS.join(", ")
            )),
        }
    }
}

/// A workload this build does not have is an unsupported combination (127), not a usage error:
/// the campaign runner records it as `unsupported`.
fn unsupported_workload(w: &WorkloadArgs) -> Option<i32> {
    if WORKLOADS.contains(&w.workload.as_str()) {
        return None;
    }
    eprintln!(
        "fecq: unsupported workload {:?} (supported: {})",
        w.workload,
        WORKLOADS.join(", ")
    );
    Some(EXIT_UNSUPPORTED)
}

/// The workloads this build has (impl.toml `capabilities.workloads`).
pub const WORKLOADS: [&str; 5] = ["download", "upload", "reqresp", "messages", "page"];

fn usage(msg: &str) -> i32 {
    eprintln!("fecq: {msg}");
    EXIT_USAGE
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Run to completion, then drop whatever tasks are left (connection drivers, flush timers)
/// without waiting for them: exit promptly after SIGTERM or the end of a run. The qlog files
/// still open are flushed first (crate::options::qlog; nothing to do without `--qlog-dir`).
fn block_on<T>(fut: impl std::future::Future<Output = T>) -> T {
    let rt = runtime();
    let out = rt.block_on(fut);
    crate::options::qlog::flush_all();
    rt.shutdown_background();
    out
}

/// Write the metrics (even for a failed run: `ok` is false and `error` says why; `elapsed_ms`
/// is the time since `started`). A run that reached `--timeout` (the error begins with
/// `app::TIMEOUT_PREFIX`) sets `timed_out` and exits with EXIT_TIMEOUT, its `bytes_app` the
/// bytes received until then; a run stopped by SIGTERM or SIGINT (crate::stop) exits with
/// EXIT_STOPPED, its metrics written as far as they got.
fn finish(
    mut m: Metrics,
    res: Result<(), String>,
    out: &std::path::Path,
    started: std::time::Instant,
) -> i32 {
    m.ok = res.is_ok();
    m.error = res.as_ref().err().cloned();
    m.elapsed_ms = Some(ms(started.elapsed()));
    m.timed_out = matches!(&res, Err(e) if e.starts_with(app::TIMEOUT_PREFIX));
    if let Err(e) = m.write(out) {
        eprintln!("fecq: {e}");
        return EXIT_FAILURE;
    }
    match res {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("fecq: {e}");
            if m.timed_out {
                EXIT_TIMEOUT
            } else if e.starts_with(STOPPED_PREFIX) {
                EXIT_STOPPED
            } else {
                EXIT_FAILURE
            }
        }
    }
}

/// The checks `fecq client` makes before it connects: the workload, or why not (exit status,
/// message).
fn check_client(
    server: SocketAddr,
    bind: Option<SocketAddr>,
    workload: &WorkloadArgs,
    common: &Common,
    mp: &MpArgs,
) -> Result<Workload, (i32, String)> {
    if let Some(code) = unsupported_workload(workload) {
        return Err((
            code,
            format!("unsupported workload {:?}", workload.workload),
        ));
    }
    let w = common
        .check()
        .and_then(|_| mp.check())
        .and_then(|_| common.tail.check_multipath(mp.multipath))
        .and_then(|_| workload.workload())
        .map_err(|e| (EXIT_USAGE, e))?;
    if mp.multipath {
        if bind.is_some() {
            return Err((
                EXIT_USAGE,
                "--bind is single-path: with --multipath, --local-addresses".into(),
            ));
        }
        if let Some(e) = family_mismatch(mp, server) {
            return Err((EXIT_USAGE, e));
        }
    } else if bind.is_some_and(|b| b.is_ipv6() != server.is_ipv6()) {
        return Err((
            EXIT_USAGE,
            "--bind and --server must be of the same address family".into(),
        ));
    }
    Ok(w)
}

/// `fecq check-args server|client ARGS…`: parse and check ARGS as that role would, run nothing.
fn check_args(role: &str, args: &[String]) -> i32 {
    let mut argv: Vec<String> = vec!["fecq".into(), role.into()];
    let own: &[&str] = match role {
        "server" => &["--listen", "127.0.0.1:4433"],
        "client" => &["--server", "127.0.0.1:4433", "--out", "/dev/null"],
        other => {
            return usage(&format!(
                "check-args: unknown role {other:?} (allowed: server, client)"
            ))
        }
    };
    argv.extend(own.iter().map(|s| s.to_string()));
    let has = |flag: &str| {
        args.iter()
            .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
    };
    if role == "client" && !has("--size") {
        argv.extend(["--size".to_string(), "1".to_string()]);
    }
    for flag in ["--request", "--response"] {
        if role == "client" && !has(flag) {
            argv.extend([flag.to_string(), "1".to_string()]);
        }
    }
    argv.extend(args.iter().cloned());
    let cli = match Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fecq {role}: {}", e.to_string().trim_end());
            return EXIT_USAGE;
        }
    };
    let checked = match &cli.command {
        Command::Server { common, mp, .. } => common
            .check()
            .and_then(|_| mp.check())
            .and_then(|_| common.tail.check_multipath(mp.multipath))
            .map_err(|e| (EXIT_USAGE, e)),
        Command::Client {
            server,
            bind,
            workload,
            common,
            mp,
            ..
        } => {
            // A page's graph is each run's own file, written after the options were checked:
            // without --page, the other options are checked as a download's (--page FILE: the
            // graph is read and checked too).
            let mut workload = workload.clone();
            if workload.workload == "page" && workload.page.is_none() {
                workload.workload = "download".into();
            }
            check_client(*server, *bind, &workload, common, mp).map(|_| ())
        }
        _ => unreachable!("check-args builds a server or client command line"),
    };
    match checked {
        Ok(()) => {
            println!("fecq {role}: arguments ok");
            EXIT_OK
        }
        Err((code, e)) => {
            eprintln!("fecq {role}: {e}");
            code
        }
    }
}

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    match cli.command {
        Command::Server { listen, common, mp } => {
            if let Err(e) = common
                .check()
                .and_then(|_| mp.check())
                .and_then(|_| common.tail.check_multipath(mp.multipath))
            {
                return usage(&e);
            }
            block_on(server(listen, common, mp))
        }
        Command::Client {
            server,
            bind,
            workload,
            out,
            common,
            mp,
        } => {
            let workload = match check_client(server, bind, &workload, &common, &mp) {
                Ok(w) => w,
                Err((code, e)) => {
                    eprintln!("fecq: {e}");
                    return code;
                }
            };
            let started = std::time::Instant::now();
            let (m, res) = block_on(async {
                let stop = match Stop::on_signals() {
                    Ok(stop) => stop,
                    Err(e) => return (app::metrics_header(&common, &workload), Err(e)),
                };
                if mp.multipath {
                    let setup = ClientSetup::multipath(&mp, server);
                    let stack = Noq { args: mp.clone() };
                    run::client_main(&stack, &common, &setup, workload, None, &stop).await
                } else {
                    let setup = ClientSetup::single(server, bind);
                    run::client_main(&Quinn, &common, &setup, workload, None, &stop).await
                }
            });
            finish(m, res, &out, started)
        }
        Command::Loopback {
            workload,
            loss,
            loss_model,
            burst_len,
            seed,
            rate_mbit,
            out,
            common,
            mp,
        } => {
            if let Some(code) = unsupported_workload(&workload) {
                return code;
            }
            let spec = LossSpec {
                p: loss,
                model: loss_model,
                burst_len,
                seed,
                rate_mbit,
            };
            let workload = match common
                .check()
                .and_then(|_| mp.check())
                .and_then(|_| common.tail.check_multipath(mp.multipath))
                .and_then(|_| spec.check())
                .and_then(|_| workload.workload())
            {
                Ok(w) => w,
                Err(e) => return usage(&e),
            };
            if !mp.server_addresses.is_empty() {
                return usage("loopback: the server is in-process, no --server-addresses");
            }
            let started = std::time::Instant::now();
            if mp.multipath {
                if let Some(bad) = mp
                    .local_addresses
                    .iter()
                    .find(|ip| !ip.is_loopback() || ip.is_ipv6())
                {
                    return usage(&format!(
                        "loopback: --local-addresses must be 127.x.y.z addresses, got {bad}"
                    ));
                }
                let (m, res) = block_on(loopback::run_multipath(&common, &mp, workload, spec));
                return finish(m, res, &out, started);
            }
            let (m, res) = block_on(loopback::run(&common, workload, spec));
            finish(m, res, &out, started)
        }
        Command::CheckArgs { role, args } => check_args(&role, &args),
        Command::Bench { json } => crate::bench::main(json),
    }
}

/// Every path's addresses of the address family of the server.
fn family_mismatch(mp: &MpArgs, server: SocketAddr) -> Option<String> {
    let bad_local = mp
        .local_addresses
        .iter()
        .find(|ip| ip.is_ipv6() != server.is_ipv6());
    let bad_server = mp
        .server_addresses
        .iter()
        .find(|a| a.is_ipv6() != server.is_ipv6());
    match (bad_local, bad_server) {
        (Some(ip), _) => Some(format!(
            "--local-addresses: {ip} is not of --server's address family"
        )),
        (_, Some(a)) => Some(format!(
            "--server-addresses: {a} is not of --server's address family"
        )),
        _ => None,
    }
}

async fn server(listen: SocketAddr, common: Common, mp: MpArgs) -> i32 {
    if mp.multipath {
        serve(Noq { args: mp }, listen, common).await
    } else {
        serve(Quinn, listen, common).await
    }
}

/// Serve until SIGTERM or SIGINT; "listening ADDR:PORT" (flushed) once bound.
async fn serve<S: Stack>(stack: S, listen: SocketAddr, common: Common) -> i32 {
    let (endpoint, socket) = match run::server_endpoint(&stack, &common, listen, None) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("fecq: {e}");
            return EXIT_FAILURE;
        }
    };
    if stack.multipath().is_some() {
        let port = socket.local_addr().map_or(listen.port(), |a| a.port());
        println!(
            "listening {} (multipath, all addresses)",
            SocketAddr::new(listen.ip(), port)
        );
    } else {
        println!("listening {}", socket.local_addr().unwrap_or(listen));
    }
    let _ = std::io::stdout().flush();
    let serving = tokio::spawn(run::serve(Arc::new(stack), endpoint.clone(), socket));
    let code = wait_for_signal().await;
    endpoint.close(0, b"server shutting down");
    serving.abort();
    code
}

/// Until SIGTERM or SIGINT: EXIT_OK, or EXIT_FAILURE if the handler cannot be installed.
async fn wait_for_signal() -> i32 {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fecq: signal handler: {e}");
            return EXIT_FAILURE;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    EXIT_OK
}
