//! What a run is set up with and what it reports, for both stacks: congestion control (`cc`) and
//! tail FEC (`tail`) options, the options every role shares (`config`: `Common`), the multipath
//! options (`multipath`: `MpArgs`), the QUIC transport settings (`transport`), TLS (`tls`), qlog
//! and the TLS key log (`qlog`), and the metrics JSON (`metrics`, every key).

pub mod cc;
pub mod config;
pub mod metrics;
pub mod multipath;
pub mod qlog;
pub mod tail;
pub mod tls;
pub mod transport;
