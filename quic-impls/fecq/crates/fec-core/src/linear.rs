//! Decoder for codes whose repairs are linear combinations of source symbols over GF(2^8):
//! XOR (all coefficients 1) and the sliding-window RLC. Pending repairs form a linear system,
//! kept in reduced row-echelon form by Gauss-Jordan elimination, so every source symbol that the
//! received repairs determine is recovered as soon as it is determined.

use crate::gf256;
use crate::window::Window;

/// `sum(coef * symbol[id]) = data` over the source symbols not known yet.
struct Equation {
    terms: Vec<(u32, u8)>,
    data: Vec<u8>,
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
        let mut data = data.to_vec();
        let mut unknown = Vec::new();
        for (id, coef) in terms {
            if window.is_stale(id) {
                return Err(Rejected::Stale);
            }
            if let Some(symbol) = window.symbol(id) {
                if symbol.len() > data.len() {
                    return Err(Rejected::Malformed);
                }
                gf256::mul_add(&mut data, symbol, coef);
            } else if window.is_delivered(id) {
                return Err(Rejected::Stale);
            } else if coef != 0 {
                unknown.push((id, coef));
            }
        }
        if unknown.is_empty() {
            return Ok(false);
        }
        unknown.sort_unstable_by_key(|&(id, _)| id);
        unknown.dedup_by_key(|&mut (id, _)| id);
        for &(id, _) in &unknown {
            window.note_missing(id);
        }
        self.equations.push(Equation {
            terms: unknown,
            data,
        });
        self.drop_old(window);
        self.reduce(recovered);
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
        let mut touched = false;
        for eq in &mut self.equations {
            if let Some(pos) = eq.terms.iter().position(|&(t, _)| t == id) {
                let (_, coef) = eq.terms.remove(pos);
                if eq.data.len() < symbol.len() {
                    eq.data.resize(symbol.len(), 0);
                }
                gf256::mul_add(&mut eq.data, symbol, coef);
                touched = true;
            }
        }
        if touched {
            self.equations.retain(|eq| !eq.terms.is_empty());
            self.drop_old(window);
            self.reduce(recovered);
        }
    }

    /// Number of pending (not yet useful) equations.
    pub fn pending(&self) -> usize {
        self.equations.len()
    }

    /// Forget equations about stale symbols, and the oldest beyond the cap.
    fn drop_old(&mut self, window: &Window) {
        let floor = window.floor();
        self.equations.retain(|eq| eq.terms[0].0 >= floor);
        if self.equations.len() > self.max_equations {
            self.equations
                .sort_by_key(|eq| eq.terms.last().map(|t| t.0));
            let excess = self.equations.len() - self.max_equations;
            self.equations.drain(..excess);
        }
    }

    /// Gauss-Jordan elimination over the pending equations; solved rows are recovered symbols.
    fn reduce(&mut self, recovered: &mut Vec<(u32, Vec<u8>)>) {
        if self.equations.is_empty() {
            return;
        }
        let mut ids: Vec<u32> = self
            .equations
            .iter()
            .flat_map(|eq| eq.terms.iter().map(|t| t.0))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let width = self
            .equations
            .iter()
            .map(|eq| eq.data.len())
            .max()
            .unwrap_or(0);
        let mut rows: Vec<(Vec<u8>, Vec<u8>)> = self
            .equations
            .drain(..)
            .map(|eq| {
                let mut coefs = vec![0u8; ids.len()];
                for (id, c) in eq.terms {
                    if let Ok(col) = ids.binary_search(&id) {
                        coefs[col] = c;
                    }
                }
                let mut data = eq.data;
                data.resize(width, 0);
                (coefs, data)
            })
            .collect();

        let mut rank = 0;
        for col in 0..ids.len() {
            let Some(pivot) = (rank..rows.len()).find(|&r| rows[r].0[col] != 0) else {
                continue;
            };
            rows.swap(rank, pivot);
            let inv = gf256::inv(rows[rank].0[col]);
            gf256::scale(&mut rows[rank].0, inv);
            gf256::scale(&mut rows[rank].1, inv);
            let (pivot_row, others) = {
                let (head, tail) = rows.split_at_mut(rank);
                let (p, rest) = tail.split_first_mut().expect("rank < rows.len()");
                (p, head.iter_mut().chain(rest.iter_mut()))
            };
            for row in others {
                let c = row.0[col];
                if c != 0 {
                    gf256::mul_add(&mut row.0, &pivot_row.0, c);
                    gf256::mul_add(&mut row.1, &pivot_row.1, c);
                }
            }
            rank += 1;
        }
        // Rows past the rank are all-zero: repairs that carried nothing new.
        rows.truncate(rank);
        for (coefs, data) in rows {
            let terms: Vec<(u32, u8)> = ids
                .iter()
                .zip(&coefs)
                .filter(|&(_, &c)| c != 0)
                .map(|(&id, &c)| (id, c))
                .collect();
            if terms.len() == 1 {
                recovered.push((terms[0].0, data));
            } else {
                self.equations.push(Equation { terms, data });
            }
        }
    }
}
