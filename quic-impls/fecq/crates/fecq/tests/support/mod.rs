//! Scaffolding shared by fecq's integration tests: options parsed exactly as the command line
//! gives them, the runtime the in-process loopback runs use, and the `fecq` binary's processes.
#![allow(dead_code)] // each test crate uses its own part

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use clap::Parser;
use fecq::options::config::Common;
use fecq::options::multipath::MpArgs;

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

/// The `fecq` binary of this build.
pub fn fecq() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fecq"))
}

/// A `fecq server` on a free loopback port with `args` after its address, and its address once it
/// said it listens.
pub fn server(args: &[&str]) -> (Child, String) {
    let mut server = fecq()
        .args(["server", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening ")
        .expect("listening line")
        .to_string();
    (server, addr)
}

/// SIGTERM to a child we spawned, and how it exited if it did within 5 s (else it is killed).
pub fn terminate(child: &mut Child) -> Option<ExitStatus> {
    // SAFETY: kill(2) on the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    for _ in 0..50 {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().ok();
    child.wait().ok();
    None
}
