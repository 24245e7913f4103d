//! Wire framing of protected datagrams (all integers big-endian).
//!
//! Every datagram of a FEC scheme (not `none`) starts with one byte
//! `kind << 4 | ecn` (bits 3..2 reserved, zero), followed by:
//!
//! | kind | meaning      | rest of header                                        | size |
//! |------|--------------|-------------------------------------------------------|------|
//! | 1    | source       | symbol id u32, then the payload as is                 | 5    |
//! | 2    | XOR repair   | first id u32, count u8, stride u8                      | 7    |
//! | 3    | RS repair    | block first id u32, k u8, r u8, repair index u8        | 8    |
//! | 4    | RLC repair   | repair id u32, first id u32, count u8                  | 10   |
//! | 5    | plain        | nothing: the payload as is, not a source symbol        | 1    |
//!
//! A *plain* datagram is one the sender chose not to protect (fecq: a QUIC packet without
//! application data, e.g. handshake or ACK-only): it is delivered as received, numbers no symbol
//! and no repair covers it. Source symbol ids count the source datagrams of a connection direction
//! from 0. A repair covers
//! the source ids `first + i * stride` (XOR), `first .. first + k` (RS) or `first .. first + count`
//! (RLC); RLC coefficients derive from the repair id, so they are not sent.
//!
//! The protected *symbol* of a source datagram is `[ecn u8][len u16][payload]`, zero-padded to the
//! repair's length; a repair's data is the code applied to those padded symbols, so a recovered
//! datagram gets back its exact length and its ECN codepoint. The `ecn` bits of a repair's first
//! byte are zero.

/// Source datagram header: kind/ECN byte + symbol id.
pub const SOURCE_HEADER: usize = 5;
pub const XOR_REPAIR_HEADER: usize = 7;
pub const RS_REPAIR_HEADER: usize = 8;
pub const RLC_REPAIR_HEADER: usize = 10;
/// Plain (unprotected) datagram header: the kind/ECN byte alone.
pub const PLAIN_HEADER: usize = 1;
/// `[ecn][len u16]` in front of the payload inside a protected symbol.
pub const SYMBOL_PREFIX: usize = 3;

const KIND_SOURCE: u8 = 1;
const KIND_XOR: u8 = 2;
const KIND_RS: u8 = 3;
const KIND_RLC: u8 = 4;
const KIND_PLAIN: u8 = 5;

/// A parsed datagram, borrowing its payload or repair data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    Source {
        id: u32,
        ecn: u8,
        payload: &'a [u8],
    },
    /// Not protected: delivered as is, no symbol id.
    Plain {
        ecn: u8,
        payload: &'a [u8],
    },
    XorRepair {
        first: u32,
        count: u8,
        stride: u8,
        data: &'a [u8],
    },
    RsRepair {
        first: u32,
        k: u8,
        r: u8,
        index: u8,
        data: &'a [u8],
    },
    RlcRepair {
        repair_id: u32,
        first: u32,
        count: u8,
        data: &'a [u8],
    },
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// Parse a datagram; `None` if it is truncated or its first byte is not a known kind.
/// Repairs must carry at least a symbol prefix of data and have non-zero counts.
pub fn parse(datagram: &[u8]) -> Option<Frame<'_>> {
    let first_byte = *datagram.first()?;
    let kind = first_byte >> 4;
    let ecn = first_byte & 0b11;
    if first_byte & 0b1100 != 0 || (kind != KIND_SOURCE && kind != KIND_PLAIN && ecn != 0) {
        return None;
    }
    if kind == KIND_PLAIN {
        return Some(Frame::Plain {
            ecn,
            payload: &datagram[PLAIN_HEADER..],
        });
    }
    let header = match kind {
        KIND_SOURCE => SOURCE_HEADER,
        KIND_XOR => XOR_REPAIR_HEADER,
        KIND_RS => RS_REPAIR_HEADER,
        KIND_RLC => RLC_REPAIR_HEADER,
        _ => return None,
    };
    if datagram.len() < header {
        return None;
    }
    let rest = &datagram[header..];
    if kind != KIND_SOURCE && rest.len() < SYMBOL_PREFIX {
        return None;
    }
    let frame = match kind {
        KIND_SOURCE => Frame::Source {
            id: u32_at(datagram, 1),
            ecn,
            payload: rest,
        },
        KIND_XOR => Frame::XorRepair {
            first: u32_at(datagram, 1),
            count: datagram[5],
            stride: datagram[6],
            data: rest,
        },
        KIND_RS => Frame::RsRepair {
            first: u32_at(datagram, 1),
            k: datagram[5],
            r: datagram[6],
            index: datagram[7],
            data: rest,
        },
        _ => Frame::RlcRepair {
            repair_id: u32_at(datagram, 1),
            first: u32_at(datagram, 5),
            count: datagram[9],
            data: rest,
        },
    };
    let counts_ok = match frame {
        Frame::XorRepair { count, stride, .. } => count > 0 && stride > 0,
        Frame::RsRepair { k, r, index, .. } => k > 0 && r > 0 && index < r,
        Frame::RlcRepair { count, .. } => count > 0,
        Frame::Source { .. } | Frame::Plain { .. } => true,
    };
    counts_ok.then_some(frame)
}

