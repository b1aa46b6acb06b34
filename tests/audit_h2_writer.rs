//! The h2 writer's bytes, decoded by an independent implementation: Python `hyperframe` and
//! `hpack` in `.tools/venv` (made by scripts/install-test-deps.sh).
//!
//! Expected Akamai strings are reference values, not our output: Chrome 119–150 from
//! curl-impersonate's signature files, as docs/voice-http.md ("Browser profiles") lists them.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use exitvoice_auditor::probe::h2::{request_bytes, H2Profile};

/// Chrome 119–150 desktop (docs/voice-http.md, "Browser profiles").
const CHROME_AKAMAI: &str = "1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p";

fn decode(bytes: &[u8]) -> serde_json::Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join(".tools/venv/bin/python");
    assert!(
        python.exists(),
        "run scripts/install-test-deps.sh (needs .tools/venv with hpack, hyperframe)"
    );
    let mut child = Command::new(python)
        .arg(root.join("tests/tools/decode_h2.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn python");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn chrome_profile_decodes_to_chromes_akamai_fingerprint() {
    let bytes = request_bytes(&H2Profile::chrome(), "echo.test:18443", "/probe/abc");
    let decoded = decode(&bytes);
    assert_eq!(decoded["akamai"], CHROME_AKAMAI);
    assert_eq!(
        decoded["priority"],
        serde_json::json!({"exclusive": true, "depends_on": 0, "weight": 256})
    );
    assert_eq!(
        decoded["headers_flags"],
        serde_json::json!(["END_HEADERS", "END_STREAM", "PRIORITY"])
    );
    let headers = decoded["headers"].as_array().unwrap();
    let names: Vec<&str> = headers.iter().map(|h| h[0].as_str().unwrap()).collect();
    assert_eq!(&names[..4], [":method", ":authority", ":scheme", ":path"]);
    assert_eq!(headers[1][1], "echo.test:18443");
    assert_eq!(headers[3][1], "/probe/abc");
    // Chrome's regular header order (navigation request).
    assert_eq!(
        &names[4..],
        [
            "sec-ch-ua",
            "sec-ch-ua-mobile",
            "sec-ch-ua-platform",
            "upgrade-insecure-requests",
            "user-agent",
            "accept",
            "sec-fetch-site",
            "sec-fetch-mode",
            "sec-fetch-user",
            "sec-fetch-dest",
            "accept-language",
            "priority"
        ]
    );
}

#[test]
fn library_profile_and_long_header_blocks() {
    let decoded = decode(&request_bytes(&H2Profile::rustls_default(), "h:1", "/"));
    assert_eq!(
        decoded["akamai"],
        "2:0;4:2097152;5:16384;6:16777216|5177345|0|m,s,a,p"
    );
    assert_eq!(decoded["priority"], serde_json::Value::Null);

    // A header block larger than one frame goes out as HEADERS + CONTINUATION.
    let mut big = H2Profile::rustls_default();
    big.headers.push(("x-long".to_owned(), "v".repeat(40_000)));
    let decoded = decode(&request_bytes(&big, "h:1", "/"));
    let headers = decoded["headers"].as_array().unwrap();
    assert_eq!(headers.last().unwrap()[1].as_str().unwrap().len(), 40_000);
    assert_eq!(decoded["headers_flags"], serde_json::json!(["END_STREAM"]));
}
