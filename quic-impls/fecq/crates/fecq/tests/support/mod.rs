//! Scaffolding shared by fecq's integration tests: options parsed exactly as the command line
//! gives them, and the runtime the in-process loopback runs use.
#![allow(dead_code)] // each test crate uses its own part

use clap::Parser;
use fecq::config::Common;
use fecq::multipath::MpArgs;

#[derive(Parser)]
struct Opts {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    mp: MpArgs,
}

/// Common and multipath options from `args` (the arguments after the program name).
pub fn opts(args: &[&str]) -> (Common, MpArgs) {
    let mut argv = vec!["fecq"];
    argv.extend_from_slice(args);
    let o = Opts::parse_from(argv);
    (o.common, o.mp)
}

/// Common options from `args`.
pub fn common(args: &[&str]) -> Common {
    opts(args).0
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
