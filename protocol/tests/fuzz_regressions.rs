//! Replays every input under `tests/data/fuzz-regressions/<target>/` through the same pipeline
//! as the fuzz target of that name (`fuzz/fuzz_targets/<target>.rs`), and checks the outcome
//! recorded for it in [`EXPECTED`]: a crash the fuzzer found stays fixed, and the hostile inputs
//! kept here keep failing with the typed error they fail with today.
//!
//! Every file in those directories must have an entry in [`EXPECTED`] (so a new crash input
//! cannot be dropped in without saying what it must do), and every entry must have its file.

use std::fs;
use std::path::{Path, PathBuf};

use exitvoice_protocol::h2::hpack::HpackError;
use exitvoice_protocol::h2::{self, H2ErrorKind, H2Prefix, PREFACE};
use exitvoice_protocol::pcap::{self, PcapError};
use exitvoice_protocol::tls::{self, HelloScan, TlsError};
use exitvoice_protocol::{classify, h1};

/// What replaying one input must give.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// `tls::scan` on the bytes.
    Scan(fn(&HelloScan) -> bool),
    /// `tls::parse_client_hello` on the bytes.
    Hello(fn(&Result<tls::TlsFingerprints, TlsError>) -> bool),
    /// `h2::parse_prefix` (the error kind, or `None` for success).
    H2(fn(Option<H2ErrorKind>) -> bool),
    /// `h1::parse_head`.
    H1(fn(&Result<h1::H1Head, h1::H1Error>) -> bool),
    /// `pcap::read` (the error, or `None` for success).
    Pcap(fn(Option<&PcapError>) -> bool),
    /// `pcap::read` succeeded; why it stopped before the end (`Capture::stopped`).
    PcapStopped(fn(Option<&PcapError>) -> bool),
}

/// `(target, file, what it must give)`; a file may have several entries.
const EXPECTED: &[(&str, &str, Expect)] = &[
    // A ClientHello whose extension block says 16 bytes and holds 4.
    (
        "client_hello",
        "extension-block-past-end",
        Expect::Hello(|r| {
            matches!(
                r,
                Err(TlsError::Truncated {
                    field: "extensions"
                })
            )
        }),
    ),
    (
        "client_hello",
        "sslv2-hello",
        Expect::Hello(|r| matches!(r, Err(TlsError::Sslv2Hello))),
    ),
    (
        "client_hello",
        "sslv2-hello",
        Expect::Scan(|s| matches!(s, HelloScan::Invalid(TlsError::Sslv2Hello))),
    ),
    // An alert record where the hello belongs.
    (
        "client_hello",
        "alert-record",
        Expect::Scan(|s| {
            matches!(
                s,
                HelloScan::Invalid(TlsError::NotHandshakeRecord { content_type: 21 })
            )
        }),
    ),
    // The first 100 bytes of curl's recorded hello: the socket must wait for the rest of the
    // 517-byte record, the parser must call it truncated.
    (
        "client_hello",
        "cut-real-hello",
        Expect::Scan(|s| matches!(s, HelloScan::NeedMore { at_least: 517 })),
    ),
    (
        "client_hello",
        "cut-real-hello",
        Expect::Hello(|r| matches!(r, Err(TlsError::Truncated { .. }))),
    ),
    // A DATA frame header with length 2^24 - 1 after the SETTINGS.
    (
        "h2_prefix",
        "frame-length-16mib",
        Expect::H2(|k| k == Some(H2ErrorKind::FrameTooLarge { length: 0xff_ffff })),
    ),
    // HEADERS whose block is one indexed field, index 255, with an empty dynamic table.
    (
        "h2_prefix",
        "hpack-index-past-table",
        Expect::H2(|k| {
            matches!(
                k,
                Some(H2ErrorKind::Hpack(HpackError::IndexPastTable { .. }))
            )
        }),
    ),
    (
        "h2_prefix",
        "continuation-without-headers",
        Expect::H2(|k| k == Some(H2ErrorKind::UnexpectedContinuation)),
    ),
    (
        "h1_head",
        "obs-fold",
        Expect::H1(|r| matches!(r, Err(h1::H1Error::ObsFold { line: 2 }))),
    ),
    (
        "h1_head",
        "no-request-line",
        Expect::H1(|r| matches!(r, Err(h1::H1Error::BadRequestLine))),
    ),
    // The first 10 bytes of a pcap file header (24 bytes).
    (
        "pcap",
        "cut-file-header",
        Expect::Pcap(|e| e == Some(&PcapError::BadHeader)),
    ),
    (
        "pcap",
        "random-bytes",
        Expect::Pcap(|e| e == Some(&PcapError::NotACapture)),
    ),
    // Found by the `pcap` fuzz target: a big-endian pcapng whose second block is a Process
    // Information Block (type 0x80000001) with total length 4; pcap-parser 0.17 computed
    // `4 - 12` (overflow panic with overflow checks on). Now the walk stops there.
    (
        "pcap",
        "pib-block-length-under-12",
        Expect::PcapStopped(|e| e == Some(&PcapError::BadBlock { offset: 284 })),
    ),
];

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz-regressions")
}

