//! `fecq bench`: what the FEC layer costs. Figures, not a test: nothing here asserts on time.
//! - per code (`fec_core::bench`), encode and decode throughput of fec-core for 1200-byte
//!   datagrams, and the same work (same wire datagrams, same delivered payloads; checked) done
//!   with the underlying code called directly, with their ratio;
//! - FEC layer cost per datagram (encode + decode of one source datagram, repairs included),
//!   without loss and with one source datagram in 10 lost;
//! - fecq's own FEC layer (`FecLayer` send + receive, IO-free: framing, path and group lookup,
//!   routing, counters around fec-core), single-path and multipath framing;
//! - the adapters' send + receive path per datagram over 127.0.0.1: quinn's and noq's (multipath
//!   framing) over the shared socket, measured alternately, and their ratio, in wall time and in
//!   the measuring thread's CPU time (not stretched by other processes on a shared machine);
//! - loopback 1 MB download time with each code vs without, at 0 % and 5 % loss.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use fec_core::Scheme;
use serde_json::{json, Value};

use crate::app::Workload;
use crate::layer::{Blocks, LayerConfig, Multipath, Protect, RepairPath, Signal};
use crate::link::loss::LossModel;
use crate::loopback::{self, LossSpec};
use crate::noq_stack::udp::{Handle, NoqUdp};
use crate::options::config::Common;
use crate::quinn_stack::udp::QuinnUdp;
use crate::socket::{FecSocket, SocketConfig, SocketGlue};

const SYMBOL: usize = 1200;
pub const SCHEMES: [&str; 5] = ["none", "xor:5", "xor:5:4", "rs:30,20", "rlc:3,2,20"];

/// Datagrams of a deterministic pseudo-random content.
fn datagrams(n: usize) -> Vec<Vec<u8>> {
    let mut rng = crate::link::loss::SplitMix64::new(42);
    (0..n)
        .map(|_| (0..SYMBOL).map(|_| rng.next_u64() as u8).collect())
        .collect()
}

/// A socket of either stack's glue on 127.0.0.1 (any port) with `scheme`, no link.
fn bench_socket<G: SocketGlue>(
    scheme: Scheme,
    multipath: bool,
) -> Result<Arc<FecSocket<G>>, String> {
    let cfg = SocketConfig {
        layer: LayerConfig {
            scheme,
            signal: Signal::Ce,
            flush_after: std::time::Duration::from_millis(10),
            max_payload: SYMBOL,
            multipath: multipath.then_some(Multipath {
                blocks: Blocks::PerPath,
                repair: RepairPath::Same,
            }),
            tail: None,
            protect: Protect::Stream,
        },
        rcvbuf: 8 << 20,
        sndbuf: 8 << 20,
        default_local: None,
        qlog: None,
        test_send_delay: std::time::Duration::ZERO,
        test_ignore_repairs: false,
        test_recovery_delay: std::time::Duration::ZERO,
    };
    FecSocket::bind("127.0.0.1:0".parse().unwrap(), cfg, None)
}

/// One seam's side of the socket benchmark: how its stack sends through the shared socket. (Both
/// stacks' `AsyncUdpSocket::poll_recv` only forward to [`FecSocket::poll_recv`], which the
/// benchmark calls for either.)
trait BenchSeam: SocketGlue<Meta: Default + Clone> {
    /// Names the measurement in errors.
    const LABEL: &'static str;
    /// quinn: single-path framing; noq: multipath framing (one path).
    const MULTIPATH: bool;
    /// The stack's sending end on a socket.
    type Sender;
    fn sender(tx: Arc<FecSocket<Self>>) -> Self::Sender;
    /// Send `contents` to `to` as the stack does, waiting for room in the socket when it is full.
    async fn stack_send(
        sender: &mut Self::Sender,
        to: SocketAddr,
        contents: &[u8],
    ) -> Result<(), String>;
}

