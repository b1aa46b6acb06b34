use super::*;
use exitvoice_schema::VoiceId;
use serde_json::json;

/// A code as the echo serializes it.
fn c(value: u64) -> Value {
    json!({ "value": value })
}

/// A ClientHello `detail` with these ciphers and extensions (type, body kind, body value).
fn hello(ciphers: &[u64], extensions: &[(u64, &str, Value)]) -> Value {
    json!({
        "legacy_version": c(0x0303),
        "cipher_suites": ciphers.iter().map(|&v| c(v)).collect::<Vec<_>>(),
        "extensions": extensions
            .iter()
            .map(|(kind, body, value)| json!({
                "type": c(*kind),
                "len": 0,
                "body": { "kind": body, "value": value },
            }))
            .collect::<Vec<_>>(),
    })
}

fn codes_of(values: &[u64]) -> Value {
    Value::Array(values.iter().map(|&v| c(v)).collect())
}

fn echo(detail: Value, akamai: &str, pseudo: &[&str]) -> Echo {
    let mut echo = crate::test_echo::echo(&detail);
    if let Some(h2) = &mut echo.http2 {
        h2.akamai_fingerprint = akamai.into();
        h2.pseudo_header_order = pseudo.iter().map(|&p| p.to_owned()).collect();
        h2.header_order = vec!["user-agent".into(), "accept".into()];
    }
    echo
}

const CHROME_H2: &str = "1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p";
const CHROME_PSEUDO: &[&str] = &[":method", ":authority", ":scheme", ":path"];

fn chrome_like(grease: u64, permuted: bool) -> Echo {
    let mut extensions = vec![
        (grease, "grease", json!("")),
        (
            0x000a,
            "supported_groups",
            codes_of(&[grease, 0x001d, 0x0017]),
        ),
        (0x0010, "alpn", json!(["h2", "http/1.1"])),
        (
            0x002b,
            "supported_versions",
            codes_of(&[grease, 0x0304, 0x0303]),
        ),
        (0x0015, "padding", json!({ "len": 3 })),
    ];
    if permuted {
        extensions.reverse();
    }
    echo(
        hello(&[grease, 0x1301, 0x1302, 0x1303], &extensions),
        CHROME_H2,
        CHROME_PSEUDO,
    )
}

fn diff(a: &Echo, b: &Echo) -> Vec<Change> {
    between(&VoiceView::of_echo(a), &VoiceView::of_echo(b))
}

fn field<'c>(changes: &'c [Change], name: &str) -> &'c Change {
    changes
        .iter()
        .find(|c| c.field == name)
        .unwrap_or_else(|| panic!("no change of {name}: {changes:?}"))
}

#[test]
fn grease_and_permutation_are_no_change() {
    let changes = diff(&chrome_like(0x0a0a, false), &chrome_like(0xdada, true));
    assert_eq!(changes, []);
}

#[test]
fn tls_lists_say_added_removed_reordered() {
    let before = chrome_like(0x0a0a, false);
    let after = echo(
        hello(
            &[0x1302, 0x1301, 0xc02b],
            &[
                (
                    0x000a,
                    "supported_groups",
                    codes_of(&[0x001d, 0x0017, 0x0018]),
                ),
                (0x0010, "alpn", json!(["http/1.1"])),
                (0x002b, "supported_versions", codes_of(&[0x0304, 0x0303])),
                (0x001b, "compress_certificate", codes_of(&[0x0002])),
            ],
        ),
        CHROME_H2,
        CHROME_PSEUDO,
    );
    let changes = diff(&before, &after);
    let ciphers = field(&changes, "cipher_suites");
    assert_eq!(ciphers.layer, "tls");
    assert_eq!(ciphers.before, "0x1301,0x1302,0x1303");
    assert_eq!(ciphers.after, "0x1302,0x1301,0xc02b");
    assert_eq!(
        (ciphers.added.as_slice(), ciphers.removed.as_slice()),
        (&["0xc02b".to_owned()][..], &["0x1303".to_owned()][..])
    );
    assert!(ciphers.reordered);
    let groups = field(&changes, "supported_groups");
    assert_eq!(groups.added, ["0x0018"]);
    assert!(groups.removed.is_empty() && !groups.reordered);
    assert_eq!(field(&changes, "alpn").removed, ["h2"]);
    let extensions = field(&changes, "extensions");
    assert_eq!(extensions.added, ["0x001b"]);
    assert!(
        extensions.removed.is_empty(),
        "padding is volatile: {extensions:?}"
    );
    assert_eq!(field(&changes, "compress_certificate").added, ["0x0002"]);
    assert!(
        !changes.iter().any(|c| c.field == "supported_versions"),
        "same versions once GREASE is dropped: {changes:?}"
    );
}

