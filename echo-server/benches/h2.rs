//! Decrypted Chrome-shaped prefix → HTTP/2 voice (parse + HPACK + Akamai + voice).
//!
//! Run with `cargo bench -p exitvoice-echo --bench h2 -- --warm-up-time 1 --measurement-time 3`.
//!
//! Each benchmark runs twice: once in wall time (criterion's default) and once in thread CPU
//! time (`CLOCK_THREAD_CPUTIME_ID`). This machine is shared by several builds at once, and wall
//! time then mostly measures the wait for a core; CPU time does not.

use criterion::measurement::{Measurement, WallTime};
use criterion::{black_box, criterion_group, Criterion};
use exitvoice_echo::h2;

mod support;

use support::CpuTime;

const CHROME: &[u8] = include_bytes!("../tests/data/h2/chrome_shaped.bin");

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

/// With `EXITVOICE_BENCH_ITERS=N` set, runs the full path N times without criterion (for
/// instruction counts under `valgrind --tool=callgrind`, see docs/benchmarks.md).
fn main() {
    if support::run_fixed_iterations(|| {
        let p = h2::parse_prefix(black_box(CHROME)).expect("fixture parses");
        black_box((h2::akamai_fingerprint(&p), h2::voice_id(&p)));
    }) {
        return;
    }
    wall_time();
    cpu_time();
    Criterion::default().configure_from_args().final_summary();
}