/// quinn's `AsyncUdpSocket::try_send`, and its `UdpPoller` on WouldBlock.
impl BenchSeam for QuinnUdp {
    const LABEL: &'static str = "socket path";
    const MULTIPATH: bool = false;
    type Sender = (Arc<FecSocket<QuinnUdp>>, Pin<Box<dyn quinn::UdpPoller>>);

    fn sender(tx: Arc<FecSocket<Self>>) -> Self::Sender {
        use quinn::AsyncUdpSocket;
        let poller = tx.clone().create_io_poller();
        (tx, poller)
    }

    async fn stack_send(
        sender: &mut Self::Sender,
        to: SocketAddr,
        contents: &[u8],
    ) -> Result<(), String> {
        use quinn::udp::{EcnCodepoint, Transmit};
        use quinn::AsyncUdpSocket;
        let (tx, poller) = sender;
        let transmit = Transmit {
            destination: to,
            ecn: Some(EcnCodepoint::Ect0),
            contents,
            segment_size: None,
            src_ip: None,
        };
        // As quinn does: on WouldBlock, wait until writable and retry.
        loop {
            match tx.try_send(&transmit) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::future::poll_fn(|cx| poller.as_mut().poll_writable(cx))
                        .await
                        .map_err(|e| format!("writable: {e}"))?;
                }
                Err(e) => return Err(format!("send: {e}")),
            }
        }
    }
}

/// noq's `UdpSender::poll_send` (it waits for room itself); the transmit names its source address,
/// as noq's multipath transmits do.
impl BenchSeam for NoqUdp {
    const LABEL: &'static str = "noq socket path";
    const MULTIPATH: bool = true;
    type Sender = Pin<Box<dyn noq::UdpSender>>;

    fn sender(tx: Arc<FecSocket<Self>>) -> Self::Sender {
        use noq::AsyncUdpSocket;
        Handle(tx).create_sender()
    }

    async fn stack_send(
        sender: &mut Self::Sender,
        to: SocketAddr,
        contents: &[u8],
    ) -> Result<(), String> {
        use noq::udp::{EcnCodepoint, Transmit};
        let transmit = Transmit {
            destination: to,
            ecn: Some(EcnCodepoint::Ect0),
            contents,
            segment_size: None,
            src_ip: Some(to.ip()),
        };
        std::future::poll_fn(|cx| sender.as_mut().poll_send(&transmit, cx))
            .await
            .map_err(|e| format!("send: {e}"))
    }
}

/// Microseconds per QUIC datagram (wall time, CPU time of this thread) through seam `S`'s real
/// adapter: the stack's send on one socket and the receive on another over 127.0.0.1 (system
/// calls included). The difference to `none` is what the FEC layer adds per datagram inside the
/// adapter.
async fn socket_path_us<S: BenchSeam>(scheme: Scheme, n: usize) -> Result<(f64, f64), String> {
    let tx = bench_socket::<S>(scheme, S::MULTIPATH)?;
    let rx = bench_socket::<S>(scheme, S::MULTIPATH)?;
    let to = rx.local_addr().map_err(|e| e.to_string())?;
    let mut sender = S::sender(tx);
    let input = datagrams(256);
    let mut storage = vec![vec![0u8; 2048]; 32];
    let mut meta = vec![S::Meta::default(); 32];
    let (t, cpu) = (Instant::now(), thread_cpu());
    let mut received = 0usize;
    for batch in 0..n / 128 {
        for i in 0..128 {
            let d = &input[(batch * 128 + i) % input.len()];
            S::stack_send(&mut sender, to, d).await?;
        }
        // Receive until this batch is in (repairs are consumed inside poll_recv).
        while received < (batch + 1) * 128 {
            let mut bufs: Vec<IoSliceMut> =
                storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
            let got = tokio::time::timeout(
                std::time::Duration::from_secs(2),
                std::future::poll_fn(|cx| rx.poll_recv(cx, &mut bufs, &mut meta)),
            )
            .await
            .map_err(|_| format!("{}: datagrams lost on loopback", S::LABEL))?
            .map_err(|e| format!("recv: {e}"))?;
            received += got;
        }
    }
    let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / received.max(1) as f64;
    Ok((per(t.elapsed()), per(thread_cpu() - cpu)))
}

