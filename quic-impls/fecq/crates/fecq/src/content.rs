//! What the stack put in a QUIC datagram, for `--fec-protect stream` (crate::layer's
//! [`Protect`](crate::layer::Protect)) and for the qlog's `fecq:datagram_sent` (`app_data`: a
//! [`Content::Data`] datagram; crate::options::qlog): the FEC layer sees datagrams only after
//! QUIC encrypted them, so what they carry is read where the stack encrypts them.
//!
//! Each stack's crypto glue (quinn_stack::crypto, noq_stack::crypto) wraps the packet keys QUIC
//! seals its packets with: before a packet is sealed, [`carries_app_data`] walks its plaintext
//! frames; after, a packet that carries no application data is recorded in the endpoint's
//! [`SentPackets`] under its AEAD tag (its last 16 bytes, which header protection leaves alone).
//! When the datagram reaches the socket, [`SentPackets::take`] looks its last 16 bytes up: the
//! last packet of a datagram is the one that can carry application data (short-header 1-RTT
//! packets come last when QUIC coalesces; fecq uses no 0-RTT), so a datagram whose last packet was
//! recorded is [`Content::Control`], any other [`Content::Data`]: a packet whose frames the walk
//! does not know, or that was never seen (a stateless reset), stays protected as before.
//!
//! IO-free and stack-independent: the frame types and their encodings are RFC 9000's (+ DATAGRAM,
//! RFC 9221; ACK_FREQUENCY and IMMEDIATE_ACK, draft-ietf-quic-ack-frequency), noq's multipath
//! frames (draft-ietf-quic-multipath, the code points noq 1.4 sends) and noq's address discovery
//! and NAT traversal frames.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

pub use crate::layer::Content;

/// Bytes of the AEAD tag that ends every QUIC packet (AES-GCM and ChaCha20-Poly1305 alike).
pub const TAG_LEN: usize = 16;

/// Packets recorded and not yet taken that are kept at most: the socket takes each one right
/// after the stack sealed it (same thread, under the connection's lock), so only packets that
/// never reached the socket stay; beyond this the oldest are forgotten.
const KEEP: usize = 4096;

/// A QUIC variable-length integer reader over a packet's plaintext.
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn var(&mut self) -> Option<u64> {
        let first = *self.b.first()?;
        let len = 1usize << (first >> 6);
        let bytes = self.b.get(..len)?;
        let mut v = u64::from(first & 0x3f);
        for &b in &bytes[1..] {
            v = v << 8 | u64::from(b);
        }
        self.b = &self.b[len..];
        Some(v)
    }

    fn vars(&mut self, n: usize) -> Option<()> {
        for _ in 0..n {
            self.var()?;
        }
        Some(())
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        self.b = self.b.get(n..)?;
        Some(())
    }

    /// A length (varint) and that many bytes.
    fn skip_len(&mut self) -> Option<()> {
        let n = usize::try_from(self.var()?).ok()?;
        self.skip(n)
    }

    /// An ACK frame's body after its type: largest, delay, ranges, ECN counts if `ecn`.
    fn ack(&mut self, ecn: bool) -> Option<()> {
        self.vars(2)?;
        let ranges = self.var()?;
        // First range, then a gap and a range per further range; each takes a byte at least.
        if ranges > self.b.len() as u64 {
            return None;
        }
        self.vars(1 + 2 * ranges as usize)?;
        if ecn {
            self.vars(3)?;
        }
        Some(())
    }

    /// NEW_CONNECTION_ID (and PATH_NEW_CONNECTION_ID with `path`): [path id,] sequence, retire
    /// prior to, length u8, connection id, 16-byte reset token.
    fn new_cid(&mut self, path: bool) -> Option<()> {
        self.vars(2 + usize::from(path))?;
        let len = usize::from(*self.b.first()?);
        self.skip(1 + len + 16)
    }
}

