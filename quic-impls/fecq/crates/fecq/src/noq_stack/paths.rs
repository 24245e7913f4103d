//! noq's paths: listing a connection's open paths (noq has no iterator over them), opening the
//! client's paths after the first, and keeping every path alive.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use noq::{Connection, FourTuple, PathId, PathStatus};

use crate::layer::PathKey;

/// Path ids probed when listing a connection's paths (ids are not reused; a run opens a few).
const PATH_ID_SCAN: u32 = 64;

/// The remote address of the lowest-numbered open path (0.0.0.0:0 once every path is gone).
pub fn remote_address(conn: &Connection) -> SocketAddr {
    quic_paths(conn)
        .first()
        .map(|(_, key, _)| key.remote)
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
}

/// The open paths of a connection: id, (local IP, remote), stats.
pub fn quic_paths(conn: &Connection) -> Vec<(u32, PathKey, noq::PathStats)> {
    (0..PATH_ID_SCAN)
        .filter_map(|i| {
            let path = conn.path(PathId::from(i))?;
            let tuple = path.network_path().ok()?;
            Some((
                i,
                PathKey::new(tuple.local_ip(), tuple.remote()),
                path.stats(),
            ))
        })
        .collect()
}

/// PING every open path every `interval` until the connection ends. noq's per-path keep-alive
/// only fires on a path this end has not *sent* on, and the ACKs of a path's data may travel on
/// another path: a client receiving a download on path 2 and acknowledging it on path 1 sends
/// nothing on path 2, so without these PINGs the server's path 2 hears nothing and is abandoned
/// at its idle timeout although it works.
pub fn spawn_pinger(conn: &Connection, interval: Option<Duration>) {
    let Some(interval) = interval else { return };
    let weak = conn.weak_handle();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(conn) = weak.upgrade() else { return };
            if conn.close_reason().is_some() {
                return;
            }
            for i in 0..PATH_ID_SCAN {
                if let Some(path) = conn.path(PathId::from(i)) {
                    let _ = path.ping();
                }
            }
        }
    });
}

/// Open a path (after the first) once the server has issued connection ids for it.
pub async fn open_path(
    conn: &Connection,
    local: Option<IpAddr>,
    remote: SocketAddr,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match conn
            .open_path(FourTuple::new(remote, local), PathStatus::Available)
            .await
        {
            Ok(_) => return Ok(()),
            // Right after the handshake the server has not yet issued CIDs for new paths.
            Err(noq::PathError::RemoteCidsExhausted) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(5)).await
            }
            Err(e) => {
                return Err(format!(
                    "cannot open the path {} -> {remote}: {e}",
                    local.map_or_else(|| "*".to_string(), |ip| ip.to_string())
                ))
            }
        }
    }
}
