use super::recovery::clean_streak;
use super::*;
use exitvoice_schema::{
    Alpn, Bucket, DriftState, Echo, ProbeFailure, RequestPosition, Route, Spoken, VoiceId,
};

/// An h2 echo without TLS or HTTP/2 layers: the labels read only the sample.
fn echo() -> Echo {
    let mut echo = crate::test_echo::echo(&serde_json::Value::Null);
    echo.alpn = Alpn {
        offered: vec![],
        negotiated: None,
        spoken: Spoken::H2,
    };
    echo.tls = None;
    echo.http2 = None;
    echo
}

fn ok(at: u32, tls: &str, bucket: Bucket, preserved: bool, intercepted: bool) -> ProbeRecord {
    ProbeRecord {
        schema_version: 1,
        run_id: "r".into(),
        exit: Some("x".into()),
        exit_url: None,
        session: None,
        token: format!("t{at}"),
        persona: "p".into(),
        started_at: format!("2026-01-01T00:00:{at:02}Z"),
        latency_ms: Some(u64::from(at) * 10),
        error: None,
        sample: Some(Sample {
            egress_ip: "127.0.0.1".into(),
            tls_voice: Some(VoiceId(tls.into())),
            h2_voice: Some(VoiceId("h2v1_x".into())),
            h1_voice: None,
            bucket: Some(bucket),
            profile: None,
            alpn: Some("h2".into()),
            stream_id: Some(1),
            request_index: 1,
            tls_intercepted: intercepted,
            cert_spki_sha256: String::new(),
            cert_issuer: None,
            tls_preserved: Some(preserved),
            h2_preserved: Some(preserved),
            alpn_preserved: Some(preserved),
            remuxed: Some(false),
            coherence: None,
            geo: None,
            echo: echo(),
        }),
        retried: Vec::new(),
        h3: None,
        ledger: None,
    }
}

fn failed(at: u32, class: &str) -> ProbeRecord {
    ProbeRecord {
        error: Some(ProbeFailure {
            class: class.into(),
            phase: None,
            message: String::new(),
        }),
        sample: None,
        latency_ms: None,
        ..ok(at, "", Bucket::A, true, false)
    }
}

fn info() -> ExitInfo {
    ExitInfo {
        name: "x".into(),
        url: "http://u:***@h:1".into(),
        tags: BTreeMap::new(),
        rotate: false,
        country: None,
        asn: None,
    }
}

fn route(records: &[ProbeRecord]) -> ExitLabel {
    label(
        &info(),
        records,
        &RouteRule::default(),
        DriftConfig::default(),
        Prior::default(),
    )
}

#[test]
fn stable_browser_shaped_preserved_is_identity() {
    let records: Vec<_> = (1..=4)
        .map(|i| ok(i, "tlsA", Bucket::A, true, false))
        .collect();
    let label = route(&records);
    assert_eq!(
        (label.state, label.route),
        (DriftState::Stable, Route::Identity)
    );
    assert!(label.flags.tls_preserved && label.flags.h2_preserved);
    assert_eq!(label.samples, 4);
    assert_eq!(label.latency.p50_ms, Some(20));
    assert_eq!(label.latency.p95_ms, Some(40));
    assert_eq!(label.last_probe_at.as_deref(), Some("2026-01-01T00:00:04Z"));
}

