//! fecq: FEC-enabled QUIC endpoints. One IO-free FEC layer under two QUIC stacks, each plugged in
//! the same way (stack.rs: the seam) by an adapter holding only what is specific to its crate:
//! quinn (quinn_stack, single path) and noq (noq_stack, multipath). Module map, bottom up (a
//! module uses only those above it in this list; `tests/modules.rs` checks there is no circle):
//!
//! - IO-free: `link::loss` (seeded loss processes), `layer` (the FEC layer: config, datagrams,
//!   counters, per-connection groups, repair routing, flush and tail decisions, the engine),
//!   `content` (what a QUIC packet carries, read where the stack seals it: which datagrams
//!   `--fec-protect stream` protects), `link` (`fecq loopback`'s simulated link), `driver` (the
//!   adapter core: backlog, decoded queue, link);
//! - `options`: `options::tail`, `options::cc` (congestion control options and the scaled
//!   window), `options::config` (`Common`), `options::metrics` (the metrics JSON, every key),
//!   `options::multipath` (`MpArgs`), `options::qlog` (qlog files and the TLS key log, for both
//!   stacks), `options::tls`, `options::transport` (the QUIC transport settings, once for both
//!   stacks);
//! - the seam: `quic` (the QUIC calls the shared code makes), `socket` (one UDP socket through
//!   the layer, for either stack), `stack` (what a stack supplies);
//! - the application: `app::pattern`, `app::messages`, `app::transfer`, `app` (the protocol, both
//!   sides);
//! - the adapters: `quinn_stack`, `noq_stack` (socket glue, controller glue, transport,
//!   endpoint setup);
//! - the roles and commands: `stop` (a client stopped early by a signal), `run` (server and
//!   client, once for both stacks), `loopback`, `bench`, `cli`.
//!
//! A folder holds one concept (`app/`, `options/`, `link/`, `layer/`, the two adapters) and at
//! most 15 source files (fecbench's `tests/test_rust_layout.py` checks every crate's `src`).

pub mod app;
pub mod bench;
pub mod cli;
pub mod content;
pub mod driver;
pub mod layer;
pub mod link;
pub mod loopback;
pub mod noq_stack;
pub mod options;
pub mod quic;
pub mod quinn_stack;
pub mod run;
pub mod socket;
pub mod stack;
pub mod stop;
