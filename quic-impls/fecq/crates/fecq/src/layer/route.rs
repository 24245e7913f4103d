//! Repair routing: which path each datagram the encoder produced goes out on, with the multipath
//! envelope byte, counted on that path. The source datagram goes on the path it was sent on;
//! repairs where `RepairPath` says (single path: the same).

use super::config::{Multipath, RepairPath};
use super::datagram::Outgoing;
use super::group::Group;

/// Put the encoder's output on paths: `produced[0]` is the source datagram (on the flow's last
/// path), the rest are repairs (on the path `RepairPath` says). `flow_id`: the envelope byte.
/// Inline: called for every datagram, from the engine in another module (codegen unit).
#[inline]
pub(super) fn route(
    group: &mut Group,
    multipath: Option<Multipath>,
    flow: usize,
    flow_id: Option<u8>,
    ecn: u8,
    produced: &mut Vec<Vec<u8>>,
    out: &mut Vec<Outgoing>,
) {
    let src = group.flows[flow].last_path;
    let n = group.paths.len();
    for (j, d) in produced.drain(..).enumerate() {
        let repair = j > 0;
        if !repair && d.is_empty() {
            continue; // the placeholder of a flush
        }
        let target = match (repair, multipath.map(|m| m.repair)) {
            (false, _) | (true, None) | (true, Some(RepairPath::Same)) => src,
            (true, Some(RepairPath::Other)) => (src + 1) % n,
            (true, Some(RepairPath::All)) => {
                group.rr = (group.rr + 1) % n;
                group.rr
            }
        };
        let data = envelope(flow_id, d);
        let c = &mut group.paths[target].counters;
        c.wire_datagrams_sent += 1;
        c.wire_bytes_sent += data.len() as u64;
        if repair {
            c.repair_sent += 1;
        }
        out.push(Outgoing {
            path: group.paths[target].key,
            data,
            ecn,
            repair,
        });
    }
}

/// A datagram of the encoder's with the multipath envelope byte in front (`flow_id`: Some with
/// multipath framing), or as it is.
#[inline]
pub(super) fn envelope(flow_id: Option<u8>, d: Vec<u8>) -> Vec<u8> {
    match flow_id {
        Some(f) => {
            let mut v = Vec::with_capacity(d.len() + 1);
            v.push(f);
            v.extend_from_slice(&d);
            v
        }
        None => d,
    }
}
