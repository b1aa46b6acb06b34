//! Bucket rules (DESIGN.md) and profile matching on fixtures.

use exitvoice_protocol::classify::{browser_profile, bucket, decide, BucketInput, BucketRule};
use exitvoice_protocol::h2::parse_prefix;
use exitvoice_schema::{Bucket, Spoken};

fn base() -> BucketInput {
    BucketInput {
        alpn_offered_h2: true,
        alpn_negotiated_h2: true,
        spoken: Spoken::H2,
        own_preface_and_settings: true,
        request_index: 1,
        earlier_other_probe: false,
        browser_profile: false,
    }
}

#[test]
fn bucket_rules() {
    assert_eq!(
        bucket(&BucketInput {
            alpn_offered_h2: false,
            ..base()
        }),
        None
    );
    assert_eq!(
        bucket(&BucketInput {
            spoken: Spoken::Http1,
            ..base()
        }),
        Some(Bucket::D)
    );
    assert_eq!(
        bucket(&BucketInput {
            alpn_negotiated_h2: false,
            spoken: Spoken::Http1,
            ..base()
        }),
        None
    );
    assert_eq!(
        bucket(&BucketInput {
            request_index: 2,
            earlier_other_probe: true,
            browser_profile: true,
            ..base()
        }),
        Some(Bucket::C)
    );
    assert_eq!(
        bucket(&BucketInput {
            own_preface_and_settings: false,
            ..base()
        }),
        Some(Bucket::C)
    );
    assert_eq!(
        bucket(&BucketInput {
            request_index: 2,
            ..base()
        }),
        Some(Bucket::B)
    );
    assert_eq!(
        bucket(&BucketInput {
            browser_profile: true,
            ..base()
        }),
        Some(Bucket::A)
    );
    assert_eq!(bucket(&base()), Some(Bucket::B));
}

#[test]
fn chrome_profile_needs_every_defining_field() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/h2/chrome_shaped.bin"
    );
    let bin = std::fs::read(path).expect("fixture");
    assert!(browser_profile(&parse_prefix(&bin).expect("parses")).is_some());
    // Flip the exclusive bit of the HEADERS priority (byte after the 9-byte HEADERS header).
    // Offsets: preface 24, SETTINGS 9+24, WINDOW_UPDATE 9+4, HEADERS header 9.
    let at = 24 + 33 + 13 + 9;
    let mut b = bin.clone();
    b[at] &= 0x7f;
    assert!(browser_profile(&parse_prefix(&b).expect("parses")).is_none());
    // Another WINDOW_UPDATE increment.
    let mut b = bin.clone();
    b[24 + 33 + 12] ^= 1;
    assert!(browser_profile(&parse_prefix(&b).expect("parses")).is_none());
    // Another INITIAL_WINDOW_SIZE value.
    let mut b = bin;
    b[24 + 9 + 12 + 5] ^= 1;
    assert!(browser_profile(&parse_prefix(&b).expect("parses")).is_none());
}

/// The fingerprint page names the rule that decided the bucket; each rule is named
/// for the inputs it decides, and agrees with `bucket`.
#[test]
fn each_bucket_names_its_rule() {
    let cases = [
        (
            BucketInput {
                alpn_offered_h2: false,
                ..base()
            },
            BucketRule::NotOffered,
        ),
        (
            BucketInput {
                spoken: Spoken::Http1,
                ..base()
            },
            BucketRule::Downgrade,
        ),
        (
            BucketInput {
                alpn_negotiated_h2: false,
                ..base()
            },
            BucketRule::NoHttp2,
        ),
        (
            BucketInput {
                request_index: 2,
                earlier_other_probe: true,
                ..base()
            },
            BucketRule::Remux,
        ),
        (
            BucketInput {
                own_preface_and_settings: false,
                ..base()
            },
            BucketRule::NoOwnPreface,
        ),
        (
            BucketInput {
                browser_profile: true,
                ..base()
            },
            BucketRule::BrowserProfile,
        ),
        (base(), BucketRule::Library),
    ];
    for (input, rule) in cases {
        let (decided, named) = decide(&input);
        assert_eq!(named, rule, "{input:?}");
        assert_eq!(decided, bucket(&input), "{input:?}");
        let letter = decided.map_or("no bucket".to_owned(), |b| format!("{b} ("));
        assert!(
            rule.explain().contains(&letter),
            "{rule:?}: {}",
            rule.explain()
        );
    }
}
