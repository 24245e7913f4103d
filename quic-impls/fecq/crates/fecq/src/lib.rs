//! fecq: FEC-enabled QUIC endpoints. One IO-free FEC layer (layer.rs, with the adapter core in
//! driver.rs and the loopback link in link.rs) under two QUIC stacks: quinn (socket.rs, single
//! path) and noq (mp/, multipath).

pub mod app;
pub mod bench;
pub mod cc;
pub mod cli;
pub mod config;
pub mod driver;
pub mod flush;
pub mod layer;
pub mod link;
pub mod loopback;
pub mod loss;
pub mod messages;
pub mod metrics;
pub mod mp;
pub mod quic;
pub mod socket;
pub mod tail;
pub mod tls;
pub mod transfer;
