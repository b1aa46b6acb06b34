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

fn hpack_block(c: &mut Criterion) {
    // The HEADERS block: preface 24, SETTINGS 9+24, WINDOW_UPDATE 9+4, HEADERS header 9,
    // priority fields 5.
    let block = &CHROME[24 + 33 + 13 + 9 + 5..];
    c.bench_function("hpack chrome headers block", |b| {
        b.iter(|| {
            h2::hpack::Decoder::new()
                .decode(black_box(block))
                .expect("block decodes")
        })
    });
}

criterion_group!(benches, prefix_to_voice, hpack_block);
criterion_main!(benches);
