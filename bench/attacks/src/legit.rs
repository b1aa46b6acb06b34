//! The legitimate client measured beside each attack: one request per new TLS connection
//! (`GET /api/clean` over HTTP/1.1), back to back, as an echo service's users do. Its requests
//! come from a population of [`LEGIT_SOURCES`] addresses in turn, as a public service's users
//! do, so that each address stays under the server's per-source rate limit.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{timeout, Instant};

use crate::net::Target;

/// Addresses of the legitimate users: 127.0.1.1 up to 127.0.1.LEGIT_SOURCES, apart from the
/// attackers' 127.0.0.1…
pub const LEGIT_SOURCES: u8 = 16;

/// The source of the next legitimate request.
static NEXT_SOURCE: AtomicU8 = AtomicU8::new(0);

/// Longest a legitimate request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What the legitimate client got.
#[derive(Clone, Debug, Default)]
pub struct LegitReport {
    /// Requests answered 200.
    pub ok: u64,
    /// Requests failed, refused or timed out.
    pub failed: u64,
    /// Seconds measured.
    pub seconds: f64,
}

impl LegitReport {
    /// Answered requests per second.
    pub fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.ok as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// Sends requests back to back for `duration`.
pub async fn legit(target: &Target, duration: Duration) -> LegitReport {
    let start = Instant::now();
    let mut report = LegitReport::default();
    while start.elapsed() < duration {
        match timeout(REQUEST_TIMEOUT, request(target)).await {
            Ok(Ok(true)) => report.ok += 1,
            _ => report.failed += 1,
        }
    }
    report.seconds = start.elapsed().as_secs_f64();
    report
}

/// One request on a fresh connection; true on a 200.
pub async fn request(target: &Target) -> std::io::Result<bool> {
    let n = NEXT_SOURCE.fetch_add(1, Ordering::Relaxed) % LEGIT_SOURCES;
    let mut tls = target.tls(IpAddr::from([127, 0, 1, 1 + n]), false).await?;
    tls.write_all(
        b"GET /api/clean HTTP/1.1\r\nHost: localhost\r\nUser-Agent: exitvoice-legit\r\nConnection: close\r\n\r\n",
    )
    .await?;
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response).await;
    Ok(response.starts_with(b"HTTP/1.1 200"))
}
