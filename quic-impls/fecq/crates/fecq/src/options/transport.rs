//! The QUIC transport settings fecq gives either stack, in one place: [`transport_config!`] builds
//! the stack's `TransportConfig` from the options (quinn's and noq's have the same setters but no
//! common trait, hence a macro); each stack's glue adds only what is its own (noq: the multipath
//! settings).

/// The largest QUIC datagram the stack may hand the FEC layer (its MTU, with path MTU discovery
/// off); the FEC header comes on top, so a 1200-byte QUIC packet travels in at most 1200 +
/// overhead bytes.
pub const QUIC_MTU: u16 = 1200;
/// Flow control: what one stream and the whole connection may have unread, what may wait unsent.
pub const STREAM_RECEIVE_WINDOW: u32 = 16 << 20;
pub const RECEIVE_WINDOW: u32 = 32 << 20;
pub const SEND_WINDOW: u64 = 32 << 20;
/// DATAGRAM frames queued on each side.
pub const DATAGRAM_BUFFER: usize = 8 << 20;

/// `$q::TransportConfig` (`$q`: quinn or noq) with fecq's settings from `$common`
/// (crate::options::config::Common): loss detection thresholds, the ACK frequency asked of the peer, fecq's
/// congestion controller (crate::options::cc), no path MTU discovery (every QUIC datagram at most
/// [`QUIC_MTU`], the FEC header on top), the idle timeout, the connection's keep-alive
/// (`$keep_alive`: an `Option<Duration>`), flow control and datagram buffers.
macro_rules! transport_config {
    ($q:ident, $common:expr, keep_alive: $keep_alive:expr) => {{
        let common: &$crate::options::config::Common = $common;
        let mut t = $q::TransportConfig::default();
        t.packet_threshold(common.reorder_packets);
        t.time_threshold(common.reorder_time);
        t.ack_frequency_config(common.ack_request().map(|r| {
            let mut config = $q::AckFrequencyConfig::default();
            config
                .ack_eliciting_threshold(r.threshold.into())
                .max_ack_delay(r.max_delay)
                .reordering_threshold(r.reordering.into());
            config
        }));
        t.congestion_controller_factory(std::sync::Arc::new(common.controller()));
        t.mtu_discovery_config(None);
        t.initial_mtu($crate::options::transport::QUIC_MTU);
        t.max_idle_timeout(Some($q::IdleTimeout::from($q::VarInt::from_u32(
            common.idle_timeout_ms(),
        ))));
        t.keep_alive_interval($keep_alive);
        t.stream_receive_window($q::VarInt::from_u32(
            $crate::options::transport::STREAM_RECEIVE_WINDOW,
        ));
        t.receive_window($q::VarInt::from_u32(
            $crate::options::transport::RECEIVE_WINDOW,
        ));
        t.send_window($crate::options::transport::SEND_WINDOW);
        t.datagram_receive_buffer_size(Some($crate::options::transport::DATAGRAM_BUFFER));
        t.datagram_send_buffer_size($crate::options::transport::DATAGRAM_BUFFER);
        t
    }};
}
pub(crate) use transport_config;
