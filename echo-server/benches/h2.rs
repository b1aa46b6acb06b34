//! Decrypted Chrome-shaped prefix → HTTP/2 voice (parse + HPACK + Akamai + voice).
//!
//! Run with `cargo bench -p exitvoice-echo --bench h2 -- --warm-up-time 1 --measurement-time 3`.
//!
//! Each benchmark runs twice: once in wall time (criterion's default) and once in thread CPU
//! time (`CLOCK_THREAD_CPUTIME_ID`). This machine is shared by several builds at once, and wall
//! time then mostly measures the wait for a core; CPU time does not.

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{black_box, criterion_group, Criterion};
use exitvoice_echo::h2;

const CHROME: &[u8] = include_bytes!("../tests/data/h2/chrome_shaped.bin");

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
    c.bench_function(&format!("{tag}: h2 chrome prefix -> akamai + voice"), |b| {
        b.iter(|| {
            let p = h2::parse_prefix(black_box(CHROME)).expect("fixture parses");
            let akamai = h2::akamai_fingerprint(&p);
            let voice = h2::voice_id(&p);
            (akamai, voice)
        })
    });
    c.bench_function(&format!("{tag}: h2 chrome prefix parse only"), |b| {
        b.iter(|| h2::parse_prefix(black_box(CHROME)).expect("fixture parses"))
    });
    // The HEADERS block: preface 24, SETTINGS 9+24, WINDOW_UPDATE 9+4, HEADERS header 9,
    // priority fields 5.
    let block = &CHROME[24 + 33 + 13 + 9 + 5..];
    c.bench_function(&format!("{tag}: hpack chrome headers block"), |b| {
        b.iter(|| {
            h2::hpack::Decoder::new()
                .decode(black_box(block))
                .expect("block decodes")
        })
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
        let start = thread_cpu_ns();
        for _ in 0..n {
            let p = h2::parse_prefix(black_box(CHROME)).expect("fixture parses");
            black_box((h2::akamai_fingerprint(&p), h2::voice_id(&p)));
        }
        let per = (thread_cpu_ns() - start) as f64 / n.max(1) as f64;
        println!("{n} iterations, {per:.0} ns CPU each");
        return;
    }
    wall_time();
    cpu_time();
    Criterion::default().configure_from_args().final_summary();
}