fn loopback_download(fec: Scheme, signal: Signal, loss: f64) -> Result<(f64, u64), String> {
    let common = Common {
        fec,
        fec_protect: Protect::Stream,
        signal,
        cc: crate::options::cc::CcAlgo::Cubic,
        repair_cc: crate::options::cc::RepairCc::Counted,
        reorder_packets: 3,
        reorder_time: 1.125,
        ack_eliciting_threshold: None,
        max_ack_delay: None,
        rcvbuf: 8 << 20,
        sndbuf: 8 << 20,
        timeout: 60.0,
        flush_ms: 10,
        idle_timeout: 30.0,
        keepalive: 0.2,
        initial_window: None,
        max_window: None,
        test_send_delay_us: 0,
        test_ignore_repairs: false,
        test_recovery_delay_us: 0,
        tail: crate::options::tail::TailArgs::default(),
        capture: crate::options::config::Capture::default(),
    };
    let spec = LossSpec {
        p: loss,
        model: LossModel::Uniform,
        burst_len: 1.0,
        seed: 1,
        rate_mbit: None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (m, res) = rt.block_on(loopback::run(
        &common,
        Workload::Download { size: 1_000_000 },
        spec,
    ));
    res?;
    Ok((m.dct_ms.unwrap_or(f64::NAN), m.recovered))
}

/// Nanoseconds of CPU time per QUIC datagram through fecq's own FEC layer, IO-free:
/// `FecLayer::send` on one side and `FecLayer::receive` of every wire datagram (repairs included)
/// on the other, no loss; single-path framing, or multipath framing (per-path blocks, two paths in
/// turn). Median of 3.
fn fec_layer_ns(scheme: Scheme, multipath: bool) -> f64 {
    use crate::layer::{Content, FecLayer, PathKey, ECN_ECT0};
    use std::hint::black_box;

    let cfg = LayerConfig {
        scheme,
        signal: Signal::Ce,
        flush_after: std::time::Duration::from_millis(10),
        max_payload: SYMBOL,
        multipath: multipath.then_some(Multipath {
            blocks: Blocks::PerPath,
            repair: RepairPath::Same,
        }),
        tail: None,
        protect: Protect::Stream,
    };
    let server: std::net::SocketAddr = "10.0.9.1:443".parse().unwrap();
    let locals: Vec<std::net::IpAddr> = if multipath {
        vec!["10.0.1.1".parse().unwrap(), "10.0.2.1".parse().unwrap()]
    } else {
        vec!["10.0.1.1".parse().unwrap()]
    };
    let input = datagrams(256);
    let n = 50_000;
    let mut runs = Vec::new();
    for _ in 0..3 {
        let (mut tx, mut rx) = (FecLayer::new(cfg.clone()), FecLayer::new(cfg.clone()));
        let (mut wire, mut got) = (Vec::new(), Vec::new());
        let now = Instant::now();
        let cpu = thread_cpu();
        for i in 0..n {
            let local = locals[i % locals.len()];
            let (to, from) = if multipath {
                (
                    PathKey::new(Some(local), server),
                    PathKey::new(Some(server.ip()), std::net::SocketAddr::new(local, 4000)),
                )
            } else {
                (
                    PathKey::new(None, server),
                    PathKey::new(None, std::net::SocketAddr::new(local, 4000)),
                )
            };
            wire.clear();
            tx.send(
                now,
                to,
                &input[i % input.len()],
                ECN_ECT0,
                Content::Data,
                &mut wire,
            );
            for o in &wire {
                got.clear();
                rx.receive(now, from, &o.data, o.ecn, &mut got);
                black_box(&got);
            }
        }
        runs.push((thread_cpu() - cpu).as_secs_f64() * 1e9 / n as f64);
    }
    median(runs)
}

/// Median of 3 (after a warm-up) of the quinn adapter's and the noq adapter's per-datagram cost,
/// measured alternately so that both see the same machine load.
fn socket_path(scheme: Scheme) -> Result<[f64; 4], String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        socket_path_us::<QuinnUdp>(scheme, 2_560).await?;
        socket_path_us::<NoqUdp>(scheme, 2_560).await?;
        let (mut quinn, mut noq) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            quinn.push(socket_path_us::<QuinnUdp>(scheme, 12_800).await?);
            noq.push(socket_path_us::<NoqUdp>(scheme, 12_800).await?);
        }
        let wall = |v: &[(f64, f64)]| median(v.iter().map(|x| x.0).collect());
        let cpu = |v: &[(f64, f64)]| median(v.iter().map(|x| x.1).collect());
        Ok([wall(&quinn), wall(&noq), cpu(&quinn), cpu(&noq)])
    })
}

