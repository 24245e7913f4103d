//! Decoder for codes whose repairs are linear combinations of source symbols over GF(2^8):
//! XOR (all coefficients 1) and the sliding-window RLC.
//!
//! Pending repairs (those with unknown symbols left) form a linear system kept in reduced
//! row-echelon form: each equation has a pivot symbol that appears in no other equation. Adding
//! an equation or learning a symbol costs O(equations × symbol size), and a symbol is recovered
//! as soon as the received repairs determine it (its equation is down to one term).

use crate::gf256;
use crate::window::Window;

/// `sum(coef * symbol[id]) = data` over source symbols not known yet; `terms` sorted by id,
/// coefficients non-zero, and `terms[pivot]` has coefficient 1.
struct Equation {
    terms: Vec<(u32, u8)>,
    data: Vec<u8>,
    pivot: u32,
}

impl Equation {
    fn coef(&self, id: u32) -> u8 {
        self.terms
            .binary_search_by_key(&id, |t| t.0)
            .map_or(0, |i| self.terms[i].1)
    }

    /// `self += c * other`.
    fn add_scaled(&mut self, other: &Equation, c: u8) {
        let mut merged = Vec::with_capacity(self.terms.len() + other.terms.len());
        let (mut a, mut b) = (self.terms.iter().peekable(), other.terms.iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(&&(ia, ca)), Some(&&(ib, cb))) if ia == ib => {
                    a.next();
                    b.next();
                    (ia, ca ^ gf256::mul(c, cb))
                }
                (Some(&&(ia, ca)), Some(&&(ib, _))) if ia < ib => {
                    a.next();
                    (ia, ca)
                }
                (Some(_), Some(&&(ib, cb))) | (None, Some(&&(ib, cb))) => {
                    b.next();
                    (ib, gf256::mul(c, cb))
                }
                (Some(&&(ia, ca)), None) => {
                    a.next();
                    (ia, ca)
                }
                (None, None) => break,
            };
            if next.1 != 0 {
                merged.push(next);
            }
        }
        self.terms = merged;
        if self.data.len() < other.data.len() {
            self.data.resize(other.data.len(), 0);
        }
        gf256::mul_add(&mut self.data, &other.data, c);
    }

    /// Make `id` the pivot (coefficient 1).
    fn set_pivot(&mut self, id: u32) {
        let inv = gf256::inv(self.coef(id));
        for t in &mut self.terms {
            t.1 = gf256::mul(t.1, inv);
        }
        gf256::scale(&mut self.data, inv);
        self.pivot = id;
    }
}

pub(crate) struct LinearDecoder {
    equations: Vec<Equation>,
    max_equations: usize,
}

/// Why a repair was not used.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Rejected {
    /// It covers symbols the window no longer holds (a very late repair): ignored.
    Stale,
    /// Its data is shorter than a symbol it covers: not what an honest encoder sends.
    Malformed,
}

impl LinearDecoder {
    pub fn new(max_equations: usize) -> Self {
        LinearDecoder {
            equations: Vec::new(),
            max_equations,
        }
    }

    /// Add one repair covering `terms`; pushes `(id, padded symbol)` of every source it lets
    /// recover. Returns whether it carried any new information.
    pub fn add_repair(
        &mut self,
        window: &mut Window,
        terms: impl Iterator<Item = (u32, u8)>,
        data: &[u8],
        recovered: &mut Vec<(u32, Vec<u8>)>,
    ) -> Result<bool, Rejected> {
        // First find the unknowns: a repair over symbols all delivered costs no arithmetic.
        let mut known = Vec::new();
        let mut unknown = Vec::new();
        for (id, coef) in terms {
            if window.is_stale(id) {
                return Err(Rejected::Stale);
            }
            if window.symbol(id).is_some() {
                known.push((id, coef));
            } else if window.is_delivered(id) {
                return Err(Rejected::Stale);
            } else if coef != 0 {
                unknown.push((id, coef));
            }
        }
        if unknown.is_empty() {
            return Ok(false);
        }
        let mut data = data.to_vec();
        for (id, coef) in known {
            let symbol = window.symbol(id).unwrap_or_default();
            if symbol.len() > data.len() {
                return Err(Rejected::Malformed);
            }
            gf256::mul_add(&mut data, symbol, coef);
        }
        unknown.sort_unstable_by_key(|&(id, _)| id);
        unknown.dedup_by_key(|&mut (id, _)| id);
        for &(id, _) in &unknown {
            window.note_missing(id);
        }
        let pivot = unknown[0].0;
        let mut eq = Equation {
            terms: unknown,
            data,
            pivot,
        };
        // Eliminate the existing pivots from the new equation.
        for row in &self.equations {
            let c = eq.coef(row.pivot);
            if c != 0 {
                eq.add_scaled(row, c);
            }
        }
        let Some(&(pivot, _)) = eq.terms.first() else {
            return Ok(false); // a combination of repairs already held
        };
        eq.pivot = pivot;
        self.insert(eq);
        self.drop_old(window);
        self.take_solved(recovered);
        Ok(true)
    }

