//! Raw TLS records of a real Chrome ClientHello → every TLS fingerprint (parse, JA3, JA3N, the
//! JA4 family, voice id, order id).
//!
//! Run with `cargo bench -p exitvoice-echo --bench tls -- --warm-up-time 1 --measurement-time 3`.
//! The hello is the first Chrome hello of `tls-handshake.pcapng` in the FoxIO conformance vectors
//! (`tests/data/ja4/clienthellos.jsonl`), wrapped in one handshake record.
//!
//! Each benchmark runs twice: once in wall time (criterion's default) and once in thread CPU
//! time (`CLOCK_THREAD_CPUTIME_ID`), which the wait for a core on a shared machine does not
//! inflate.

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{black_box, criterion_group, Criterion};
use exitvoice_echo::tls::{parse_client_hello, scan};

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

/// Nanoseconds this thread has run on a CPU.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// Thread CPU time as a criterion measurement, formatted like wall time.
struct CpuTime(WallTime);

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns().saturating_sub(start)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        self.0.formatter()
    }
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
        b.iter(|| black_box(parse_client_hello(black_box(&records)).map(|h| h.cipher_suites.len())))
    });
    c.bench_function(&format!("{tag}: tls/scan"), |b| {
        b.iter(|| black_box(scan(black_box(&records))))
    });
}

fn wall(c: &mut Criterion) {
    benches(c, "wall");
}

fn cpu(c: &mut Criterion<CpuTime>) {
    benches(c, "cpu");
}

criterion_group!(wall_time, wall);
criterion_group! {
    name = cpu_time;
    config = Criterion::default().with_measurement(CpuTime(WallTime));
    targets = cpu
}

/// With `EXITVOICE_BENCH_ITERS=N` set, runs the full path N times and exits without criterion,
/// printing the mean
/// thread CPU time per run; for instruction counts under `valgrind --tool=callgrind` (see
/// docs/benchmarks.md).
fn main() {
    if let Some(n) = std::env::var("EXITVOICE_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        let records = chrome_records();
        let start = thread_cpu_ns();
        for _ in 0..n {
            let hello = parse_client_hello(black_box(&records)).expect("valid hello");
            black_box(hello.fingerprints());
        }
        let per = (thread_cpu_ns() - start) as f64 / n.max(1) as f64;
        println!("{n} iterations, {per:.0} ns CPU each");
        return;
    }
    wall_time();
    cpu_time();
    Criterion::default().configure_from_args().final_summary();
}