/// CPU time this thread has used (user + system, system calls included): unlike wall time, not
/// stretched when other processes take the CPU, so figures stay comparable on a shared machine.
fn thread_cpu() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

pub fn run() -> Result<Value, String> {
    let schemes = SCHEMES
        .iter()
        .map(|name| name.parse::<Scheme>())
        .collect::<Result<Vec<_>, _>>()?;
    // fec-core's own bench: each code through Encoder/Decoder and the same work done directly.
    let lossy = fec_core::bench::run(&schemes, 20_000, 10, 3);
    let clean = fec_core::bench::run(&schemes, 20_000, 0, 3);
    let mut codes = Vec::new();
    for ((scheme, f), c) in schemes.iter().zip(&lossy).zip(&clean) {
        let [quinn_us, noq_us, quinn_cpu_us, noq_cpu_us] = socket_path(*scheme)?;
        let (layer_ns, layer_mp_ns) = (fec_layer_ns(*scheme, false), fec_layer_ns(*scheme, true));
        codes.push(json!({
            "scheme": f.scheme,
            "encode_mb_s": f.encode_mb_s,
            "decode_mb_s": f.decode_mb_s,
            "direct_encode_mb_s": f.direct_encode_mb_s,
            "direct_decode_mb_s": f.direct_decode_mb_s,
            "encode_ratio_direct_over_fecq": f.encode_ratio(),
            "decode_ratio_direct_over_fecq": f.decode_ratio(),
            "direct_same_output": f.direct_same_output,
            "decode_ratio_direct_over_fecq_no_loss": c.decode_ratio(),
            "layer_us_per_datagram": c.layer_ns_per_datagram / 1e3,
            "layer_us_per_datagram_10pct_loss": f.layer_ns_per_datagram / 1e3,
            "recovered_in_bench": f.recovered,
            "lost_in_bench": f.lost,
            "socket_path_us_per_datagram": quinn_us,
            "noq_socket_path_us_per_datagram": noq_us,
            "noq_over_quinn_adapter": noq_us / quinn_us,
            "socket_path_cpu_us_per_datagram": quinn_cpu_us,
            "noq_socket_path_cpu_us_per_datagram": noq_cpu_us,
            "noq_over_quinn_adapter_cpu": noq_cpu_us / quinn_cpu_us,
            "fecq_layer_ns_per_datagram": layer_ns,
            "fecq_layer_multipath_ns_per_datagram": layer_mp_ns,
        }));
    }
    let mut downloads = Vec::new();
    for name in SCHEMES {
        let scheme: Scheme = name.parse()?;
        // Default options (signal ce); with loss, also the hidden-recovery variant.
        let mut cases = vec![(0.0, Signal::Ce), (0.05, Signal::Ce)];
        if scheme != Scheme::None {
            cases.push((0.05, Signal::Hide));
        }
        for (loss, signal) in cases {
            let mut times = Vec::new();
            let mut recovered = 0;
            for _ in 0..3 {
                let (ms, rec) = loopback_download(scheme, signal, loss)?;
                times.push(ms);
                recovered = rec;
            }
            downloads.push(json!({
                "scheme": name, "signal": signal.to_string(), "loss": loss, "size": 1_000_000,
                "dct_ms_median": median(times.clone()), "dct_ms": times, "recovered": recovered,
            }));
        }
    }
    Ok(json!({
        "symbol_bytes": SYMBOL,
        "layer_goal_us": 2.0,
        "codes": codes,
        "loopback_download_1mb": downloads,
    }))
}