/// Whether a packet's plaintext frames carry application data: a STREAM (0x08–0x0f) or DATAGRAM
/// (0x30, 0x31) frame. `Some(false)`: every frame read and none of them does (handshake CRYPTO,
/// ACK, PING, PADDING, flow control and other control frames); `None`: a frame type this walk
/// does not know, or a truncated frame (the caller then protects the packet).
pub fn carries_app_data(plaintext: &[u8]) -> Option<bool> {
    let mut r = Reader { b: plaintext };
    while !r.b.is_empty() {
        match r.var()? {
            // PADDING, PING, HANDSHAKE_DONE, IMMEDIATE_ACK
            0x00 | 0x01 | 0x1e | 0x1f => {}
            0x02 => r.ack(false)?,
            0x03 => r.ack(true)?,
            // RESET_STREAM
            0x04 => r.vars(3)?,
            // STOP_SENDING, MAX_STREAM_DATA, STREAM_DATA_BLOCKED
            0x05 | 0x11 | 0x15 => r.vars(2)?,
            // CRYPTO: offset, length, data
            0x06 => {
                r.var()?;
                r.skip_len()?
            }
            // NEW_TOKEN
            0x07 => r.skip_len()?,
            // STREAM
            0x08..=0x0f => return Some(true),
            // MAX_DATA, MAX_STREAMS, DATA_BLOCKED, STREAMS_BLOCKED, RETIRE_CONNECTION_ID
            0x10 | 0x12 | 0x13 | 0x14 | 0x16 | 0x17 | 0x19 => r.vars(1)?,
            0x18 => r.new_cid(false)?,
            // PATH_CHALLENGE, PATH_RESPONSE
            0x1a | 0x1b => r.skip(8)?,
            // CONNECTION_CLOSE: error, frame type, reason; APPLICATION_CLOSE: error, reason
            0x1c => {
                r.vars(2)?;
                r.skip_len()?
            }
            0x1d => {
                r.var()?;
                r.skip_len()?
            }
            // DATAGRAM
            0x30 | 0x31 => return Some(true),
            // ACK_FREQUENCY: sequence, threshold, max ack delay, reordering threshold
            0xaf => r.vars(4)?,
            // Multipath: PATH_ACK (path id, then an ACK body)
            0x3e => {
                r.var()?;
                r.ack(false)?
            }
            0x3f => {
                r.var()?;
                r.ack(true)?
            }
            // PATH_ABANDON, PATH_STATUS_BACKUP / AVAILABLE, PATH_RETIRE_CONNECTION_ID,
            // PATH_CIDS_BLOCKED: path id and one more varint each
            0x3e75 | 0x3e76 | 0x3e77 | 0x3e79 | 0x3e7c => r.vars(2)?,
            0x3e78 => r.new_cid(true)?,
            // MAX_PATH_ID, PATHS_BLOCKED
            0x3e7a | 0x3e7b => r.vars(1)?,
            // OBSERVED_ADDRESS, ADD_ADDRESS, REACH_OUT (IPv4 / IPv6): a varint, address, port
            0x9f81a6 | 0x3d7f90 | 0x3d7f92 => {
                r.var()?;
                r.skip(4 + 2)?
            }
            0x9f81a7 | 0x3d7f91 | 0x3d7f93 => {
                r.var()?;
                r.skip(16 + 2)?
            }
            // REMOVE_ADDRESS
            0x3d7f94 => r.vars(1)?,
            _ => return None,
        }
    }
    Some(false)
}

/// The packets a stack sealed that carry no application data, by AEAD tag, until the socket
/// sends them (module doc). One per endpoint, shared by its connections.
#[derive(Debug, Default)]
pub struct SentPackets {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    control: HashSet<[u8; TAG_LEN]>,
    /// Recording order, to forget the oldest beyond [`KEEP`] (entries already taken included).
    order: VecDeque<[u8; TAG_LEN]>,
}

fn tag_of(packet: &[u8]) -> Option<[u8; TAG_LEN]> {
    let at = packet.len().checked_sub(TAG_LEN)?;
    packet[at..].try_into().ok()
}

