//! Raw TLS records of a real Chrome ClientHello → every TLS fingerprint (parse, JA3, JA3N, the
//! JA4 family, voice id, order id).
//!
//! Run with `cargo bench -p exitvoice-protocol --bench tls -- --warm-up-time 1 --measurement-time 3`.
//! The hello is the first Chrome hello of `tls-handshake.pcapng` in the FoxIO conformance vectors
//! (`tests/data/ja4/clienthellos.jsonl`), wrapped in one handshake record.
//!
//! Each benchmark runs twice: once in wall time (criterion's default) and once in thread CPU
//! time (`CLOCK_THREAD_CPUTIME_ID`), which the wait for a core on a shared machine does not
//! inflate.

use criterion::measurement::{Measurement, WallTime};
use criterion::{black_box, Criterion};
use exitvoice_protocol::tls::{parse_client_hello, scan};

mod support;

use support::CpuTime;

/// The first vector whose JA4 is Chrome's `t13d1516h2_8daaf6152771_e5627efa2ab1` in
/// `tls-handshake.pcapng`, as one TLS record.
fn chrome_records() -> Vec<u8> {
    let line = include_str!("../tests/data/ja4/clienthellos.jsonl")
        .lines()
        .find(|l| {
            l.contains("\"pcap/tls-handshake.pcapng\"")
                && l.contains("\"ja4_spec\": \"t13d1516h2_8daaf6152771_e5627efa2ab1\"")
        })
        .expect("a Chrome vector");
    let value: serde_json::Value = serde_json::from_str(line).expect("JSON line");
    let message = hex::decode(value["client_hello_hex"].as_str().expect("hex field")).expect("hex");
    let mut records = vec![22, 3, 1];
    records.extend_from_slice(
        &u16::try_from(message.len())
            .expect("one record")
            .to_be_bytes(),
    );
    records.extend_from_slice(&message);
    records
}

fn benches<M: Measurement + 'static>(c: &mut Criterion<M>, tag: &str) {
    let records = chrome_records();
    c.bench_function(&format!("{tag}: tls/records_to_all_fingerprints"), |b| {
        b.iter(|| {
            let hello = parse_client_hello(black_box(&records)).expect("valid hello");
            black_box(hello.fingerprints())
        })
    });
    c.bench_function(&format!("{tag}: tls/parse_only"), |b| {
        b.iter(|| {
            black_box(parse_client_hello(black_box(&records)).map(|h| h.cipher_suites().len()))
        })
    });
    c.bench_function(&format!("{tag}: tls/scan"), |b| {
        b.iter(|| black_box(scan(black_box(&records))))
    });
}

/// With `EXITVOICE_BENCH_ITERS=N` set, runs the full path N times without criterion (for
/// instruction counts under `valgrind --tool=callgrind`, see docs/benchmarks.md).
fn main() {
    let records = chrome_records();
    if support::run_fixed_iterations(|| {
        let hello = parse_client_hello(black_box(&records)).expect("valid hello");
        black_box(hello.fingerprints());
    }) {
        return;
    }
    support::run_wall_and_cpu(benches::<WallTime>, benches::<CpuTime>);
}