#[test]
fn http2_settings_window_update_and_pseudo_order() {
    let before = chrome_like(0x0a0a, false);
    let mut after = before.clone();
    if let Some(h2) = after.http2.as_mut() {
        h2.akamai_fingerprint = "2:0;4:2097152;5:16384;6:16777216|5177345|0|m,s,a,p".into();
        h2.pseudo_header_order = vec![
            ":method".into(),
            ":scheme".into(),
            ":authority".into(),
            ":path".into(),
        ];
        h2.header_order.reverse();
    }
    let changes = diff(&before, &after);
    let settings = field(&changes, "settings");
    assert_eq!(settings.layer, "http2");
    assert_eq!(settings.removed, ["1:65536", "4:6291456", "6:262144"]);
    assert_eq!(settings.added, ["4:2097152", "5:16384", "6:16777216"]);
    let window = field(&changes, "window_update");
    assert_eq!(
        (window.before.as_str(), window.after.as_str()),
        ("15663105", "5177345")
    );
    let pseudo = field(&changes, "pseudo_header_order");
    assert!(pseudo.reordered && pseudo.added.is_empty() && pseudo.removed.is_empty());
    assert!(field(&changes, "header_order").reordered);
    assert!(changes.iter().all(|c| c.layer == "http2"), "{changes:?}");
}

#[test]
fn a_downgrade_shows_the_protocol_and_both_layers() {
    let before = chrome_like(0x0a0a, false);
    let mut after = before.clone();
    after.alpn.spoken = Spoken::Http1;
    after.http2 = None;
    after.http1 = Some(Http1Echo {
        request_line: "GET / HTTP/1.1".into(),
        header_order: vec!["Host".into(), "User-Agent".into()],
        voice_id: VoiceId("h1v1_x".into()),
    });
    let changes = diff(&before, &after);
    let spoken = field(&changes, "spoken");
    assert_eq!(
        (spoken.before.as_str(), spoken.after.as_str()),
        ("h2", "http/1.1")
    );
    assert_eq!(field(&changes, "settings").after, "");
    assert_eq!(field(&changes, "version").after, "HTTP/1.1");
    assert_eq!(field(&changes, "header_order").layer, "http2");
}

/// Hostile detail JSON (wrong types everywhere) is read as text, never a panic.
#[test]
fn odd_shapes_do_not_panic() {
    for detail in [
        json!(null),
        json!([1, 2]),
        json!({ "cipher_suites": "x", "extensions": [1, { "type": "y" }, { "type": { "value": -1 }, "body": 3 }] }),
        json!({ "extensions": [{ "type": c(10), "body": { "kind": 5, "value": [null, {}, [1]] } }] }),
    ] {
        let odd = echo(detail, "||", &[]);
        let _ = diff(&chrome_like(0x0a0a, false), &odd);
        let _ = diff(&odd, &odd);
    }
}

/// Any JSON tree, nested a few levels, with the echo's key names mixed in.
fn json_tree() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let key = prop::sample::select(vec![
        "value",
        "name",
        "type",
        "body",
        "kind",
        "group",
        "extensions",
        "cipher_suites",
        "legacy_version",
        "request",
        "priority",
        "x",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u16>().prop_map(Value::from),
        "[a-z0-9_/.]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6).prop_map(|pairs| {
                Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

proptest::proptest! {
    /// The detail comes from the echo, through an exit that may be hostile: any shape is read
    /// without a panic, and a voice never differs from itself.
    #[test]
    fn arbitrary_detail_never_panics(detail in json_tree(), akamai in "[0-9:;,|a-z]{0,40}") {
        let odd = echo(detail, &akamai, CHROME_PSEUDO);
        let _ = diff(&chrome_like(0x0a0a, false), &odd);
        proptest::prop_assert!(diff(&odd, &odd).is_empty());
    }
}
