//! `store-bench`: request rows per second through [`Store::write_batch`], batched as the echo
//! server's writer batches them (up to `--batch-size` jobs a transaction, a connection's row in
//! the batch of its first request), into a fresh SQLite database.
//!
//! The rows are shaped like h2 keep-alive traffic: `--requests-per-connection` requests per
//! connection, each connection carrying a ClientHello and a tapped prefix of realistic sizes.
//! Prints `key<TAB>value` lines (rows, seconds, rows per second, bytes the writes added to the
//! database: its pages, WAL included, so the WAL file's fixed size does not count) on stdout.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use exitvoice_schema::{Alpn, Bucket, ConnectionFacts, ConnectionRow, Peer, RequestRecord, Spoken};
use exitvoice_store::{Batch, Store};

/// Flags of `store-bench`.
#[derive(Debug, Parser)]
struct Args {
    /// Request rows written.
    #[arg(long, default_value_t = 200_000)]
    rows: u32,
    /// Jobs (request rows and connection rows) per transaction: `exitvoice serve --batch-size`.
    #[arg(long, default_value_t = 256)]
    batch_size: usize,
    /// Requests per connection.
    #[arg(long, default_value_t = 100)]
    requests_per_connection: u32,
    /// Bytes of each connection's ClientHello (a browser's is 500–2,000).
    #[arg(long, default_value_t = 1_800)]
    hello_bytes: usize,
    /// Bytes of each connection's tapped prefix.
    #[arg(long, default_value_t = 4_096)]
    prefix_bytes: usize,
}

fn connection(args: &Args, n: u32, now_ms: i64) -> ConnectionRow {
    ConnectionRow {
        conn_id: format!("bench-{n:08x}"),
        time_unix_ms: now_ms,
        peer: Peer {
            ip: "127.0.0.1".to_owned(),
            port: 40_000 + (n % 20_000) as u16,
        },
        facts: std::sync::Arc::new(ConnectionFacts {
            sni: Some("localhost".to_owned()),
            alpn: Alpn {
                offered: vec!["h2".to_owned(), "http/1.1".to_owned()],
                negotiated: Some("h2".to_owned()),
                spoken: Spoken::H2,
            },
            tls_version: Some("TLSv1.3".to_owned()),
            cipher: Some("TLS13_AES_128_GCM_SHA256".to_owned()),
            ..ConnectionFacts::default()
        }),
        failure: None,
        failure_detail: None,
        requests: 0,
        prefix_truncated: false,
        analysed_prefix_len: Some(args.prefix_bytes),
        hello: vec![0x16; args.hello_bytes],
        prefix: vec![0x50; args.prefix_bytes],
        syn: Vec::new(),
        // What a live h2 connection carries: the kernel's, the TLS flight's and a PING's.
        latency: Some(exitvoice_schema::RoundTrips::judge(
            &exitvoice_schema::Measures {
                tcp: Some(exitvoice_schema::TcpRoundTrip {
                    rtt_us: 52,
                    min_rtt_us: Some(31),
                    rttvar_us: Some(18),
                }),
                tls_us: Some(1_204),
                pings_us: vec![96],
                ..exitvoice_schema::Measures::default()
            },
        )),
    }
}

fn request(conn: u32, index: u32, now_ms: i64) -> RequestRecord {
    let names = |list: &[&str]| list.iter().map(|name| (*name).to_owned()).collect();
    RequestRecord {
        conn_id: format!("bench-{conn:08x}"),
        index,
        time_unix_ms: now_ms,
        token: None,
        method: "GET".to_owned(),
        path: "/api/clean".to_owned(),
        stream_id: Some(index * 2 - 1),
        bucket: Some(Bucket::B),
        pseudo_header_order: names(&[":method", ":path", ":scheme", ":authority"]),
        header_order: names(&["user-agent", "accept"]),
        http1: None,
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let per_conn = args.requests_per_connection.max(1);
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("store-bench.db");
    let store = Store::open(&db).await?;
    let now_ms = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis())?;

    // Batches are built beforehand: the figure is the store's, not this loop's.
    let mut batches = vec![Batch::default()];
    for n in 0..args.rows {
        let (conn, index) = (n / per_conn, n % per_conn + 1);
        let jobs = |batch: &Batch| batch.connections.len() + batch.requests.len();
        if batches
            .last()
            .is_some_and(|batch| jobs(batch) >= args.batch_size)
        {
            batches.push(Batch::default());
        }
        let batch = batches.last_mut().expect("one batch at least");
        if index == 1 {
            batch.connections.push(connection(&args, conn, now_ms));
        }
        batch.requests.push(request(conn, index, now_ms));
    }

    let size = || {
        sqlx::query_scalar::<_, i64>(
            "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size",
        )
        .fetch_one(store.pool())
    };
    let empty = size().await?;
    let start = Instant::now();
    for batch in &batches {
        store.write_batch(batch).await?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let bytes = size().await? - empty;
    store.pool().close().await;
    let connections = args.rows.div_ceil(per_conn);
    println!("request_rows\t{}", args.rows);
    println!("connection_rows\t{connections}");
    println!("batches\t{}", batches.len());
    println!("batch_size\t{}", args.batch_size);
    println!("seconds\t{seconds:.3}");
    println!("rows_per_s\t{:.0}", f64::from(args.rows) / seconds);
    println!("db_bytes\t{bytes}");
    Ok(())
}
