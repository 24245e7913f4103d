//! Options shared by every role, and the quinn endpoints built from them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use fec_core::Scheme;
use quinn::{
    ClientConfig, Endpoint, EndpointConfig, IdleTimeout, ServerConfig, TransportConfig, VarInt,
};

use crate::cc::{CcAlgo, ScaledFactory};
use crate::loss::LossProcess;
use crate::socket::{FecOptions, FecSocket, Signal, QUIC_MTU};
use crate::tls;

#[derive(Args, Clone, Debug)]
pub struct Common {
    /// FEC scheme: none | xor:K[:I] | rs:N,K | rlc:N,K,W (both ends must agree)
    #[arg(long, default_value = "none")]
    pub fec: Scheme,
    /// How recovered datagrams are shown to congestion control: ce (ECN-CE marked) | hide
    #[arg(long, default_value = "ce")]
    pub signal: Signal,
    /// Congestion control: cubic | newreno | bbr
    #[arg(long, default_value = "cubic")]
    pub cc: CcAlgo,
    /// Packet reordering threshold before a loss is declared (quinn default 3)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub reorder_packets: u32,
    /// Time reordering threshold, in RTTs (quinn default 1.125)
    #[arg(long, default_value_t = 1.125)]
    pub reorder_time: f32,
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
        if self.rcvbuf < 4096 || self.sndbuf < 4096 {
            return Err("--rcvbuf and --sndbuf must be at least 4096".to_string());
        }
        Ok(())
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout)
    }

    fn fec_options(&self) -> FecOptions {
        FecOptions {
            scheme: self.fec,
            signal: self.signal,
            flush_after: Duration::from_millis(self.flush_ms.max(1)),
            rcvbuf: self.rcvbuf,
            sndbuf: self.sndbuf,
        }
    }

    pub fn transport(&self) -> TransportConfig {
        let mut t = TransportConfig::default();
        t.packet_threshold(self.reorder_packets);
        t.time_threshold(self.reorder_time);
        t.congestion_controller_factory(Arc::new(ScaledFactory {
            algo: self.cc,
            scale: 1.0 / (1.0 + self.fec.repair_ratio()),
        }));
        // Path MTU discovery off: every QUIC datagram is at most QUIC_MTU, the FEC header on top.
        t.mtu_discovery_config(None);
        t.initial_mtu(QUIC_MTU);
        t.max_idle_timeout(Some(IdleTimeout::from(VarInt::from_u32(
            (self.idle_timeout * 1e3).round() as u32,
        ))));
        t.stream_receive_window(VarInt::from_u32(16 << 20));
        t.receive_window(VarInt::from_u32(32 << 20));
        t.send_window(32 << 20);
        t.datagram_receive_buffer_size(Some(8 << 20));
        t.datagram_send_buffer_size(8 << 20);
        t
    }

    fn bind(&self, addr: SocketAddr, loss: Option<LossProcess>) -> Result<Arc<FecSocket>, String> {
        let sock =
            std::net::UdpSocket::bind(addr).map_err(|e| format!("cannot bind {addr}: {e}"))?;
        FecSocket::new(sock, self.fec_options(), loss).map_err(|e| format!("socket setup: {e}"))
    }

    pub fn server_endpoint(
        &self,
        addr: SocketAddr,
        loss: Option<LossProcess>,
    ) -> Result<(Endpoint, Arc<FecSocket>), String> {
        let socket = self.bind(addr, loss)?;
        let mut server = ServerConfig::with_crypto(Arc::new(tls::server_crypto()?));
        server.transport_config(Arc::new(self.transport()));
        let endpoint = Endpoint::new_with_abstract_socket(
            EndpointConfig::default(),
            Some(server),
            socket.clone(),
            Arc::new(quinn::TokioRuntime),
        )
        .map_err(|e| format!("endpoint: {e}"))?;
        Ok((endpoint, socket))
    }

    pub fn client_endpoint(
        &self,
        addr: SocketAddr,
        loss: Option<LossProcess>,
    ) -> Result<(Endpoint, Arc<FecSocket>), String> {
        let socket = self.bind(addr, loss)?;
        let mut endpoint = Endpoint::new_with_abstract_socket(
            EndpointConfig::default(),
            None,
            socket.clone(),
            Arc::new(quinn::TokioRuntime),
        )
        .map_err(|e| format!("endpoint: {e}"))?;
        let mut client = ClientConfig::new(Arc::new(tls::client_crypto()?));
        client.transport_config(Arc::new(self.transport()));
        endpoint.set_default_client_config(client);
        Ok((endpoint, socket))
    }
}