pub fn main(as_json: bool) -> i32 {
    let t = Instant::now();
    match run() {
        Ok(v) => {
            if as_json {
                println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            } else {
                print_table(&v);
            }
            eprintln!("fecq bench: {:.1} s", t.elapsed().as_secs_f64());
            0
        }
        Err(e) => {
            eprintln!("fecq bench: {e}");
            1
        }
    }
}

fn print_table(v: &Value) {
    let f = |x: &Value| x.as_f64().map_or("-".to_string(), |x| format!("{x:.1}"));
    println!(
        "{:<12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "code", "enc MB/s", "dec MB/s", "direct enc", "direct dec", "us/dgram", "@10% loss"
    );
    for c in v["codes"].as_array().into_iter().flatten() {
        println!(
            "{:<12} {:>10} {:>10} {:>10} {:>10} {:>10.2} {:>10.2}",
            c["scheme"].as_str().unwrap_or(""),
            f(&c["encode_mb_s"]),
            f(&c["decode_mb_s"]),
            f(&c["direct_encode_mb_s"]),
            f(&c["direct_decode_mb_s"]),
            c["layer_us_per_datagram"].as_f64().unwrap_or(f64::NAN),
            c["layer_us_per_datagram_10pct_loss"]
                .as_f64()
                .unwrap_or(f64::NAN),
        );
    }
    println!(
        "\nadapter send + receive over 127.0.0.1, us per datagram (system calls included): \
         quinn, noq (multipath framing), ratio (goal <= 1.2)"
    );
    let num = |x: &Value| x.as_f64().map_or("-".into(), |x| format!("{x:.2}"));
    for c in v["codes"].as_array().into_iter().flatten() {
        println!(
            "{:<12} {:>8} {:>8} {:>6}",
            c["scheme"].as_str().unwrap_or(""),
            num(&c["socket_path_us_per_datagram"]),
            num(&c["noq_socket_path_us_per_datagram"]),
            num(&c["noq_over_quinn_adapter"]),
        );
    }
    println!("the same in CPU time of the measuring thread (us; ratio)");
    for c in v["codes"].as_array().into_iter().flatten() {
        println!(
            "{:<12} {:>8} {:>8} {:>6}",
            c["scheme"].as_str().unwrap_or(""),
            num(&c["socket_path_cpu_us_per_datagram"]),
            num(&c["noq_socket_path_cpu_us_per_datagram"]),
            num(&c["noq_over_quinn_adapter_cpu"]),
        );
    }
    println!(
        "\nfecq's FEC layer (FecLayer send + receive, IO-free, no loss), ns of CPU per datagram: \
         single-path framing, multipath framing"
    );
    for c in v["codes"].as_array().into_iter().flatten() {
        println!(
            "{:<12} {:>8} {:>8}",
            c["scheme"].as_str().unwrap_or(""),
            f(&c["fecq_layer_ns_per_datagram"]),
            f(&c["fecq_layer_multipath_ns_per_datagram"]),
        );
    }
    println!("\nloopback 1 MB download (median of 3, ms)");
    for d in v["loopback_download_1mb"].as_array().into_iter().flatten() {
        println!(
            "{:<12} {:<5} loss {:>4.0}%  {:>8}",
            d["scheme"].as_str().unwrap_or(""),
            d["signal"].as_str().unwrap_or(""),
            d["loss"].as_f64().unwrap_or(0.0) * 100.0,
            f(&d["dct_ms_median"]),
        );
    }
}