/// Frame a source datagram.
pub fn source(id: u32, ecn: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SOURCE_HEADER + payload.len());
    out.push(KIND_SOURCE << 4 | (ecn & 0b11));
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Frame a plain (unprotected) datagram: the payload behind one kind/ECN byte.
pub fn plain(ecn: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PLAIN_HEADER + payload.len());
    out.push(KIND_PLAIN << 4 | (ecn & 0b11));
    out.extend_from_slice(payload);
    out
}

pub fn xor_repair(first: u32, count: u8, stride: u8, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(XOR_REPAIR_HEADER + data.len());
    out.push(KIND_XOR << 4);
    out.extend_from_slice(&first.to_be_bytes());
    out.extend_from_slice(&[count, stride]);
    out.extend_from_slice(data);
    out
}

pub fn rs_repair(first: u32, k: u8, r: u8, index: u8, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(RS_REPAIR_HEADER + data.len());
    out.push(KIND_RS << 4);
    out.extend_from_slice(&first.to_be_bytes());
    out.extend_from_slice(&[k, r, index]);
    out.extend_from_slice(data);
    out
}

pub fn rlc_repair(repair_id: u32, first: u32, count: u8, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(RLC_REPAIR_HEADER + data.len());
    out.push(KIND_RLC << 4);
    out.extend_from_slice(&repair_id.to_be_bytes());
    out.extend_from_slice(&first.to_be_bytes());
    out.push(count);
    out.extend_from_slice(data);
    out
}

/// The protected symbol of a source datagram: `[ecn][len u16][payload]` (unpadded).
/// Payloads longer than 65535 bytes cannot be UDP datagrams; their length is clamped.
pub fn symbol(ecn: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SYMBOL_PREFIX + payload.len());
    write_symbol(&mut out, ecn, payload);
    out
}

/// [`symbol`] written into a reused buffer (its old content is discarded).
pub fn write_symbol(out: &mut Vec<u8>, ecn: u8, payload: &[u8]) {
    let payload = &payload[..payload.len().min(usize::from(u16::MAX))];
    out.clear();
    out.push(ecn & 0b11);
    out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    out.extend_from_slice(payload);
}

/// Read back a (possibly padded) symbol: `(ecn, payload)`, or `None` if the prefix is
/// inconsistent or the padding is not zero (a corrupt or wrongly decoded symbol).
pub fn unpack_symbol(symbol: &[u8]) -> Option<(u8, &[u8])> {
    if symbol.len() < SYMBOL_PREFIX || symbol[0] > 0b11 {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([symbol[1], symbol[2]]));
    let end = SYMBOL_PREFIX.checked_add(len)?;
    if end > symbol.len() || symbol[end..].iter().any(|&b| b != 0) {
        return None;
    }
    Some((symbol[0], &symbol[SYMBOL_PREFIX..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let d = source(7, 2, b"hello");
        assert_eq!(d.len(), SOURCE_HEADER + 5);
        assert_eq!(
            parse(&d),
            Some(Frame::Source {
                id: 7,
                ecn: 2,
                payload: b"hello"
            })
        );
        let d = plain(1, b"ack");
        assert_eq!(d.len(), PLAIN_HEADER + 3);
        assert_eq!(
            parse(&d),
            Some(Frame::Plain {
                ecn: 1,
                payload: b"ack"
            })
        );
        assert_eq!(
            parse(&plain(0, b"")),
            Some(Frame::Plain {
                ecn: 0,
                payload: b""
            })
        );
        let d = xor_repair(10, 5, 4, b"abc");
        assert_eq!(
            parse(&d),
            Some(Frame::XorRepair {
                first: 10,
                count: 5,
                stride: 4,
                data: b"abc"
            })
        );
        let d = rs_repair(20, 20, 10, 9, b"xyz");
        assert!(matches!(parse(&d), Some(Frame::RsRepair { index: 9, .. })));
        let d = rlc_repair(3, 40, 20, b"xyz");
        assert!(matches!(
            parse(&d),
            Some(Frame::RlcRepair {
                repair_id: 3,
                first: 40,
                count: 20,
                ..
            })
        ));
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(parse(&[]), None);
        assert_eq!(parse(&[0x10, 0, 0]), None);
        assert_eq!(parse(&[0x00, 0, 0, 0, 0]), None);
        assert_eq!(parse(&[0x14, 0, 0, 0, 0]), None);
        assert_eq!(parse(&[0x54, 1]), None); // plain with reserved bits set
        assert_eq!(parse(&[0x60, 1]), None); // no kind 6
        assert_eq!(parse(&rs_repair(0, 2, 1, 1, b"abc")), None); // index >= r
        assert_eq!(parse(&xor_repair(0, 0, 1, b"abc")), None);
        assert_eq!(parse(&xor_repair(0, 1, 1, b"ab")), None); // shorter than a prefix
    }

    #[test]
    fn symbols_round_trip_with_padding() {
        let mut s = symbol(3, b"payload");
        assert_eq!(unpack_symbol(&s), Some((3, &b"payload"[..])));
        s.extend_from_slice(&[0, 0, 0]);
        assert_eq!(unpack_symbol(&s), Some((3, &b"payload"[..])));
        s.push(1);
        assert_eq!(unpack_symbol(&s), None);
        assert_eq!(unpack_symbol(&[0, 0, 9, 1]), None);
    }
}