#[test]
fn quarantine_reasons() {
    let intercepted: Vec<_> = (1..=4)
        .map(|i| ok(i, "tlsM", Bucket::B, false, true))
        .collect();
    assert_eq!(route(&intercepted).route, Route::Quarantine);
    let downgrade: Vec<_> = (1..=4)
        .map(|i| ok(i, "tlsA", Bucket::D, true, false))
        .collect();
    assert_eq!(route(&downgrade).route_reason, "bucket D");
    let mutating: Vec<_> = ["a", "b", "c"]
        .iter()
        .zip(1..)
        .map(|(v, i)| ok(i, v, Bucket::A, true, false))
        .collect();
    let label = route(&mutating);
    assert_eq!(
        (label.state, label.route),
        (DriftState::Mutating, Route::Stateless)
    );
    assert_eq!(label.route_reasons, ["state mutating"]);
    let rule: RouteRule = toml::from_str("quarantine_states = [\"mutating\"]").unwrap();
    let strict = label_with(&mutating, &rule, Prior::default());
    assert_eq!(strict.route, Route::Quarantine);
    let failing: Vec<_> = (1..=4).map(|i| failed(i, "proxy_auth")).collect();
    let label = route(&failing);
    assert_eq!(label.route, Route::Quarantine);
    assert_eq!(label.errors.get("proxy_auth"), Some(&4));
    assert_eq!(label.state, DriftState::Unknown);
}

/// A balancer's dead backend hidden behind each sample's retry (every first attempt
/// times out, every retry lands on the live backend) is half of the exit's connections.
#[test]
fn retried_attempts_are_probes_of_their_own() {
    let records: Vec<_> = (1..=4)
        .map(|i| ProbeRecord {
            retried: vec![ProbeFailure {
                class: "timeout".into(),
                phase: Some("tunnel".into()),
                message: String::new(),
            }],
            ..ok(i, "tls_a", Bucket::A, true, false)
        })
        .collect();
    let label = route(&records);
    assert_eq!(label.errors.get("timeout"), Some(&4));
    assert_eq!(label.route, Route::Quarantine);
    assert_eq!(label.route_reasons[0], "failing: 4 of 8 probes failed");
    assert_eq!(label.clean_samples, 0);
    assert_eq!(
        label.state,
        DriftState::Stable,
        "the voices themselves agree"
    );
    // Without the retries the same voices make an identity exit.
    let first_try: Vec<_> = (1..=4)
        .map(|i| ok(i, "tls_a", Bucket::A, true, false))
        .collect();
    assert_eq!(route(&first_try).route, Route::Identity);
}

/// Records from before a normalization upgrade (`tlsv1_`) are not compared with the ones
/// after it: no switch, no `changed_at`, only the new voice listed.
#[test]
fn a_new_normalization_is_not_drift() {
    let records: Vec<_> = (1..=6)
        .map(|i| {
            let tls = if i <= 3 { "tlsv1_aaaa" } else { "tlsv2_bbbb" };
            ok(i, tls, Bucket::A, true, false)
        })
        .collect();
    let label = route(&records);
    assert_eq!(label.state, DriftState::Stable);
    assert_eq!(label.changed_at, None);
    assert_eq!(label.voices, ["tlsv2_bbbb+h2v1_x"]);
    assert_eq!(label.samples, 6);
    // Two voices of one scheme after the upgrade are still a switch.
    let mut switched = records.clone();
    switched.extend((7..=8).map(|i| ok(i, "tlsv2_cccc", Bucket::A, true, false)));
    let label = route(&switched);
    assert_eq!(label.state, DriftState::Stable);
    assert_eq!(label.changed_at.as_deref(), Some("2026-01-01T00:00:07Z"));
    // HTTP/2 and HTTP/1 voices are two layers, not two versions: they are compared.
    let flapping: Vec<_> = (1..=4)
        .map(|i| {
            let mut record = ok(i, "tlsv2_bbbb", Bucket::A, true, false);
            if let Some(sample) = record.sample.as_mut().filter(|_| i % 2 == 0) {
                sample.h2_voice = None;
                sample.h1_voice = Some(VoiceId("h1v1_y".into()));
            }
            record
        })
        .collect();
    assert_eq!(route(&flapping).state, DriftState::Alternating);
}

fn label_with(records: &[ProbeRecord], rule: &RouteRule, prior: Prior<'_>) -> ExitLabel {
    label(&info(), records, rule, DriftConfig::default(), prior)
}

