//! Our QPACK reader and static table against ls-qpack (pylsqpack, installed with aioquic in
//! `.tools/venv` by scripts/install-test-deps.sh), an independent encoder: every entry of
//! RFC 9204 Appendix A must be encoded by it as the same one Indexed Field Line ours writes, and
//! realistic requests it encodes (Huffman literals, name references) must decode to what it was
//! given, in order.

use std::io::Write as _;
use std::process::{Command, Stdio};

use exitvoice_protocol::h3::{decode_field_section, encode_field_section, STATIC_TABLE};

fn ls_qpack(lists: &[Vec<(String, String)>]) -> Vec<Vec<u8>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join(".tools/venv/bin/python");
    assert!(
        python.exists(),
        "run scripts/install-test-deps.sh (.tools/venv with aioquic)"
    );
    let mut child = Command::new(python)
        .arg(root.join("tests/tools/qpack_encode.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python");
    let input = serde_json::to_vec(lists).expect("json");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&input)
        .expect("write");
    let output = child.wait_with_output().expect("qpack_encode.py");
    assert!(output.status.success(), "qpack_encode.py failed");
    let hex: Vec<String> = serde_json::from_slice(&output.stdout).expect("json");
    hex.iter().map(|h| hex::decode(h).expect("hex")).collect()
}

fn owned(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|&(n, v)| (n.to_owned(), v.to_owned()))
        .collect()
}

#[test]
fn every_static_entry_is_indexed_where_ls_qpack_indexes_it() {
    let lists: Vec<Vec<(String, String)>> =
        STATIC_TABLE.iter().map(|&entry| owned(&[entry])).collect();
    let theirs = ls_qpack(&lists);
    for ((index, &(name, value)), section) in STATIC_TABLE.iter().enumerate().zip(&theirs) {
        assert_eq!(
            *section,
            encode_field_section(&[(name, value)]),
            "static entry {index} ({name}: {value})"
        );
        let fields = decode_field_section(section).expect("decodes");
        assert_eq!(
            (fields[0].name.as_str(), fields[0].value.as_str()),
            (name, value)
        );
    }
}

#[test]
fn requests_encoded_by_ls_qpack_decode_in_order() {
    let requests = [
        owned(&[
            (":method", "GET"),
            (":authority", "echo.exitvoice.test:8443"),
            (":scheme", "https"),
            (":path", "/api/all?token=abc"),
            ("sec-ch-ua", "\"Chromium\";v=\"156\""),
            (
                "user-agent",
                "Mozilla/5.0 (X11; Linux x86_64) HeadlessChrome/156.0.0.0",
            ),
            ("accept", "*/*"),
            ("accept-encoding", "gzip, deflate, br, zstd"),
            ("x-custom-header", "value with spaces & symbols <>"),
            ("priority", "u=0, i"),
        ]),
        owned(&[
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "localhost"),
            (":path", "/"),
            ("content-type", "application/json"),
            ("content-length", "0"),
            ("cookie", ""),
        ]),
    ];
    let sections = ls_qpack(&requests);
    for (request, section) in requests.iter().zip(&sections) {
        let fields = decode_field_section(section).expect("decodes");
        let decoded: Vec<(String, String)> =
            fields.into_iter().map(|f| (f.name, f.value)).collect();
        assert_eq!(&decoded, request);
    }
}
