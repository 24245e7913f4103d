//! Tail FEC: the options that choose it. The layer decides each tail (crate::layer, `tail`) from
//! what quinn's controller tells (quinn_stack::cc::tail_budget).
//!
//! `--fec-mode block` (default) sends repairs as the scheme says, per source block or every K
//! datagrams. `--fec-mode tail` sends none while the sender sends; when it goes quiet (the flush
//! rule of crate::layer::flush: the end of a transfer, of a burst of messages, of a request or a
//! response), it sends up to `--tail-max` repairs over its last W datagrams (the sliding-window
//! code `rlc:N,K,W`; N and K are unused), as many as quinn's congestion window has room for.
//! The lost last packets of a transfer are then rebuilt about one RTT after they were sent,
//! before quinn's probe timeout would have retransmitted them.
//!
//! Window accounting: the repairs of a tail go into room the window had left (window − bytes in
//! flight, see crate::options::cc), so quinn's window is not scaled by 1 / (1 + r) in tail mode (that scaling
//! pays for repairs sent *while* quinn sends). Quinn does not see the tail's repairs: if the
//! application writes again before they are acknowledged, up to `--tail-max` datagrams more than
//! the window may be in flight for one RTT.

use clap::{Args, ValueEnum};
use fec_core::Scheme;

/// Default cap of repairs per tail: three rebuild up to three lost datagrams of the last W.
pub const DEFAULT_TAIL_MAX: usize = 3;
/// The largest cap (a tail never sends more than one repair per datagram of the window either).
pub const MAX_TAIL_MAX: usize = 255;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FecMode {
    /// Repairs as the scheme says, spread over the transfer (and a partial block at a pause).
    Block,
    /// Repairs only when the sender goes quiet, within the congestion window.
    Tail,
}

#[derive(Args, Clone, Debug)]
pub struct TailArgs {
    /// When repairs are sent: block (as the scheme says) | tail (only when the sender goes quiet,
    /// up to --tail-max, within the congestion window; needs --fec rlc:N,K,W). Sender option:
    /// give it to both ends
    #[arg(long, value_enum, default_value = "block")]
    pub fec_mode: FecMode,
    /// Tail mode: most repairs sent per tail
    #[arg(long, default_value_t = DEFAULT_TAIL_MAX, value_parser = parse_tail_max)]
    pub tail_max: usize,
}

fn parse_tail_max(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=MAX_TAIL_MAX).contains(&n) => Ok(n),
        _ => Err(format!("must be an integer in 1..={MAX_TAIL_MAX}")),
    }
}

impl Default for TailArgs {
    /// Block mode (the command line's defaults).
    fn default() -> Self {
        TailArgs {
            fec_mode: FecMode::Block,
            tail_max: DEFAULT_TAIL_MAX,
        }
    }
}

impl TailArgs {
    /// Tail mode needs a code that keeps a window of recent datagrams.
    pub fn check(&self, scheme: Scheme) -> Result<(), String> {
        if self.fec_mode == FecMode::Tail && !scheme.supports_tail() {
            return Err(format!(
                "--fec-mode tail needs the sliding-window code: --fec rlc:N,K,W (the repairs \
                 cover the last W datagrams), not --fec {scheme}"
            ));
        }
        Ok(())
    }

    /// Tail mode is single-path: the multipath adapter cannot tell each path's window room.
    pub fn check_multipath(&self, multipath: bool) -> Result<(), String> {
        if multipath && self.fec_mode == FecMode::Tail {
            return Err(
                "--fec-mode tail is single-path for now: drop --multipath or use --fec-mode block"
                    .into(),
            );
        }
        Ok(())
    }

    /// The layer's tail cap (None: block mode).
    pub fn cap(&self) -> Option<usize> {
        (self.fec_mode == FecMode::Tail).then_some(self.tail_max)
    }

    /// Tail mode leaves the window unscaled whatever `--repair-cc` says: its repairs only use
    /// room quinn left unused (module doc), so nothing is counted twice.
    pub fn scales_window(&self) -> bool {
        self.fec_mode == FecMode::Block
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(mode: FecMode) -> TailArgs {
        TailArgs {
            fec_mode: mode,
            tail_max: 3,
        }
    }

    #[test]
    fn tail_needs_the_sliding_window_code() {
        let t = args(FecMode::Tail);
        assert!(t.check("rlc:6,4,20".parse().unwrap()).is_ok());
        for bad in ["none", "xor:4", "rs:6,4"] {
            let e = t.check(bad.parse().unwrap()).unwrap_err();
            assert!(e.contains("rlc:N,K,W"), "{e}");
        }
        assert!(args(FecMode::Block).check("none".parse().unwrap()).is_ok());
    }

    #[test]
    fn tail_leaves_the_window_unscaled() {
        assert!(!args(FecMode::Tail).scales_window());
        assert!(args(FecMode::Block).scales_window());
        assert_eq!(args(FecMode::Tail).cap(), Some(3));
        assert_eq!(args(FecMode::Block).cap(), None);
        assert!(args(FecMode::Tail).check_multipath(true).is_err());
        assert!(args(FecMode::Block).check_multipath(true).is_ok());
    }
}