/// A mutating, intercepted, bucket-D exit names all three, most severe first,
/// and what keeps it from identity after them.
#[test]
fn every_reason_is_listed() {
    let records: Vec<_> = ["a", "b", "c", "d"]
        .iter()
        .zip(1..)
        .map(|(v, i)| ok(i, v, Bucket::D, false, true))
        .collect();
    let label = route(&records);
    assert_eq!(label.route, Route::Quarantine);
    assert_eq!(
        label.route_reasons,
        [
            "tls_intercepted",
            "tls_reoriginated",
            "bucket D",
            "state mutating",
            "tls not preserved",
            "h2 not preserved"
        ]
    );
    assert_eq!(label.route_reason, "tls_intercepted");
    let anonymous: Vec<_> = (1..=4)
        .map(|i| ok(i, "tlsA", Bucket::B, true, false))
        .collect();
    assert_eq!(route(&anonymous).route_reasons, ["bucket B"]);
}

/// Quarantine, recovery after `recover_after` clean probes, and the transitions, run by run:
/// each run's label is computed from the records so far and the previous run's label.
#[test]
fn quarantine_recovers_after_enough_clean_probes() {
    let rule = RouteRule::default();
    let mut records: Vec<ProbeRecord> = Vec::new();
    let mut previous: Option<ExitLabel> = None;
    // (probes of the run: true = clean success, false = failure; route, clean_samples,
    //  quarantined_since, recovered_at)
    type Run = (&'static [bool], Route, u32, Option<u32>, Option<u32>);
    #[rustfmt::skip]
    let runs: [Run; 5] = [
        (&[true, true, true], Route::Identity, 3, None, None),
        (&[false, false, false], Route::Quarantine, 0, Some(6), None),
        // 3 of 8 failed: the window would pass, but 3 clean probes are not 4.
        (&[true, true, true], Route::Quarantine, 3, Some(6), None),
        (&[true], Route::Identity, 4, None, Some(10)),
        (&[true], Route::Identity, 5, None, Some(10)),
    ];
    let mut at = 0;
    for (run, (probes, route, clean, since, recovered)) in runs.iter().enumerate() {
        for &clean in *probes {
            at += 1;
            records.push(if clean {
                ok(at, "tlsA", Bucket::A, true, false)
            } else {
                failed(at, "proxy_auth")
            });
        }
        let prior = Prior {
            baseline: None,
            previous: previous.as_ref(),
            baseline_h3: None,
        };
        let label = label_with(&records, &rule, prior);
        let time = |t: Option<u32>| t.map(|t| format!("2026-01-01T00:00:{t:02}Z"));
        assert_eq!(label.route, *route, "run {run}: {:?}", label.route_reasons);
        assert_eq!(label.clean_samples, *clean, "run {run}");
        assert_eq!(label.quarantined_since, time(*since), "run {run}");
        assert_eq!(label.recovered_at, time(*recovered), "run {run}");
        if run == 2 {
            assert_eq!(label.route_reasons[0], "recovering: 3 of 4 clean probes");
        }
        previous = Some(label);
    }
    // The last transition is kept: quarantine → identity at the recovery.
    let transition = previous.unwrap().transition.unwrap();
    assert_eq!(
        (transition.from, transition.to, transition.at.as_str()),
        (
            Some(Route::Quarantine),
            Route::Identity,
            "2026-01-01T00:00:10Z"
        )
    );
    // An intercepted success is not clean.
    let mixed = vec![
        ok(1, "tlsA", Bucket::A, true, false),
        ok(2, "tlsA", Bucket::A, true, true),
        ok(3, "tlsA", Bucket::A, true, false),
    ];
    assert_eq!(clean_streak(&mixed, &rule), 1);
}

fn from(at: u32, egress: &str, session: Option<&str>) -> ProbeRecord {
    let mut record = ok(at, "tlsA", Bucket::A, true, false);
    record.session = session.map(str::to_owned);
    if let Some(sample) = record.sample.as_mut() {
        sample.egress_ip = egress.to_owned();
    }
    record
}

/// Egress against the baseline's, rotation of a `rotate = true` exit, and
/// sticky sessions that do not stick.
#[test]
fn egress_truth() {
    let baseline = from(0, "127.0.0.1", None).sample.unwrap();
    let prior = Prior {
        baseline: Some(&baseline),
        previous: None,
        baseline_h3: None,
    };
    let rotating = ExitInfo {
        rotate: true,
        ..info()
    };
    let judge = |exit: &ExitInfo, records: &[ProbeRecord], rule: &RouteRule| {
        label(exit, records, rule, DriftConfig::default(), prior)
    };
    let rule = RouteRule::default();
    let proxied: Vec<_> = (1..=4)
        .map(|i| from(i, &format!("127.0.0.{}", 1 + i), None))
        .collect();
    let label = judge(&rotating, &proxied, &rule);
    assert!(!label.flags.not_proxied);
    assert_eq!(label.egress.unique, 4);
    assert_eq!(label.egress.rotating, Some(true));
    assert_eq!(label.route, Route::Identity);

    let stuck: Vec<_> = (1..=4).map(|i| from(i, "127.0.0.9", None)).collect();
    let label = judge(&rotating, &stuck, &rule);
    assert_eq!(label.egress.rotating, Some(false));
    assert_eq!(
        (label.route, label.route_reason.as_str()),
        (Route::Quarantine, "not_rotating")
    );
    assert_eq!(
        judge(&info(), &stuck, &rule).egress.rotating,
        None,
        "not configured"
    );

    let direct: Vec<_> = (1..=4)
        .map(|i| from(i, if i == 2 { "127.0.0.1" } else { "127.0.0.5" }, None))
        .collect();
    let label = judge(&info(), &direct, &rule);
    assert!(label.flags.not_proxied);
    assert_eq!(label.route, Route::Identity, "a flag only, by default");
    let strict = RouteRule {
        quarantine_not_proxied: true,
        ..RouteRule::default()
    };
    assert_eq!(
        judge(&info(), &direct, &strict).route_reasons[0],
        "not_proxied"
    );

    let sticky: Vec<_> = [
        ("a", "127.0.0.2"),
        ("a", "127.0.0.2"),
        ("b", "127.0.0.3"),
        ("b", "127.0.0.3"),
    ]
    .iter()
    .zip(1..)
    .map(|((session, ip), i)| from(i, ip, Some(session)))
    .collect();
    assert!(!judge(&info(), &sticky, &rule).egress.sticky_broken);
    let mut broken = sticky.clone();
    broken.push(from(5, "127.0.0.4", Some("b")));
    assert!(judge(&info(), &broken, &rule).egress.sticky_broken);
}

/// A switch of voice says which fields changed across it.
#[test]
fn a_switch_says_what_changed() {
    let records: Vec<_> = (1..=4)
        .map(|i| {
            let mut record = ok(i, if i <= 2 { "a" } else { "b" }, Bucket::A, true, false);
            if let Some(sample) = record.sample.as_mut() {
                sample.echo.alpn.negotiated = Some(if i <= 2 { "h2" } else { "http/1.1" }.into());
            }
            record
        })
        .collect();
    let label = route(&records);
    assert_eq!(label.switch_changes.len(), 1, "{:?}", label.switch_changes);
    let change = &label.switch_changes[0];
    assert_eq!(
        (change.layer.as_str(), change.field.as_str()),
        ("alpn", "negotiated")
    );
    assert_eq!(
        (change.before.as_str(), change.after.as_str()),
        ("h2", "http/1.1")
    );
    assert!(route(&records[..2]).switch_changes.is_empty(), "one voice");
}

#[test]
fn library_h2_is_anonymous_and_rule_is_configurable() {
    let records: Vec<_> = (1..=4)
        .map(|i| ok(i, "tlsA", Bucket::B, true, false))
        .collect();
    assert_eq!(route(&records).route, Route::Anonymous);
    let rule = RouteRule {
        identity_buckets: vec![Bucket::A, Bucket::B],
        ..RouteRule::default()
    };
    let label = label(
        &info(),
        &records,
        &rule,
        DriftConfig::default(),
        Prior::default(),
    );
    assert_eq!(label.route, Route::Identity);
    let rule: RouteRule = toml::from_str("quarantine_buckets = [\"D\", \"C\"]").unwrap();
    assert_eq!(rule.quarantine_buckets, [Bucket::D, Bucket::C]);
    assert!(rule.quarantine_intercepted, "defaults fill the rest");
}

/// An echo whose ALPN and request position are the given ones.
fn echo_at(alpn: (&[&str], Option<&str>, Spoken), stream_id: Option<u32>, index: u32) -> Echo {
    let (offered, negotiated, spoken) = alpn;
    Echo {
        alpn: Alpn {
            offered: offered.iter().map(|&p| p.to_owned()).collect(),
            negotiated: negotiated.map(str::to_owned),
            spoken,
        },
        request: RequestPosition { stream_id, index },
        bucket: Some(Bucket::A),
        ..echo()
    }
}

/// The record `crate::record` builds for a probe whose echo is `echo`.
fn probed(at: u32, echo: Echo, baseline: Option<&Sample>) -> ProbeRecord {
    let context = crate::record::ProbeContext {
        run_id: "r",
        exit: None,
        token: "t",
        persona: "p",
        started_at: format!("2026-01-01T00:00:{at:02}Z"),
        geo: None,
    };
    let outcome = crate::probe::ProbeOutcome {
        echo,
        alpn: Some("h2".into()),
        cert: None,
        latency: std::time::Duration::from_millis(5),
    };
    crate::record::record(context, Ok(outcome), baseline)
}

#[test]
fn alpn_and_stream_position_are_compared_with_the_baseline() {
    const H2: &[&str] = &["h2"];
    const BOTH: &[&str] = &["h2", "http/1.1"];
    let baseline = probed(0, echo_at((H2, Some("h2"), Spoken::H2), Some(1), 1), None)
        .sample
        .unwrap();
    // (case, the odd sample's ALPN offered / negotiated / spoken, stream id, index,
    //  expected alpn_preserved, expected remuxed)
    type Case<'a> = (
        &'a str,
        (&'a [&'a str], Option<&'a str>, Spoken),
        Option<u32>,
        u32,
        bool,
        bool,
    );
    #[rustfmt::skip]
    let cases: [Case; 9] = [
        ("same as baseline", (H2, Some("h2"), Spoken::H2), Some(1), 1, true, false),
        ("spoken http/1.1", (H2, Some("h2"), Spoken::Http1), Some(1), 1, false, false),
        ("negotiated http/1.1", (H2, Some("http/1.1"), Spoken::H2), Some(1), 1, false, false),
        ("nothing negotiated", (H2, None, Spoken::H2), Some(1), 1, false, false),
        ("other offer", (BOTH, Some("h2"), Spoken::H2), Some(1), 1, false, false),
        ("downgrade to h1", (BOTH, Some("http/1.1"), Spoken::Http1), None, 1, false, false),
        ("stream 3", (H2, Some("h2"), Spoken::H2), Some(3), 1, true, true),
        ("index 2", (H2, Some("h2"), Spoken::H2), Some(1), 2, true, true),
        ("stream 3, index 2", (H2, Some("h2"), Spoken::H2), Some(3), 2, true, true),
    ];
    for (case, alpn, stream_id, index, alpn_preserved, remuxed) in cases {
        // Three samples like the baseline and the odd one in the middle: one sample decides.
        let mut records: Vec<_> = (1..=4)
            .map(|i| probed(i, baseline.echo.clone(), Some(&baseline)))
            .collect();
        records[2] = probed(3, echo_at(alpn, stream_id, index), Some(&baseline));
        let odd = records[2].sample.as_ref().unwrap();
        assert_eq!(odd.alpn_preserved, Some(alpn_preserved), "{case}: sample");
        assert_eq!(odd.remuxed, Some(remuxed), "{case}: sample");
        // Re-mux evidence makes the sample bucket C, whatever the echo's bucket.
        let bucket = if remuxed { Bucket::C } else { Bucket::A };
        assert_eq!(odd.bucket, Some(bucket), "{case}: bucket");
        assert_eq!(odd.echo.bucket, Some(Bucket::A), "{case}: the echo's own");
        let flags = route(&records).flags;
        assert_eq!(flags.alpn_preserved, alpn_preserved, "{case}: label");
        assert_eq!(flags.remuxed, remuxed, "{case}: label");
    }

    // A downgrade stays D even when re-muxed: the worse finding.
    let mut downgraded = echo_at((H2, Some("h2"), Spoken::Http1), None, 2);
    downgraded.bucket = Some(Bucket::D);
    let sample = probed(5, downgraded, Some(&baseline)).sample.unwrap();
    assert_eq!(
        (sample.remuxed, sample.bucket),
        (Some(true), Some(Bucket::D))
    );

    // Without a baseline nothing is compared, so nothing is claimed preserved or re-muxed.
    let alone: Vec<_> = (1..=4)
        .map(|i| probed(i, echo_at((H2, Some("h2"), Spoken::H2), Some(3), 2), None))
        .collect();
    let flags = route(&alone).flags;
    assert!(!flags.alpn_preserved && !flags.remuxed, "{flags:?}");
}

