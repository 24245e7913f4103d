//! Tail mode's decision when a sender goes quiet: how many repairs now, or wait (crate::options::tail has
//! the options and the why).

use super::config::TailBudget;
use super::group::Flow;

pub(super) enum Tail {
    /// Not yet: the stack may still have data to send, or no room (checked again later).
    Wait,
    /// Send this many repairs now (0: none, the tail is done).
    Send(usize),
}

/// Tail mode: what to do now that `flow`'s sender went quiet. Nothing if the stack sent no data
/// since the last tail (ACK-only packets) or everything is acknowledged already. Wait while the
/// stack is not known to be out of data (a pause in the middle of a transfer, blocked by the
/// window) or the window has no room for one repair. Otherwise at most `cap`, at most one per
/// source datagram sent since the last tail and per datagram in flight (more could not rebuild
/// more of them), at most what the window has room for. Without a budget (a stack that cannot
/// tell), `cap` and the datagram count only.
pub(super) fn tail_decision(
    cap: usize,
    flow: &mut Flow,
    budget: Option<TailBudget>,
    repair_size: u64,
) -> Tail {
    let count = cap.min(flow.since_tail);
    let Some(b) = budget else {
        return Tail::Send(count);
    };
    if b.data_frames <= flow.data_frames_at_tail || b.in_flight_bytes == 0 {
        flow.data_frames_at_tail = b.data_frames;
        return Tail::Send(0);
    }
    let room = (b.room_bytes / repair_size.max(1)) as usize;
    if !b.app_limited || room == 0 {
        return Tail::Wait;
    }
    flow.data_frames_at_tail = b.data_frames;
    let unacked = b.in_flight_bytes.div_ceil(repair_size.max(1)) as usize;
    Tail::Send(count.min(room).min(unacked))
}