    /// A source symbol arrived: substitute it into the pending equations and recover what that
    /// determines.
    pub fn add_source(
        &mut self,
        window: &Window,
        id: u32,
        symbol: &[u8],
        recovered: &mut Vec<(u32, Vec<u8>)>,
    ) {
        let mut orphans = Vec::new();
        let mut touched = false;
        let mut i = 0;
        while i < self.equations.len() {
            let eq = &mut self.equations[i];
            if let Ok(pos) = eq.terms.binary_search_by_key(&id, |t| t.0) {
                let (_, coef) = eq.terms.remove(pos);
                if eq.data.len() < symbol.len() {
                    eq.data.resize(symbol.len(), 0);
                }
                gf256::mul_add(&mut eq.data, symbol, coef);
                touched = true;
                if eq.pivot == id {
                    // It lost its pivot: re-insert it so it gets a new one.
                    orphans.push(self.equations.swap_remove(i));
                    continue;
                }
            }
            i += 1;
        }
        for eq in orphans {
            if let Some(&(pivot, _)) = eq.terms.first() {
                let mut eq = eq;
                eq.pivot = pivot;
                self.insert(eq);
            }
        }
        if touched {
            self.drop_old(window);
            self.take_solved(recovered);
        }
    }

    /// Number of pending (not yet useful) equations.
    pub fn pending(&self) -> usize {
        self.equations.len()
    }

    /// The most `state_bytes` can reach: `max_equations` rows of at most `max_terms` terms and
    /// `max_data` bytes.
    pub fn state_limit(&self, max_terms: usize, max_data: usize) -> usize {
        self.max_equations * (max_data + 8 * max_terms + 64)
    }

    /// Bytes held by the pending equations.
    pub fn state_bytes(&self) -> usize {
        self.equations
            .iter()
            .map(|eq| eq.data.len() + 8 * eq.terms.len() + 64)
            .sum()
    }

    /// Insert an equation free of the other equations' pivots: normalise it on its pivot and
    /// eliminate that pivot from the others.
    fn insert(&mut self, mut eq: Equation) {
        eq.set_pivot(eq.pivot);
        for row in &mut self.equations {
            let c = row.coef(eq.pivot);
            if c != 0 {
                row.add_scaled(&eq, c);
            }
        }
        self.equations.push(eq);
    }

    /// Equations down to one term are recovered symbols (their coefficient is the pivot's, 1).
    fn take_solved(&mut self, recovered: &mut Vec<(u32, Vec<u8>)>) {
        let mut i = 0;
        while i < self.equations.len() {
            if self.equations[i].terms.len() == 1 {
                let eq = self.equations.swap_remove(i);
                recovered.push((eq.pivot, eq.data));
            } else {
                i += 1;
            }
        }
    }

    /// Forget equations about stale symbols, and the oldest beyond the cap.
    fn drop_old(&mut self, window: &Window) {
        let floor = window.floor();
        self.equations
            .retain(|eq| eq.terms.first().is_some_and(|t| t.0 >= floor));
        if self.equations.len() > self.max_equations {
            self.equations
                .sort_by_key(|eq| eq.terms.last().map(|t| t.0));
            let excess = self.equations.len() - self.max_equations;
            self.equations.drain(..excess);
        }
    }
}