#[test]
fn records_and_labels_from_before_the_alpn_and_remux_flags_still_load() {
    let record = ok(1, "tlsA", Bucket::A, true, false);
    let mut json = serde_json::to_value(&record).unwrap();
    let sample = json["sample"].as_object_mut().unwrap();
    assert!(sample.remove("alpn_preserved").is_some() && sample.remove("remuxed").is_some());
    let old: ProbeRecord = serde_json::from_value(json).unwrap();
    let sample = old.sample.unwrap();
    assert_eq!((sample.alpn_preserved, sample.remuxed), (None, None));

    let mut json = serde_json::to_value(route(&[record])).unwrap();
    let flags = json["flags"].as_object_mut().unwrap();
    assert!(flags.remove("alpn_preserved").is_some() && flags.remove("remuxed").is_some());
    let old: ExitLabel = serde_json::from_value(json).unwrap();
    assert!(!old.flags.alpn_preserved && !old.flags.remuxed);
}

#[test]
fn labels_json_has_the_documented_fields() {
    let records = vec![
        ok(1, "tlsA", Bucket::A, true, false),
        failed(2, "timeout"),
        ok(3, "tlsA", Bucket::A, true, false),
        ok(4, "tlsA", Bucket::A, true, false),
    ];
    let json = serde_json::to_value(route(&records)).unwrap();
    for field in [
        "name",
        "url",
        "tags",
        "egress_ips",
        "egress",
        "state",
        "changed_at",
        "bucket",
        "flags",
        "voices",
        "route",
        "route_reasons",
        "quarantined_since",
        "recovered_at",
        "clean_samples",
        "transition",
        "changes",
        "switch_changes",
        "coherence",
        "coherence_dropped_at",
        "samples",
        "errors",
        "latency",
        "last_probe_at",
        "history",
    ] {
        assert!(json.get(field).is_some(), "missing {field}");
    }
    assert_eq!(json["state"], "stable");
    assert_eq!(json["route"], "identity");
    assert_eq!(json["errors"]["timeout"], 1);
    assert_eq!(json["flags"]["tls_intercepted"], false);
    assert_eq!(json["flags"]["alpn_preserved"], true);
    assert_eq!(json["flags"]["remuxed"], false);
    assert_eq!(json["history"][1]["error"], "timeout");
    assert_eq!(json["voices"][0], "tlsA+h2v1_x");
}