fn read(target: &str, file: &str) -> Vec<u8> {
    let path = dir().join(target).join(file);
    fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `client_hello` fuzz target's pipeline.
fn client_hello(data: &[u8]) -> Result<tls::TlsFingerprints, TlsError> {
    if let HelloScan::Complete { len } = tls::scan(data) {
        let records = data.get(..len).expect("scan length within the input");
        if let Ok(hello) = tls::parse_client_hello(records) {
            let _ = tls::echo(&hello);
        }
    }
    let hello = tls::parse_client_hello(data)?;
    let _ = tls::echo(&hello);
    Ok(hello.fingerprints())
}

fn h2_exercise(prefix: &H2Prefix) {
    let _ = h2::akamai_fingerprint(prefix);
    let _ = h2::voice_id(prefix);
    let _ = classify::browser_profile(prefix);
    for index in 0..=prefix.requests.len() {
        let _ = h2::echo(prefix, index);
    }
}

/// The `h2_prefix` fuzz target's pipeline (the preface is put in front unless the input
/// starts with `PRI`).
fn h2_prefix(data: &[u8]) -> Option<H2ErrorKind> {
    let bytes = if data.starts_with(b"PRI") {
        data.to_vec()
    } else {
        [PREFACE, data].concat()
    };
    match h2::parse_prefix(&bytes) {
        Ok(prefix) => {
            h2_exercise(&prefix);
            None
        }
        Err(e) => {
            h2_exercise(&e.partial);
            Some(e.kind)
        }
    }
}

/// The `h1_head` fuzz target's pipeline.
fn h1_head(data: &[u8]) -> Result<h1::H1Head, h1::H1Error> {
    let _ = classify::sniff(data);
    let head = h1::parse_head(data)?;
    let _ = h1::echo(&head);
    Ok(head)
}

/// The `pcap` fuzz target's pipeline.
fn pcap_read(data: &[u8]) -> Option<PcapError> {
    match pcap::read(data, None) {
        Ok(capture) => {
            for conn in &capture.connections {
                for hello in &conn.client_hellos {
                    let _ = client_hello(hello);
                }
                if let Some(bytes) = conn.client_data.bytes() {
                    let _ = h2::parse_prefix(bytes).map(|p| h2_exercise(&p));
                    let _ = h1_head(bytes);
                }
            }
            None
        }
        Err(e) => Some(e),
    }
}

#[test]
fn every_regression_input_gives_its_recorded_outcome() {
    for (target, file, expect) in EXPECTED {
        let data = read(target, file);
        let ok = match expect {
            Expect::Scan(check) => check(&tls::scan(&data)),
            Expect::Hello(check) => check(&client_hello(&data)),
            Expect::H2(check) => check(h2_prefix(&data)),
            Expect::H1(check) => check(&h1_head(&data)),
            Expect::Pcap(check) => check(pcap_read(&data).as_ref()),
            Expect::PcapStopped(check) => match pcap::read(&data, None) {
                Ok(capture) => check(capture.stopped.as_ref()),
                Err(_) => false,
            },
        };
        assert!(ok, "{target}/{file}: not the recorded outcome ({expect:?})");
    }
}

#[test]
fn every_input_in_the_regression_dirs_is_listed_and_replays_without_panic() {
    let mut seen = 0;
    for target in ["client_hello", "h2_prefix", "h1_head", "pcap"] {
        let entries = fs::read_dir(dir().join(target)).expect("regression dir exists");
        for entry in entries {
            let name = entry.expect("dir entry").file_name();
            let name = name.to_str().expect("UTF-8 file name");
            assert!(
                EXPECTED.iter().any(|(t, f, _)| *t == target && *f == name),
                "{target}/{name} has no entry in EXPECTED"
            );
            let data = read(target, name);
            // Every input through every pipeline, not only its own: none may panic.
            let _ = client_hello(&data);
            let _ = h2_prefix(&data);
            let _ = h1_head(&data);
            let _ = pcap_read(&data);
            seen += 1;
        }
    }
    let mut listed: Vec<_> = EXPECTED.iter().map(|(t, f, _)| (*t, *f)).collect();
    listed.sort_unstable();
    listed.dedup();
    assert_eq!(seen, listed.len(), "every listed input has its file");
}
