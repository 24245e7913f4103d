//! Plain datagrams ([`Encoder::pass`]): sent between source datagrams, they take no symbol id,
//! bring no repair due, are covered by no repair and are delivered as received, while the sources
//! around them are still protected.

use fec_core::frame::{self, Frame};
use fec_core::{Decoder, Encoder, Scheme};

const SCHEMES: [&str; 5] = ["xor:2", "xor:2:3", "rs:3,2", "rs:30,20", "rlc:3,2,20"];

#[test]
fn plain_datagrams_are_not_symbols_and_trigger_no_repair() {
    for text in SCHEMES {
        let scheme: Scheme = text.parse().unwrap();
        let mut enc = Encoder::new(scheme, 1200);
        let mut out = Vec::new();
        // As many plain datagrams as a whole block would hold, and more: no repair at all.
        for i in 0..50u8 {
            enc.pass(&[i; 40], 2, &mut out);
        }
        assert_eq!(out.len(), 50, "{text}: one datagram each, nothing more");
        for (i, d) in out.iter().enumerate() {
            assert_eq!(d.len(), frame::PLAIN_HEADER + 40);
            assert_eq!(
                frame::parse(d),
                Some(Frame::Plain {
                    ecn: 2,
                    payload: &[i as u8; 40][..]
                })
            );
        }
        // Nothing to flush either: no source was sent.
        enc.flush(&mut out);
        assert_eq!(
            out.len(),
            50,
            "{text}: a flush after plain datagrams only sends nothing"
        );
        let s = enc.stats();
        assert_eq!((s.source_sent, s.repair_sent, s.plain_sent), (0, 0, 50));
    }
}

#[test]
fn sources_between_plain_datagrams_are_still_recovered() {
    for text in SCHEMES {
        let scheme: Scheme = text.parse().unwrap();
        let mut enc = Encoder::new(scheme, 1200);
        // Sources 0..2 each followed by two plain datagrams, then a flush: the repairs cover the
        // sources only (ids 0, 1, ...), whatever the plain datagrams in between.
        let mut wire: Vec<Vec<u8>> = Vec::new();
        let sources: Vec<Vec<u8>> = (0..2u8)
            .map(|i| vec![100 + i; 30 + usize::from(i)])
            .collect();
        for s in &sources {
            enc.protect(s, 0, &mut wire);
            enc.pass(b"ack-only", 0, &mut wire);
            enc.pass(b"handshake", 0, &mut wire);
        }
        enc.flush(&mut wire);
        let repairs = wire
            .iter()
            .filter(|d| {
                !matches!(
                    frame::parse(d),
                    Some(Frame::Source { .. } | Frame::Plain { .. })
                )
            })
            .count();
        assert!(repairs > 0, "{text}: the sources are protected");
        assert_eq!(enc.stats().source_sent, 2);
        // Lose the first source: every other datagram arrives, the source is rebuilt.
        let mut dec = Decoder::new(scheme);
        let mut got = Vec::new();
        for d in wire.iter().skip(1) {
            dec.receive(d, &mut got);
        }
        let plain: Vec<&[u8]> = got
            .iter()
            .filter(|d| !d.recovered && d.payload.len() < 10)
            .map(|d| &d.payload[..])
            .collect();
        assert_eq!(
            plain,
            [&b"ack-only"[..], b"handshake", b"ack-only", b"handshake"]
        );
        let rebuilt: Vec<&Vec<u8>> = got
            .iter()
            .filter(|d| d.recovered)
            .map(|d| &d.payload)
            .collect();
        assert_eq!(rebuilt, [&sources[0]], "{text}");
        let s = dec.stats();
        assert_eq!(
            (s.received_plain, s.received_source, s.recovered),
            (4, 1, 1)
        );
        assert_eq!(s.malformed, 0);
    }
}

#[test]
fn none_passes_datagrams_as_they_are() {
    let mut enc = Encoder::new(Scheme::None, 1200);
    let mut out = Vec::new();
    enc.pass(b"quic", 1, &mut out);
    assert_eq!(out, [b"quic".to_vec()]);
}