/// `ok(at)` with its egress placed in `country` and network `asn`.
fn placed(at: u32, country: &str, asn: u32) -> ProbeRecord {
    let mut record = ok(at, "tlsv1_a", Bucket::A, true, false);
    if let Some(sample) = &mut record.sample {
        sample.geo = Some(exitvoice_schema::Place {
            country: Some(country.to_owned()),
            asn: Some(asn),
            organization: Some(format!("AS{asn} Org")),
        });
    }
    record
}

#[test]
fn a_sample_from_another_country_or_network_is_a_geo_mismatch() {
    let rule = RouteRule::default();
    let expecting = |country: Option<&str>, asn: Option<u32>| ExitInfo {
        country: country.map(str::to_owned),
        asn,
        ..info()
    };
    let label_of = |exit: &ExitInfo, records: &[ProbeRecord], rule: &RouteRule| {
        label(
            exit,
            records,
            rule,
            DriftConfig::default(),
            Prior::default(),
        )
    };
    let german: Vec<_> = (1..=4).map(|i| placed(i, "DE", 3320)).collect();
    // The exits file says `de`: compared without case.
    let home = label_of(&expecting(Some("de"), Some(3320)), &german, &rule);
    assert!(
        !home.route_reasons.contains(&"geo_mismatch".to_owned()),
        "{:?}",
        home.route_reasons
    );
    let geo = home.geo.as_ref().expect("geo");
    assert_eq!(
        (geo.countries.clone(), geo.asns.clone()),
        (vec!["DE".to_owned()], vec![3320])
    );
    assert_eq!(geo.newest.organization.as_deref(), Some("AS3320 Org"));
    assert!(!home.flags.geo_changed);

    let mut drifted = german.clone();
    drifted[3] = placed(4, "FR", 3215);
    let away = label_of(&expecting(Some("DE"), None), &drifted, &rule);
    assert_eq!(away.route, Route::Quarantine, "{:?}", away.route_reasons);
    assert!(away.route_reasons.contains(&"geo_mismatch".to_owned()));
    assert!(away.flags.geo_changed);
    assert_eq!(away.geo.as_ref().expect("geo").countries, ["DE", "FR"]);
    let other_network = label_of(&expecting(None, Some(3320)), &drifted, &rule);
    assert!(other_network
        .route_reasons
        .contains(&"geo_mismatch".to_owned()));

    // Off in `[route]`: it only keeps the exit from identity.
    let lenient = RouteRule {
        quarantine_geo_mismatch: false,
        ..RouteRule::default()
    };
    let kept = label_of(&expecting(Some("DE"), None), &drifted, &lenient);
    assert_ne!(kept.route, Route::Quarantine, "{:?}", kept.route_reasons);
    assert_ne!(kept.route, Route::Identity);
    assert!(kept.route_reasons.contains(&"geo_mismatch".to_owned()));

    // Without an expectation, or without geo, nothing is said.
    let free = label_of(&info(), &drifted, &rule);
    assert!(!free.route_reasons.contains(&"geo_mismatch".to_owned()));
    let unplaced: Vec<_> = (1..=4)
        .map(|i| ok(i, "tlsv1_a", Bucket::A, true, false))
        .collect();
    let blind = label_of(&expecting(Some("DE"), Some(1)), &unplaced, &rule);
    assert!(blind.geo.is_none());
    assert!(!blind.route_reasons.contains(&"geo_mismatch".to_owned()));
}

