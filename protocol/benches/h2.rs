//! Decrypted Chrome-shaped prefix → HTTP/2 voice (parse + HPACK + Akamai + voice).
//!
//! Run with `cargo bench -p exitvoice-protocol --bench h2 -- --warm-up-time 1 --measurement-time 3`.
//!
//! Each benchmark runs twice: once in wall time (criterion's default) and once in thread CPU
//! time (`CLOCK_THREAD_CPUTIME_ID`). This machine is shared by several builds at once, and wall
//! time then mostly measures the wait for a core; CPU time does not.

use criterion::measurement::{Measurement, WallTime};
use criterion::{black_box, Criterion};
use exitvoice_protocol::h2;

mod support;

use support::CpuTime;

const CHROME: &[u8] = include_bytes!("../tests/data/h2/chrome_shaped.bin");
/// The HEADERS block: after the preface (24), SETTINGS (9 + 24), WINDOW_UPDATE (9 + 4), the
/// HEADERS frame header (9) and its priority fields (5).
const HEADERS_BLOCK: &[u8] = CHROME.split_at(24 + 33 + 13 + 9 + 5).1;

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
    c.bench_function(&format!("{tag}: hpack chrome headers block"), |b| {
        b.iter(|| {
            h2::hpack::Decoder::new()
                .decode(black_box(HEADERS_BLOCK))
                .expect("block decodes")
        })
    });
}

/// With `EXITVOICE_BENCH_ITERS=N` set, runs the full path N times without criterion (for
/// instruction counts under `valgrind --tool=callgrind`, see docs/benchmarks.md). With
/// `EXITVOICE_BENCH_PART` set to `parse`, `hpack`, `akamai` or `voice`, only that part runs
/// (`akamai` and `voice` on a prefix parsed once); `sha` hashes 256 bytes with sha256, the floor
/// of the voice's cost.
fn main() {
    let parsed = h2::parse_prefix(CHROME).expect("fixture parses");
    let ran = match std::env::var("EXITVOICE_BENCH_PART").as_deref() {
        Ok("parse") => support::run_fixed_iterations(|| {
            black_box(h2::parse_prefix(black_box(CHROME)).expect("fixture parses"));
        }),
        Ok("hpack") => support::run_fixed_iterations(|| {
            let mut d = h2::hpack::Decoder::new();
            black_box(d.decode(black_box(HEADERS_BLOCK)).expect("block decodes"));
        }),
        Ok("akamai") => support::run_fixed_iterations(|| {
            black_box(h2::akamai_fingerprint(black_box(&parsed)));
        }),
        Ok("voice") => support::run_fixed_iterations(|| {
            black_box(h2::voice_id(black_box(&parsed)));
        }),
        Ok("sha") => support::run_fixed_iterations(|| {
            use sha2::Digest;
            black_box(sha2::Sha256::digest(black_box(&CHROME[..256])));
        }),
        _ => support::run_fixed_iterations(|| {
            let p = h2::parse_prefix(black_box(CHROME)).expect("fixture parses");
            black_box((h2::akamai_fingerprint(&p), h2::voice_id(&p)));
        }),
    };
    if ran {
        return;
    }
    support::run_wall_and_cpu(benches::<WallTime>, benches::<CpuTime>);
}
