//! Hostile and damaged captures: typed errors or partial results, never a panic.

use std::path::Path;

use exitvoice_protocol::pcap::{self, ClientData, PcapError};
use proptest::prelude::*;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ja4/pcap");

fn capture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(DIR).join(name)).expect("capture in the repo")
}

/// The pcapng blocks of a little-endian capture, as (offset, length).
fn blocks(file: &[u8]) -> Vec<(usize, usize)> {
    assert_eq!(
        &file[8..12],
        &[0x4d, 0x3c, 0x2b, 0x1a],
        "a little-endian section"
    );
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= file.len() {
        let len = u32::from_le_bytes(file[at + 4..at + 8].try_into().expect("4 bytes")) as usize;
        out.push((at, len));
        at += len;
    }
    out
}

/// The capture without its `frame`-th packet (1-based, as tshark numbers them).
fn drop_frame(file: &[u8], frame: usize) -> Vec<u8> {
    let mut seen = 0;
    let mut out = Vec::new();
    for (at, len) in blocks(file) {
        let kind = u32::from_le_bytes(file[at..at + 4].try_into().expect("4 bytes"));
        if kind == 6 || kind == 3 {
            seen += 1;
            if seen == frame {
                continue;
            }
        }
        out.extend_from_slice(&file[at..at + len]);
    }
    out
}

fn decrypted(conns: &[pcap::PcapConnection]) -> Vec<u8> {
    match &conns.first().expect("a connection").client_data {
        ClientData::Decrypted(bytes) => bytes.clone(),
        other => panic!("not decrypted: {other:?}"),
    }
}

/// Frame 19 of `http2-with-cookies.pcapng` carries client bytes 2405..2436 (tshark: a
/// SETTINGS ack). Without it the client stream has a hole: the connection is still reported,
/// with its ClientHello and the application data before the hole.
#[test]
fn a_hole_in_the_client_stream_gives_the_bytes_before_it() {
    let file = capture("http2-with-cookies.pcapng");
    let full = decrypted(&pcap::connections(&file, None).expect("a capture"));
    let holed = drop_frame(&file, 19);
    let conns = pcap::connections(&holed, None).expect("a capture");
    let conn = conns.first().expect("a connection");
    assert!(conn.client_stream.gap);
    assert_eq!(
        conn.client_stream.bytes, 2404,
        "client bytes before sequence number 2405"
    );
    assert_eq!(conn.client_hellos.len(), 1);
    let partial = decrypted(&conns);
    assert!(!partial.is_empty() && partial.len() < full.len());
    assert!(full.starts_with(&partial));
}

#[test]
fn a_truncated_file_keeps_the_frames_before_the_cut() {
    let file = capture("http2-with-cookies.pcapng");
    let blocks = blocks(&file);
    // Cut in the middle of the 40th block.
    let (at, len) = blocks[40];
    let cut = &file[..at + len / 2];
    let read = pcap::read(cut, None).expect("the header is intact");
    assert_eq!(read.stopped, Some(PcapError::Truncated { offset: at }));
    assert_eq!(
        read.connections.len(),
        1,
        "the TLS connection started before the cut"
    );
    // Every cut point of a small classic pcap is handled.
    let small = capture("badcurveball.pcap");
    for end in 0..small.len() {
        let _ = pcap::read(&small[..end], None);
    }
    assert_eq!(
        pcap::read(&small[..10], None).err(),
        Some(PcapError::BadHeader)
    );
}

#[test]
fn bogus_block_lengths_stop_the_walk_with_a_typed_reason() {
    let file = capture("chrome-cloudflare-quic-with-secrets.pcapng");
    let blocks = blocks(&file);
    let (at, _) = blocks[10];
    for bogus in [0u32, 3, 12, 0xffff_fff0, u32::MAX] {
        let mut bad = file.clone();
        bad[at + 4..at + 8].copy_from_slice(&bogus.to_le_bytes());
        let capture = pcap::read(&bad, None).expect("the header is intact");
        assert!(
            matches!(
                capture.stopped,
                Some(PcapError::BadBlock { offset } | PcapError::Truncated { offset }) if offset == at
            ),
            "length {bogus:#x}: {:?}",
            capture.stopped
        );
    }
}

#[test]
fn random_bytes_are_not_a_capture() {
    // xorshift64, so the 64 KiB are the same on every run.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let random: Vec<u8> = (0..64 * 1024)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect();
    assert_eq!(
        pcap::connections(&random, None),
        Err(PcapError::NotACapture)
    );
    // Behind a valid pcap header, the same bytes are frames of nonsense: read, not panicked on.
    let mut with_header = capture("badcurveball.pcap")[..24].to_vec();
    with_header.extend_from_slice(&random);
    let _ = pcap::read(&with_header, None).expect("a valid header");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let _ = pcap::connections(&bytes, None);
    }

    #[test]
    fn arbitrary_frames_behind_valid_headers_never_panic(
        body in proptest::collection::vec(any::<u8>(), 0..4096),
        ng in any::<bool>(),
    ) {
        let header_source = if ng { "tls-non-ascii-alpn.pcapng" } else { "tls12.pcap" };
        let file = capture(header_source);
        let header_len = if ng { 28 } else { 24 };
        let mut bytes = file[..header_len].to_vec();
        bytes.extend_from_slice(&body);
        let _ = pcap::connections(&bytes, Some("CLIENT_RANDOM 00 11\n"));
    }

    #[test]
    fn mutated_real_captures_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16),
        ng in any::<bool>(),
    ) {
        let mut file = capture(if ng { "tls-non-ascii-alpn.pcapng" } else { "badcurveball.pcap" });
        for (index, byte) in flips {
            let at = index.index(file.len());
            file[at] = byte;
        }
        let _ = pcap::connections(&file, None);
    }
}
