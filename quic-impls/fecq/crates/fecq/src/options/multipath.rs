//! The multipath options (`--multipath` and what goes with it): the paths a client opens, how FEC
//! frames them (crate::layer: per-path or connection-wide blocks, repair paths) and noq's packet
//! scheduler and path liveness (noq_stack applies them).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::Args;

use crate::layer::{Blocks, Multipath, RepairPath, MAX_PATHS};
use crate::options::metrics::MultipathInfo;

/// Packet schedulers (noq-proto patched: noq-proto/noq-proto-1.4.0-scheduler.patch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// noq's own: lowest path id first, the next path when its window is full.
    LowestId,
    /// Lowest smoothed RTT first.
    MinRtt,
    /// Each packet on the next path in turn (a blocked path passes its turn).
    RoundRobin,
    /// Thesis §5.9: first path drawn with probability ∝ its remaining congestion window.
    HighRb,
    /// Paths 2… carry data only once path 1 (QUIC path 0) is abandoned (its idle timeout).
    Backup,
}

const SCHEDULERS: [(&str, Scheduler); 5] = [
    ("lowest-id", Scheduler::LowestId),
    ("min-rtt", Scheduler::MinRtt),
    ("round-robin", Scheduler::RoundRobin),
    ("highrb", Scheduler::HighRb),
    ("backup", Scheduler::Backup),
];

impl std::str::FromStr for Scheduler {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        SCHEDULERS
            .iter()
            .find(|(name, _)| *name == s)
            .map(|(_, v)| *v)
            .ok_or_else(|| {
                let names: Vec<&str> = SCHEDULERS.iter().map(|(n, _)| *n).collect();
                format!("unknown scheduler {s:?} (allowed: {})", names.join(", "))
            })
    }
}

impl std::fmt::Display for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = SCHEDULERS.iter().find(|(_, v)| v == self).map(|(n, _)| *n);
        f.write_str(name.unwrap_or("?"))
    }
}

#[derive(Args, Clone, Debug)]
pub struct MpArgs {
    /// Multipath QUIC (noq) with multipath FEC framing; both ends must say it
    #[arg(long)]
    pub multipath: bool,
    /// Client: open one path per local address (comma-separated); path i leaves from address i
    #[arg(long, value_delimiter = ',')]
    pub local_addresses: Vec<IpAddr>,
    /// Client: the server address of each path (comma-separated ADDR or ADDR:PORT; the port
    /// defaults to --server's; default: --server for every path)
    #[arg(long, value_delimiter = ',', value_parser = parse_server_address)]
    pub server_addresses: Vec<SocketAddr>,
    /// Client: use only the first N paths of --local-addresses (and --server-addresses)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub paths: Option<u32>,
    /// FEC source blocks: path (one encoder per path) | connection (one across all paths)
    #[arg(long, default_value = "path")]
    pub fec_blocks: Blocks,
    /// Where repair datagrams go: same (the block's path) | other (the next path) | all (in turn)
    #[arg(long, default_value = "same")]
    pub repair_path: RepairPath,
    /// Packet scheduler: lowest-id (noq's own) | min-rtt | round-robin | highrb | backup (README.md)
    #[arg(long, default_value = "lowest-id")]
    pub scheduler: Scheduler,
    /// Abandon a path that received nothing for this many seconds (0: never; then a dead path
    /// ends the connection at its idle timeout); the lower of both ends' values applies
    #[arg(long, default_value_t = 1.0)]
    pub path_idle_timeout: f64,
    /// Keep every path alive with a PING after this many seconds without sending on it (0: off)
    #[arg(long, default_value_t = 0.2)]
    pub path_keepalive: f64,
}

/// ADDR:PORT, or ADDR alone (port 0: --server's port).
fn parse_server_address(s: &str) -> Result<SocketAddr, String> {
    s.parse::<SocketAddr>()
        .or_else(|_| s.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 0)))
        .map_err(|_| format!("{s:?} is neither ADDR nor ADDR:PORT"))
}

impl MpArgs {
    /// Multipath options without --multipath, or inconsistent ones, are usage errors. The server
    /// takes the client's path lists and ignores them (it binds every address), so that one
    /// descriptor argument can give both ends their multipath options.
    pub fn check(&self) -> Result<(), String> {
        for (name, v) in [
            ("--path-idle-timeout", self.path_idle_timeout),
            ("--path-keepalive", self.path_keepalive),
        ] {
            if !(0.0..=3600.0).contains(&v) {
                return Err(format!("{name} {v} must be in [0, 3600] seconds"));
            }
        }
        let extra = !self.local_addresses.is_empty()
            || !self.server_addresses.is_empty()
            || self.paths.is_some()
            || self.fec_blocks != Blocks::PerPath
            || self.repair_path != RepairPath::Same
            || self.scheduler != Scheduler::LowestId
            || self.path_idle_timeout != 1.0
            || self.path_keepalive != 0.2;
        if !self.multipath {
            return if extra {
                Err(
                    "--local-addresses, --server-addresses, --paths, --fec-blocks, \
                     --repair-path, --scheduler, --path-idle-timeout and --path-keepalive need \
                     --multipath"
                        .into(),
                )
            } else {
                Ok(())
            };
        }
        if let Some(n) = self.paths {
            if n as usize > self.local_addresses.len().max(1) {
                return Err(format!(
                    "--paths {n}: only {} local address(es) given (--local-addresses)",
                    self.local_addresses.len()
                ));
            }
        }
        if self.local_addresses.len() > MAX_PATHS {
            return Err(format!(
                "--local-addresses: at most {MAX_PATHS} paths, got {}",
                self.local_addresses.len()
            ));
        }
        if !self.server_addresses.is_empty()
            && self.server_addresses.len() != self.local_addresses.len()
        {
            return Err(format!(
                "--server-addresses gives {} addresses for {} paths (--local-addresses): one per \
                 path",
                self.server_addresses.len(),
                self.local_addresses.len()
            ));
        }
        Ok(())
    }

    /// The PING interval of every path (None: no keep-alive).
    pub fn keepalive(&self) -> Option<Duration> {
        seconds(self.path_keepalive)
    }

    /// The layer's multipath framing options.
    pub fn layer_multipath(&self) -> Multipath {
        Multipath {
            blocks: self.fec_blocks,
            repair: self.repair_path,
        }
    }

    /// The metrics' multipath settings for a client opening `paths_requested` paths.
    pub fn info(&self, paths_requested: usize) -> MultipathInfo {
        MultipathInfo {
            scheduler: self.scheduler.to_string(),
            fec_blocks: self.fec_blocks.to_string(),
            repair_path: self.repair_path.to_string(),
            paths_requested,
            paths_established: 0,
            blocks_with_losses: 0,
        }
    }

    /// (local address, server address) of each path the client opens.
    pub fn client_paths(&self, server: SocketAddr) -> Vec<(Option<IpAddr>, SocketAddr)> {
        if self.local_addresses.is_empty() {
            return vec![(None, server)];
        }
        let n = self.paths.map_or(usize::MAX, |n| n as usize);
        self.local_addresses
            .iter()
            .take(n)
            .enumerate()
            .map(|(i, ip)| {
                let mut to = *self.server_addresses.get(i).unwrap_or(&server);
                if to.port() == 0 {
                    to.set_port(server.port());
                }
                (Some(*ip), to)
            })
            .collect()
    }
}

/// Seconds as a duration, 0 as None.
pub fn seconds(s: f64) -> Option<Duration> {
    (s > 0.0).then(|| Duration::from_secs_f64(s))
}
