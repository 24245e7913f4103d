//! The FEC scheme chosen on the command line (`--fec none|xor:K[:I]|rs:N,K|rlc:N,K,W`).

use std::fmt;
use std::str::FromStr;

use crate::frame;

/// Which code protects the datagrams, with its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// No FEC and no header: plain QUIC.
    None,
    /// One XOR repair per `k` source symbols; `interleave` blocks are interleaved, so a burst of up
    /// to `interleave` consecutive losses hits each block at most once.
    Xor { k: u16, interleave: u16 },
    /// Systematic Reed-Solomon (n, k): `n - k` repairs per block of `k` source symbols.
    ReedSolomon { n: u16, k: u16 },
    /// Sliding-window random linear code over GF(2^8): after every `k` source symbols, `n - k`
    /// repairs over the last `window` source symbols.
    Rlc { n: u16, k: u16, window: u16 },
}

const SYNTAX: &str = "expected none | xor:K | xor:K:I | rs:N,K | rlc:N,K,W \
     (e.g. xor:5, xor:5:4, rs:30,20, rlc:3,2,20; K, I, W in 1..=255, N > K, N - K <= 255)";

/// Largest value of any parameter (they travel in one byte of the repair header).
pub const MAX_PARAM: u16 = 255;

impl Scheme {
    /// The paper's defaults for each family.
    pub const RS_DEFAULT: Scheme = Scheme::ReedSolomon { n: 30, k: 20 };
    pub const RLC_DEFAULT: Scheme = Scheme::Rlc {
        n: 3,
        k: 2,
        window: 20,
    };

    /// Bytes a framed datagram can carry beyond the largest source payload, for MTU sizing: the
    /// maximum over source datagrams (header) and repair datagrams (header, length/ECN prefix and
    /// padding). 0 for `None`. Reduce the QUIC payload size by this so every datagram fits.
    pub fn header_overhead(&self) -> usize {
        match self {
            Scheme::None => 0,
            Scheme::Xor { .. } => frame::XOR_REPAIR_HEADER + frame::SYMBOL_PREFIX,
            // +1: Reed-Solomon shards have an even length.
            Scheme::ReedSolomon { .. } => frame::RS_REPAIR_HEADER + frame::SYMBOL_PREFIX + 1,
            Scheme::Rlc { .. } => frame::RLC_REPAIR_HEADER + frame::SYMBOL_PREFIX,
        }
    }

    /// Bytes the header adds to a source datagram alone (0 for `None`).
    pub fn source_header_len(&self) -> usize {
        match self {
            Scheme::None => 0,
            _ => frame::SOURCE_HEADER,
        }
    }

    /// Repair datagrams sent per source datagram in the long run (0 for `None`).
    /// Whether tail mode (repairs only when the sender goes quiet, over its last W datagrams)
    /// applies: only the sliding-window code keeps such a window.
    pub fn supports_tail(&self) -> bool {
        matches!(self, Scheme::Rlc { .. })
    }

    pub fn repair_ratio(&self) -> f64 {
        match *self {
            Scheme::None => 0.0,
            Scheme::Xor { k, .. } => 1.0 / f64::from(k),
            Scheme::ReedSolomon { n, k } | Scheme::Rlc { n, k, .. } => {
                f64::from(n - k) / f64::from(k)
            }
        }
    }

    fn validate(self) -> Result<Self, String> {
        let in_range = |name: &str, v: u16| {
            if (1..=MAX_PARAM).contains(&v) {
                Ok(())
            } else {
                Err(format!("{name} = {v} is out of range 1..=255; {SYNTAX}"))
            }
        };
        match self {
            Scheme::None => {}
            Scheme::Xor { k, interleave } => {
                in_range("K", k)?;
                in_range("I", interleave)?;
            }
            Scheme::ReedSolomon { n, k } | Scheme::Rlc { n, k, .. } => {
                in_range("K", k)?;
                if n <= k || n - k > MAX_PARAM {
                    return Err(format!("N = {n} must satisfy K < N <= K + 255; {SYNTAX}"));
                }
                if let Scheme::Rlc { window, .. } = self {
                    in_range("W", window)?;
                }
            }
        }
        Ok(self)
    }
}

fn parse_u16(what: &str, text: &str) -> Result<u16, String> {
    text.trim()
        .parse::<u16>()
        .map_err(|_| format!("{what} = {text:?} is not a number; {SYNTAX}"))
}

