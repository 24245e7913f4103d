//! fecq's integration tests, one test binary (Cargo.toml: `autotests = false`): each file of tests/ is a module of
//! it, so `cargo test` links the crate and its dependencies once instead of once per file (~20 s of a fresh build).
//! Its tests run two at a time as each file's did (the default: one thread a CPU).

mod support;

mod ack_frequency;
mod backlog;
mod cli;
mod loopback;
mod modules;
mod multipath;
mod protect;
mod qlog;
mod tail;
mod transfer;
