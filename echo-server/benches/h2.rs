//! Decrypted Chrome-shaped prefix → HTTP/2 voice (parse + HPACK + Akamai + voice).
//!
//! Run with `cargo bench -p exitvoice-echo --bench h2 -- --warm-up-time 1 --measurement-time 3`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use exitvoice_echo::h2;

const CHROME: &[u8] = include_bytes!("../tests/data/h2/chrome_shaped.bin");

fn prefix_to_voice(c: &mut Criterion) {
    c.bench_function("h2 chrome prefix -> akamai + voice", |b| {
        b.iter(|| {
            let p = h2::parse_prefix(black_box(CHROME)).expect("fixture parses");
            let akamai = h2::akamai_fingerprint(&p);
            let voice = h2::voice_id(&p);
            (akamai, voice)
        })
    });
    c.bench_function("h2 chrome prefix parse only", |b| {
        b.iter(|| h2::parse_prefix(black_box(CHROME)).expect("fixture parses"))
    });
}

criterion_group!(benches, prefix_to_voice);
criterion_main!(benches);