/// `ok(at)` whose connection arrived with a SYN of TCP voice `voice`, the stack p0f names `os`.
fn with_syn(at: u32, voice: &str, os: Option<&str>) -> ProbeRecord {
    let mut record = ok(at, "tlsv1_a", Bucket::A, true, false);
    if let Some(sample) = &mut record.sample {
        sample.echo.tcp = Some(exitvoice_schema::TcpEcho {
            ip_version: 4,
            ttl: 63,
            initial_ttl: 64,
            hops: 1,
            df: true,
            ip_id: Some(0),
            window: 64240,
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: true,
            options: vec![2, 4, 8, 1, 3],
            quirks: vec!["df".into()],
            options_error: None,
            p0f: "4:63+1:0:1460:mss*44,7:mss,sok,ts,nop,ws:df:0".into(),
            voice_id: VoiceId(voice.into()),
            os: os.map(str::to_owned),
        });
    }
    record
}

#[test]
fn the_exit_hosts_stack_and_a_change_of_it() {
    let rule = RouteRule::default();
    let one: Vec<_> = (1..=4)
        .map(|i| with_syn(i, "tcpv1_aaaa", Some("Linux 3.11 and newer")))
        .collect();
    let steady = label_with(&one, &rule, Prior::default());
    let stack = steady.stack.as_ref().expect("a stack");
    assert_eq!(stack.voice, "tcpv1_aaaa");
    assert_eq!(stack.voices, ["tcpv1_aaaa"]);
    assert_eq!(stack.os.as_deref(), Some("Linux 3.11 and newer"));
    assert_eq!(stack.hops, 1);
    assert!(!steady.flags.stack_changed);

    let mut rotating = one.clone();
    rotating[1] = with_syn(2, "tcpv1_bbbb", Some("Windows 7 or 8"));
    let mixed = label_with(&rotating, &rule, Prior::default());
    assert!(mixed.flags.stack_changed, "two host stacks in one window");
    assert_eq!(
        mixed.stack.as_ref().map(|s| s.voices.clone()),
        Some(vec!["tcpv1_aaaa".to_owned(), "tcpv1_bbbb".to_owned()])
    );
    assert_eq!(
        mixed.stack.as_ref().map(|s| s.voice.as_str()),
        Some("tcpv1_aaaa"),
        "the newest sample's"
    );

    // No SYN read: no stack, no flag; older records still load.
    let without = label_with(
        &[ok(1, "tlsv1_a", Bucket::A, true, false)],
        &rule,
        Prior::default(),
    );
    assert!(without.stack.is_none() && !without.flags.stack_changed);
    let json = serde_json::to_value(&without).unwrap();
    assert!(json.get("stack").is_none(), "absent, not null: {json}");

    // The pool by stack.
    let pool = crate::pool::summary(&[steady, mixed, without]);
    assert_eq!(pool.by_stack.get("tcpv1_aaaa"), Some(&2));
    assert_eq!(pool.by_stack.get("unknown"), Some(&1));
}

