//! quinn's crypto glue for `--fec-protect stream` (crate::content): its rustls QUIC configurations
//! wrapped so that every key quinn seals a packet with first reads what the packet carries, and
//! records the packets without application data in the socket's [`SentPackets`]. Everything else
//! (the handshake, header protection, opening received packets) is the wrapped configuration's.

use std::any::Any;
use std::sync::Arc;

use bytes::BytesMut;
use quinn_proto::crypto::{
    ClientConfig, CryptoError, ExportKeyingMaterialError, HeaderKey, KeyPair, Keys, PacketKey,
    ServerConfig, Session, UnsupportedVersion,
};
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::{ConnectError, ConnectionId, Side, TransportError};

use crate::content::{seal_and_record, SentPackets};

/// A server configuration whose sessions' packet keys record what they seal.
pub struct RecordingServer {
    pub inner: Arc<dyn ServerConfig>,
    pub packets: Arc<SentPackets>,
}

/// A client configuration whose sessions' packet keys record what they seal.
pub struct RecordingClient {
    pub inner: Arc<dyn ClientConfig>,
    pub packets: Arc<SentPackets>,
}

struct RecordingSession {
    inner: Box<dyn Session>,
    packets: Arc<SentPackets>,
}

struct RecordingKey {
    inner: Box<dyn PacketKey>,
    packets: Arc<SentPackets>,
}

fn packet_key(inner: Box<dyn PacketKey>, packets: &Arc<SentPackets>) -> Box<dyn PacketKey> {
    Box::new(RecordingKey {
        inner,
        packets: packets.clone(),
    })
}

/// The same keys, the sending packet key wrapped (the receiving one opens the peer's packets).
fn keys(k: Keys, packets: &Arc<SentPackets>) -> Keys {
    Keys {
        header: k.header,
        packet: KeyPair {
            local: packet_key(k.packet.local, packets),
            remote: k.packet.remote,
        },
    }
}

impl ServerConfig for RecordingServer {
    fn initial_keys(
        &self,
        version: u32,
        dst_cid: &ConnectionId,
    ) -> Result<Keys, UnsupportedVersion> {
        Ok(keys(
            self.inner.initial_keys(version, dst_cid)?,
            &self.packets,
        ))
    }

    fn retry_tag(&self, version: u32, orig_dst_cid: &ConnectionId, packet: &[u8]) -> [u8; 16] {
        self.inner.retry_tag(version, orig_dst_cid, packet)
    }

    fn start_session(
        self: Arc<Self>,
        version: u32,
        params: &TransportParameters,
    ) -> Box<dyn Session> {
        Box::new(RecordingSession {
            inner: self.inner.clone().start_session(version, params),
            packets: self.packets.clone(),
        })
    }
}

impl ClientConfig for RecordingClient {
    fn start_session(
        self: Arc<Self>,
        version: u32,
        server_name: &str,
        params: &TransportParameters,
    ) -> Result<Box<dyn Session>, ConnectError> {
        Ok(Box::new(RecordingSession {
            inner: self
                .inner
                .clone()
                .start_session(version, server_name, params)?,
            packets: self.packets.clone(),
        }))
    }
}

impl Session for RecordingSession {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> Keys {
        keys(self.inner.initial_keys(dst_cid, side), &self.packets)
    }
    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        self.inner.handshake_data()
    }
    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.peer_identity()
    }
    fn early_crypto(&self) -> Option<(Box<dyn HeaderKey>, Box<dyn PacketKey>)> {
        let (header, packet) = self.inner.early_crypto()?;
        Some((header, packet_key(packet, &self.packets)))
    }
    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }
    fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }
    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        self.inner.read_handshake(buf)
    }
    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        self.inner.transport_parameters()
    }
    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        Some(keys(self.inner.write_handshake(buf)?, &self.packets))
    }
    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn PacketKey>>> {
        let k = self.inner.next_1rtt_keys()?;
        Some(KeyPair {
            local: packet_key(k.local, &self.packets),
            remote: k.remote,
        })
    }
    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }
    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}

impl PacketKey for RecordingKey {
    fn encrypt(&self, packet: u64, buf: &mut [u8], header_len: usize) {
        let tag_len = self.inner.tag_len();
        seal_and_record(&self.packets, buf, header_len, tag_len, |buf| {
            self.inner.encrypt(packet, buf, header_len)
        });
    }
    fn decrypt(
        &self,
        packet: u64,
        header: &[u8],
        payload: &mut BytesMut,
    ) -> Result<(), CryptoError> {
        self.inner.decrypt(packet, header, payload)
    }
    fn tag_len(&self) -> usize {
        self.inner.tag_len()
    }
    fn confidentiality_limit(&self) -> u64 {
        self.inner.confidentiality_limit()
    }
    fn integrity_limit(&self) -> u64 {
        self.inner.integrity_limit()
    }
}
