//! Deterministic in-process loss for `fecq loopback`: a seeded decision per wire datagram.

use std::str::FromStr;

/// Which loss process decides the fate of each datagram.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LossModel {
    /// Each datagram is lost independently with probability `p`.
    Uniform,
    /// Two-state Gilbert model: losses come in bursts of mean length `burst_len`, long-run rate `p`.
    Burst,
}

impl FromStr for LossModel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uniform" => Ok(LossModel::Uniform),
            "burst" => Ok(LossModel::Burst),
            _ => Err(format!(
                "unknown loss model {s:?} (allowed: uniform, burst)"
            )),
        }
    }
}

/// splitmix64: tiny, seedable, and identical on every platform.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A seeded loss process; `lose()` is called once per datagram put on the wire.
#[derive(Clone, Debug)]
pub struct LossProcess {
    rng: SplitMix64,
    model: LossModel,
    p: f64,
    /// Gilbert transition probabilities (good -> bad, bad -> good); every datagram in bad is lost.
    p_enter: f64,
    p_leave: f64,
    in_burst: bool,
    /// With `at_indices`: the 0-based datagram indices to drop, sorted; `index` counts datagrams.
    drop_at: Vec<u64>,
    index: u64,
    /// Send-rate limit of the simulated link, in bits per second (`fecq loopback --rate-mbit`):
    /// the FEC socket then queues datagrams and releases them at this rate (crate::socket).
    pub rate_bps: Option<f64>,
}

impl LossProcess {
    pub fn new(model: LossModel, p: f64, burst_len: f64, seed: u64) -> Self {
        let p = p.clamp(0.0, 1.0);
        let burst_len = burst_len.max(1.0);
        // Stationary loss rate of the Gilbert chain is p_enter / (p_enter + p_leave) = p.
        let p_leave = 1.0 / burst_len;
        let p_enter = if p >= 1.0 {
            1.0
        } else {
            (p * p_leave / (1.0 - p)).min(1.0)
        };
        LossProcess {
            rng: SplitMix64::new(seed),
            model,
            p,
            p_enter,
            p_leave,
            in_burst: false,
            drop_at: Vec::new(),
            index: 0,
            rate_bps: None,
        }
    }

    /// Drop exactly the datagrams at these 0-based indices (for tests that need a known pattern).
    pub fn at_indices(mut indices: Vec<u64>) -> Self {
        indices.sort_unstable();
        LossProcess {
            drop_at: indices,
            ..LossProcess::new(LossModel::Uniform, 0.0, 1.0, 0)
        }
    }

    /// Also limit the send rate to `bps` bits per second.
    pub fn with_rate(mut self, bps: Option<f64>) -> Self {
        self.rate_bps = bps;
        self
    }

    pub fn lose(&mut self) -> bool {
        if !self.drop_at.is_empty() {
            self.index += 1;
            return self.drop_at.binary_search(&(self.index - 1)).is_ok();
        }
        match self.model {
            LossModel::Uniform => self.p > 0.0 && self.rng.next_f64() < self.p,
            LossModel::Burst => {
                let u = self.rng.next_f64();
                self.in_burst = if self.in_burst {
                    u >= self.p_leave
                } else {
                    u < self.p_enter
                };
                self.in_burst
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(model: LossModel, p: f64, seed: u64, n: usize) -> Vec<bool> {
        let mut lp = LossProcess::new(model, p, 4.0, seed);
        (0..n).map(|_| lp.lose()).collect()
    }

    #[test]
    fn same_seed_same_pattern() {
        assert_eq!(
            run(LossModel::Burst, 0.05, 7, 5000),
            run(LossModel::Burst, 0.05, 7, 5000)
        );
        assert_ne!(
            run(LossModel::Uniform, 0.05, 7, 5000),
            run(LossModel::Uniform, 0.05, 8, 5000)
        );
    }

    #[test]
    fn long_run_rate_and_burstiness() {
        let n = 200_000;
        for model in [LossModel::Uniform, LossModel::Burst] {
            let v = run(model, 0.05, 1, n);
            let rate = v.iter().filter(|&&l| l).count() as f64 / n as f64;
            assert!((rate - 0.05).abs() < 0.01, "{model:?} rate {rate}");
        }
        let v = run(LossModel::Burst, 0.05, 1, n);
        let bursts = v.windows(2).filter(|w| !w[0] && w[1]).count();
        let lost = v.iter().filter(|&&l| l).count();
        let mean_burst = lost as f64 / bursts as f64;
        assert!((mean_burst - 4.0).abs() < 0.5, "mean burst {mean_burst}");
        assert!(run(LossModel::Uniform, 0.0, 1, 1000).iter().all(|&l| !l));
    }

    #[test]
    fn at_indices_drops_exactly_those() {
        let mut lp = LossProcess::at_indices(vec![5, 2]);
        let lost: Vec<usize> = (0..10).filter(|_| lp.lose()).collect();
        assert_eq!(lost, vec![2, 5]);
    }
}