impl SentPackets {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the packet about to be sealed (its plaintext payload, after the header and before
    /// the tag's room) must be recorded: it carries no application data.
    pub fn is_control(plaintext: &[u8]) -> bool {
        carries_app_data(plaintext) == Some(false)
    }

    /// Record a sealed packet (header, ciphertext, tag) that carries no application data.
    pub fn record_control(&self, sealed: &[u8]) {
        let Some(tag) = tag_of(sealed) else {
            return;
        };
        let mut t = self.table.lock().unwrap();
        t.control.insert(tag);
        t.order.push_back(tag);
        while t.order.len() > KEEP {
            if let Some(old) = t.order.pop_front() {
                t.control.remove(&old);
            }
        }
    }

    /// What the datagram the stack hands the socket carries, judged by its last packet (module
    /// doc); its record, if any, is forgotten.
    pub fn take(&self, datagram: &[u8]) -> Content {
        let Some(tag) = tag_of(datagram) else {
            return Content::Data;
        };
        let mut t = self.table.lock().unwrap();
        if t.control.is_empty() {
            return Content::Data;
        }
        if t.control.remove(&tag) {
            Content::Control
        } else {
            Content::Data
        }
    }

    /// Packets recorded and not yet taken (tests).
    pub fn pending(&self) -> usize {
        self.table.lock().unwrap().control.len()
    }
}

/// A stack's packet key, wrapped: what every stack's crypto glue does around its sealing call
/// (`seal` is the stack's own `encrypt`): walk the plaintext `buf[header_len..len − tag_len]`
/// first, record the packet after.
#[inline]
pub fn seal_and_record(
    packets: &SentPackets,
    buf: &mut [u8],
    header_len: usize,
    tag_len: usize,
    seal: impl FnOnce(&mut [u8]),
) {
    let end = buf.len().saturating_sub(tag_len);
    let control = buf
        .get(header_len..end)
        .is_some_and(SentPackets::is_control);
    seal(buf);
    if control {
        packets.record_control(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A varint of `v` in its shortest encoding.
    fn var(v: u64, out: &mut Vec<u8>) {
        match v {
            0..=0x3f => out.push(v as u8),
            0x40..=0x3fff => out.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes()),
            0x4000..=0x3fff_ffff => {
                out.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes())
            }
            _ => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
        }
    }

    fn frames(parts: &[&[u64]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in parts {
            for &v in *p {
                var(v, &mut out);
            }
        }
        out
    }

    fn ack(largest: u64) -> Vec<u8> {
        // ACK: largest, delay 10, 1 more range, first range 2, gap 1, range 0
        frames(&[&[0x02, largest, 10, 1, 2, 1, 0]])
    }

    fn crypto(len: usize) -> Vec<u8> {
        let mut f = frames(&[&[0x06, 0, len as u64]]);
        f.extend(std::iter::repeat_n(0xab, len));
        f
    }

    fn stream(data: &[u8]) -> Vec<u8> {
        // STREAM with OFF and LEN bits: id 0, offset 5, length
        let mut f = frames(&[&[0x0e, 0, 5, data.len() as u64]]);
        f.extend_from_slice(data);
        f
    }

    #[test]
    fn handshake_ack_and_control_packets_carry_no_app_data() {
        let ack_ecn = frames(&[&[0x03, 1000, 3, 0, 7, 100, 0, 2]]);
        let mut new_cid = frames(&[&[0x18, 4, 1]]);
        new_cid.push(8);
        new_cid.extend_from_slice(&[0xcc; 8 + 16]);
        let mut close = frames(&[&[0x1c, 0x0a, 0x08, 3]]);
        close.extend_from_slice(b"bye");
        let mut token = frames(&[&[0x07, 4]]);
        token.extend_from_slice(&[1, 2, 3, 4]);
        let mut challenge = frames(&[&[0x1a]]);
        challenge.extend_from_slice(&[9; 8]);
        let cases: Vec<(&str, Vec<u8>)> = vec![
            // A server's Initial (ACK + CRYPTO), Handshake (CRYPTO), padded client Initial.
            ("initial", [ack(0), crypto(90)].concat()),
            ("handshake", crypto(1000)),
            ("padded initial", [crypto(280), vec![0; 900]].concat()),
            ("ack only", ack(70_000)),
            ("ack with ecn", ack_ecn),
            ("ping", frames(&[&[0x01]])),
            (
                "handshake done + new token",
                [frames(&[&[0x1e]]), token].concat(),
            ),
            (
                "flow control",
                frames(&[&[0x10, 1 << 20], &[0x11, 4, 1 << 30], &[0x12, 100]]),
            ),
            ("blocked", frames(&[&[0x14, 9], &[0x15, 4, 9], &[0x17, 3]])),
            ("new connection id", new_cid),
            ("retire connection id", frames(&[&[0x19, 2]])),
            ("path challenge", challenge),
            ("close", close),
            (
                "ack frequency",
                frames(&[&[0xaf, 1, 10, 25_000, 2], &[0x1f]]),
            ),
            ("reset + stop", frames(&[&[0x04, 4, 0, 100], &[0x05, 4, 0]])),
            // noq's multipath control: PATH_ACK, PATH_STATUS_AVAILABLE, MAX_PATH_ID.
            (
                "multipath",
                frames(&[&[0x3e, 1, 50, 10, 0, 3], &[0x3e77, 1, 2], &[0x3e7a, 16]]),
            ),
            (
                "observed address",
                [frames(&[&[0x9f81a6, 1]]), vec![10, 0, 0, 1, 1, 187]].concat(),
            ),
        ];
        for (name, plaintext) in cases {
            assert_eq!(carries_app_data(&plaintext), Some(false), "{name}");
        }
    }

    #[test]
    fn stream_and_datagram_frames_are_app_data_wherever_they_come() {
        let mut dgram = frames(&[&[0x31, 3]]);
        dgram.extend_from_slice(b"msg");
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("stream", stream(b"hello")),
            // Quinn's order: ACK, control, then STREAM last.
            (
                "ack + stream",
                [ack(12), frames(&[&[0x11, 0, 99]]), stream(b"x")].concat(),
            ),
            ("stream without len", frames(&[&[0x08, 0]])),
            ("datagram", dgram),
            (
                "datagram without len",
                [ack(3), frames(&[&[0x30]])].concat(),
            ),
        ];
        for (name, plaintext) in cases {
            assert_eq!(carries_app_data(&plaintext), Some(true), "{name}");
        }
    }

    #[test]
    fn unknown_or_truncated_frames_are_not_known_to_be_control() {
        assert_eq!(carries_app_data(&frames(&[&[0x01], &[0x21]])), None);
        assert_eq!(carries_app_data(&crypto(50)[..20]), None);
        assert_eq!(carries_app_data(&[0x02, 0x05]), None);
        assert_eq!(carries_app_data(&frames(&[&[0x02, 5, 0, 1_000_000]])), None);
        assert!(!SentPackets::is_control(&[0x02, 0x05]));
        assert_eq!(carries_app_data(&[]), Some(false));
    }

    /// Stand-in for AEAD sealing: the tag is derived from the whole plaintext packet.
    fn fake_seal(buf: &mut [u8]) {
        let n = buf.len() - TAG_LEN;
        let sum: u8 = buf[..n]
            .iter()
            .fold(0u8, |a, &b| a.wrapping_mul(31).wrapping_add(b));
        for (i, t) in buf[n..].iter_mut().enumerate() {
            *t = sum.wrapping_add(i as u8).wrapping_mul(151);
        }
        for b in &mut buf[..n] {
            *b ^= 0x5a;
        }
    }

    fn packet(header: &[u8], frames: &[u8]) -> Vec<u8> {
        [header, frames, &[0u8; TAG_LEN]].concat()
    }

    #[test]
    fn the_socket_learns_what_each_sealed_packet_carried() {
        let packets = SentPackets::new();
        let mut control = packet(&[0x40, 1, 2, 3, 4, 7], &ack(5));
        let mut data = packet(&[0x40, 1, 2, 3, 4, 8], &[ack(5), stream(b"abc")].concat());
        for p in [&mut control, &mut data] {
            seal_and_record(&packets, p, 6, TAG_LEN, fake_seal);
        }
        assert_eq!(packets.pending(), 1, "only the control packet is recorded");
        // A coalesced datagram is judged by its last packet.
        let coalesced = [vec![0xe0; 40], control.clone()].concat();
        assert_eq!(packets.take(&data), Content::Data);
        assert_eq!(packets.take(&coalesced), Content::Control);
        assert_eq!(packets.pending(), 0);
        // Taken once: the same bytes again (never sent twice by a stack) are not known.
        assert_eq!(packets.take(&control), Content::Data);
        // Too short to hold a tag, or never recorded: protected.
        assert_eq!(packets.take(&[1, 2, 3]), Content::Data);
    }

    #[test]
    fn packets_that_never_reach_the_socket_are_forgotten() {
        let packets = SentPackets::new();
        for i in 0..(KEEP as u64 + 100) {
            let mut p = packet(&i.to_be_bytes(), &ack(i));
            seal_and_record(&packets, &mut p, 8, TAG_LEN, |b| {
                let n = b.len() - TAG_LEN;
                b[n..n + 8].copy_from_slice(&i.to_be_bytes());
            });
        }
        assert_eq!(packets.pending(), KEEP);
    }
}