impl FromStr for Scheme {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim().to_ascii_lowercase();
        let (family, params) = text.split_once(':').unwrap_or((text.as_str(), ""));
        let scheme = match family {
            "none" if params.is_empty() => Scheme::None,
            "xor" => {
                let parts: Vec<&str> = params.split(':').collect();
                match parts.as_slice() {
                    [k] => Scheme::Xor {
                        k: parse_u16("K", k)?,
                        interleave: 1,
                    },
                    [k, i] => Scheme::Xor {
                        k: parse_u16("K", k)?,
                        interleave: parse_u16("I", i)?,
                    },
                    _ => return Err(format!("bad xor parameters {params:?}; {SYNTAX}")),
                }
            }
            "rs" => match params.split(',').collect::<Vec<_>>().as_slice() {
                [n, k] => Scheme::ReedSolomon {
                    n: parse_u16("N", n)?,
                    k: parse_u16("K", k)?,
                },
                [""] => Scheme::RS_DEFAULT,
                _ => return Err(format!("bad rs parameters {params:?}; {SYNTAX}")),
            },
            "rlc" => match params.split(',').collect::<Vec<_>>().as_slice() {
                [n, k, w] => Scheme::Rlc {
                    n: parse_u16("N", n)?,
                    k: parse_u16("K", k)?,
                    window: parse_u16("W", w)?,
                },
                [""] => Scheme::RLC_DEFAULT,
                _ => return Err(format!("bad rlc parameters {params:?}; {SYNTAX}")),
            },
            _ => return Err(format!("unknown FEC scheme {text:?}; {SYNTAX}")),
        };
        scheme.validate()
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scheme::None => write!(f, "none"),
            Scheme::Xor { k, interleave: 1 } => write!(f, "xor:{k}"),
            Scheme::Xor { k, interleave } => write!(f, "xor:{k}:{interleave}"),
            Scheme::ReedSolomon { n, k } => write!(f, "rs:{n},{k}"),
            Scheme::Rlc { n, k, window } => write!(f, "rlc:{n},{k},{window}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_round_trips() {
        for text in [
            "none",
            "xor:5",
            "xor:5:4",
            "rs:30,20",
            "rlc:3,2,20",
            "xor:1",
            "rs:255,1",
        ] {
            let scheme: Scheme = text.parse().unwrap();
            assert_eq!(scheme.to_string(), text);
            assert_eq!(scheme.to_string().parse::<Scheme>().unwrap(), scheme);
        }
        assert_eq!("rs".parse::<Scheme>().unwrap(), Scheme::RS_DEFAULT);
        assert_eq!("RLC".parse::<Scheme>().unwrap(), Scheme::RLC_DEFAULT);
        assert_eq!(
            "xor:5:1".parse::<Scheme>().unwrap(),
            Scheme::Xor {
                k: 5,
                interleave: 1
            }
        );
    }

    #[test]
    fn every_valid_scheme_round_trips() {
        let mut x: u32 = 1;
        let mut next = |max: u32| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 8) % max
        };
        for _ in 0..2000 {
            let k = 1 + next(255) as u16;
            let scheme = match next(4) {
                0 => Scheme::None,
                1 => Scheme::Xor {
                    k,
                    interleave: 1 + next(255) as u16,
                },
                2 => Scheme::ReedSolomon {
                    n: k + 1 + next(255) as u16,
                    k,
                },
                _ => Scheme::Rlc {
                    n: k + 1 + next(255) as u16,
                    k,
                    window: 1 + next(255) as u16,
                },
            };
            assert_eq!(scheme.to_string().parse::<Scheme>(), Ok(scheme));
        }
    }

    #[test]
    fn rejects_bad_syntax_with_explanation() {
        for text in [
            "",
            "nonee",
            "none:1",
            "xor",
            "xor:0",
            "xor:5:0",
            "xor:256",
            "xor:a",
            "xor:1:2:3",
            "rs:20,30",
            "rs:20,20",
            "rs:300,20",
            "rs:30",
            "rlc:3,2",
            "rlc:3,2,0",
            "rlc:3,2,256",
            "fec:1",
        ] {
            let err = text.parse::<Scheme>().unwrap_err();
            assert!(err.contains("expected none"), "{text}: {err}");
        }
    }

    #[test]
    fn overheads() {
        assert_eq!(Scheme::None.header_overhead(), 0);
        for text in ["xor:5", "rs:30,20", "rlc:3,2,20"] {
            let s: Scheme = text.parse().unwrap();
            assert!(s.header_overhead() >= s.source_header_len());
            assert!(s.header_overhead() <= 16);
        }
    }
}