#[test]
fn a_switch_of_stack_shows_at_layer_tcp() {
    let before = with_syn(1, "tcpv1_aaaa", None);
    let mut after = with_syn(2, "tcpv1_bbbb", None);
    if let Some(tcp) = after.sample.as_mut().and_then(|s| s.echo.tcp.as_mut()) {
        tcp.initial_ttl = 128;
        tcp.p0f = "4:127+1:0:1460:mss*44,8:mss,nop,ws,nop,nop,sok:df,id+:0".into();
    }
    let changes = crate::changes::between(
        &crate::changes::VoiceView::of_echo(&before.sample.as_ref().unwrap().echo),
        &crate::changes::VoiceView::of_echo(&after.sample.as_ref().unwrap().echo),
    );
    let tcp: Vec<_> = changes
        .iter()
        .filter(|c| c.layer == "tcp")
        .map(|c| (c.field.as_str(), c.before.as_str(), c.after.as_str()))
        .collect();
    assert!(tcp.contains(&("initial_ttl", "64", "128")), "{tcp:?}");
    assert!(tcp.contains(&("window_scale", "7", "8")), "{tcp:?}");
    assert!(
        tcp.iter().any(|(field, _, _)| *field == "options"),
        "{tcp:?}"
    );
    // `id+` is the IP layer's: not a TCP change; the rest stayed.
    let fields: Vec<_> = tcp.iter().map(|(field, _, _)| *field).collect();
    assert_eq!(
        fields,
        ["initial_ttl", "window_scale", "options"],
        "{tcp:?}"
    );
}
