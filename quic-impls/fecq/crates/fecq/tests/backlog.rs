//! The shared socket's send backlog is sent as soon as the socket is writable, whoever sends next.
//! A datagram waits there when tokio does not yet know the socket to be writable: right after the
//! socket is made, before the runtime's reactor has seen it, tokio's `try_io` does not even try the
//! send. The stack was told it was sent, so before issue 49 it left only with the stack's next
//! transmit: a multipath client without FEC (no flush task) sent its first Initial together with its
//! probe, ~1 s later (`handshake_ms` 1012 ms against 12 ms single path).

use std::net::UdpSocket;
use std::time::Duration;

use fec_core::Scheme;
use fecq::layer::{LayerConfig, Protect, Signal};
use fecq::noq_stack::udp::NoqUdp;
use fecq::quinn_stack::udp::QuinnUdp;
use fecq::socket::{FecSocket, SocketConfig, SocketGlue};

use crate::support;
use support::rt;

fn config(multipath: bool) -> SocketConfig {
    let (_, mp) = support::opts(&["--multipath", "--local-addresses", "127.0.0.1"]);
    SocketConfig {
        layer: LayerConfig {
            scheme: Scheme::None,
            signal: Signal::Ce,
            flush_after: Duration::from_millis(10),
            max_payload: 1200,
            multipath: multipath.then(|| mp.layer_multipath()),
            tail: None,
            protect: Protect::Stream,
        },
        rcvbuf: 1 << 20,
        sndbuf: 1 << 20,
        default_local: None,
        qlog: None,
        test_send_delay: Duration::ZERO,
        test_ignore_repairs: false,
        test_recovery_delay: Duration::ZERO,
    }
}

/// One datagram sent right after the socket is made, and nothing after it: it must reach the peer.
fn first_datagram_leaves<G: SocketGlue>(multipath: bool) {
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    // Liveness, not timing: without the backlog task the datagram never leaves, whatever the wait.
    peer.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let to = peer.local_addr().unwrap();
    let runtime = rt();
    runtime.block_on(async {
        let socket =
            FecSocket::<G>::bind("127.0.0.1:0".parse().unwrap(), config(multipath), None).unwrap();
        // No await before the send: the reactor has not run, the socket's readiness is unknown.
        socket.send(None, to, b"first", None, 0).unwrap();
        let got = tokio::task::spawn_blocking(move || {
            let mut buf = [0u8; 64];
            peer.recv(&mut buf).map(|n| buf[..n].to_vec())
        })
        .await
        .unwrap();
        let got = got.expect("the first datagram never left the backlog");
        assert!(got.ends_with(b"first"), "{got:?}");
        drop(socket);
    });
}

#[test]
fn first_datagram_of_a_multipath_socket_leaves_without_a_second_send() {
    first_datagram_leaves::<NoqUdp>(true);
}

#[test]
fn first_datagram_of_a_single_path_socket_leaves_without_a_second_send() {
    first_datagram_leaves::<QuinnUdp>(false);
}
