//! fecq: FEC-enabled QUIC endpoints — quinn over a FEC socket layer (see socket.rs).

pub mod app;
pub mod bench;
pub mod cc;
pub mod cli;
pub mod config;
pub mod flush;
pub mod loopback;
pub mod loss;
pub mod messages;
pub mod metrics;
pub mod socket;
pub mod tls;
