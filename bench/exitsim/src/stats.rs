//! The stats endpoint: `GET /stats` answers the tally as one JSON object, `GET /stats?exits=1`
//! adds the per-exit list. Plain HTTP/1.1, one request per connection, loopback only.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::Sim;

/// Largest request head read (bytes).
const MAX_HEAD: usize = 4 * 1024;
/// Longest wait for the request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// Answers stats requests on `listener` until the process ends.
pub async fn serve(listener: TcpListener, sim: Arc<Sim>) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(answer(stream, sim.clone()));
    }
}

async fn answer(mut stream: TcpStream, sim: Arc<Sim>) {
    let Ok(Ok(head)) = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)).await else {
        return;
    };
    let target = head.split(|&b| b == b' ').nth(1).unwrap_or_default();
    let (status, body) = match target {
        b"/stats" | b"/stats?exits=0" => ("200 OK", json(&sim, false)),
        b"/stats?exits=1" => ("200 OK", json(&sim, true)),
        _ => ("404 Not Found", "{\"error\":\"not found\"}".to_owned()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
}

fn json(sim: &Sim, per_exit: bool) -> String {
    serde_json::to_string(&sim.tally.snapshot(per_exit)).unwrap_or_default()
}

async fn read_head(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() <= MAX_HEAD {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
    Ok(head)
}
