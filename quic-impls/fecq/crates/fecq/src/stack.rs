//! The seam between fecq and a QUIC stack. Both stacks plug into the IO-free FEC layer the same
//! way, through one adapter each (quinn_stack: quinn, single path; noq_stack: noq, multipath)
//! holding only what is specific to its crate:
//! - socket glue: a [`SocketGlue`] (its UDP crate's calls) and its `AsyncUdpSocket` over the
//!   shared [`FecSocket`] (crate::socket);
//! - congestion controller glue: its `ControllerFactory` for crate::options::cc::ScaledFactory;
//! - transport configuration: crate::options::transport's settings, plus its own;
//! - endpoint setup and what it does with a connection: this trait;
//! - the application-facing calls: crate::quic's traits, from one macro.
//!
//! Everything else is written once over this trait: the roles (crate::run), the application
//! protocol (crate::app) and the socket.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::layer::Multipath;
use crate::options::config::Common;
use crate::options::metrics::{MultipathInfo, SideStats};
use crate::quic::{Handshake, QuicConn, QuicEndpoint};
use crate::socket::{FecSocket, SocketGlue};

/// The shared socket under stack `S`.
pub type SocketOf<S> = FecSocket<<S as Stack>::Glue>;

pub trait Stack: Send + Sync + 'static {
    type Conn: QuicConn;
    type Endpoint: QuicEndpoint<Conn = Self::Conn>;
    /// The socket glue of the stack's UDP crate.
    type Glue: SocketGlue<Conn = Self::Conn>;

    /// The FEC layer's multipath framing under this stack (None: single path).
    fn multipath(&self) -> Option<Multipath>;

    /// The metrics' multipath settings for a client opening `paths` paths (None: single path).
    fn multipath_info(&self, paths: usize) -> Option<MultipathInfo>;

    /// An endpoint over `socket` with fecq's transport settings: a server when `server` (a
    /// self-signed certificate), else a client (any server certificate).
    fn endpoint(
        &self,
        common: &Common,
        socket: &Arc<SocketOf<Self>>,
        server: bool,
    ) -> Result<Self::Endpoint, String>;

    /// The server's next incoming connection (None once the endpoint is closed). The default is
    /// the endpoint's own accept; a stack whose qlog is set per endpoint, not per connection
    /// (quinn), gives each connection its own (`--qlog-dir`, crate::options::qlog).
    fn accept(
        &self,
        endpoint: &Self::Endpoint,
        socket: &Arc<SocketOf<Self>>,
    ) -> impl Future<Output = Option<Handshake<Self::Conn>>> + Send {
        let _ = socket;
        endpoint.accept()
    }

    /// The client, once the handshake is done and before its request: open the paths after the
    /// first (`more_paths`: local and server address of each) and keep them alive.
    fn client_connected(
        &self,
        conn: &Self::Conn,
        more_paths: &[(Option<IpAddr>, SocketAddr)],
    ) -> impl Future<Output = Result<(), String>> + Send;

    /// The server, for each connection it accepted.
    fn server_connected(&self, conn: &Self::Conn);

    /// QUIC paths open now.
    fn open_paths(conn: &Self::Conn) -> usize;

    /// One endpoint's view of a connection: QUIC's counters and the layer's (per path with
    /// multipath framing), both from one moment (`FecSocket::paths_with`).
    fn side_stats(conn: &Self::Conn, socket: &SocketOf<Self>) -> SideStats;
}
