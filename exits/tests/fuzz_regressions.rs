//! Inputs the `exits_file` fuzz target (`fuzz/fuzz_targets/exits_file.rs`) led to, replayed.
//!
//! Both are files under `MAX_CONFIG_BYTES` that used to cost far more than their size: gateway
//! entries of 1024 sessions each expanded a 1 MiB file to ~15 million exits (the fuzz target
//! timed out, then ran out of memory), and a plain list of 60,000 distinct URLs took quadratic
//! time to name. They are generated here rather than stored, at today's limits.

use exitvoice_exits::config::{MAX_CONFIG_BYTES, MAX_EXITS, MAX_SESSIONS};
use exitvoice_exits::{ConfigError, ExitsFile};
use serde::de::IgnoredAny;

fn parse(bytes: &[u8]) -> Result<ExitsFile<IgnoredAny>, ConfigError> {
    ExitsFile::parse(bytes)
}

fn gateway(name: &str, sessions: usize) -> String {
    format!(
        "[[exits]]\nname = \"{name}\"\nurl = \"http://u{{session}}@a:1\"\nsessions = {sessions}\n"
    )
}

#[test]
fn a_file_of_gateways_cannot_expand_past_max_exits() {
    let per = MAX_SESSIONS as usize;
    let mut text = String::new();
    let mut count = 0;
    // Small beside the limit on bytes, and a thousand times the limit on exits once expanded.
    while count * per <= 1_000 * MAX_EXITS {
        text.push_str(&gateway(&format!("g{count}"), per));
        count += 1;
    }
    assert!(text.len() < MAX_CONFIG_BYTES / 100, "{} bytes", text.len());
    assert!(matches!(
        parse(text.as_bytes()),
        Err(ConfigError::TooManyExits)
    ));

    // Exactly MAX_EXITS is still accepted; one more is not.
    let full = MAX_EXITS / per;
    let mut text: String = (0..full).map(|i| gateway(&format!("g{i}"), per)).collect();
    let rest = MAX_EXITS - full * per;
    if rest > 0 {
        text.push_str(&gateway("last", rest));
    }
    let file = parse(text.as_bytes()).expect("MAX_EXITS exits");
    assert_eq!(file.exits.len(), MAX_EXITS);
    text.push_str("[[exits]]\nname = \"one-more\"\nurl = \"http://a:2\"\n");
    assert!(matches!(
        parse(text.as_bytes()),
        Err(ConfigError::TooManyExits)
    ));
}

#[test]
fn a_long_plain_list_is_refused_and_duplicates_are_still_renamed() {
    let text: String = (0..=MAX_EXITS)
        .map(|i| format!("http://h{i:06}:1\n"))
        .collect();
    assert!(text.len() <= MAX_CONFIG_BYTES);
    assert!(matches!(
        parse(text.as_bytes()),
        Err(ConfigError::TooManyExits)
    ));

    let file = parse(b"http://a:1\nhttp://b:1\nhttp://a:1\nhttp://a:1\n").unwrap();
    let names: Vec<_> = file.exits.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        ["http://a:1", "http://b:1", "http://a:1#3", "http://a:1#4"]
    );
}
