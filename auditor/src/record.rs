//! From a probe's outcome to the [`ProbeRecord`] that is stored and labelled.

use exitvoice_exits::error::ProbeError;
use exitvoice_exits::Exit;
use exitvoice_geo::GeoIp;
use exitvoice_schema::{
    Bucket, ProbeFailure, ProbeRecord, RequestPosition, Sample, PROBE_SCHEMA_VERSION,
};

use crate::probe::ProbeOutcome;

/// Now, RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    rfc3339(time::OffsetDateTime::now_utc())
}

/// `ago` before now, in the form of [`now_rfc3339`]: stored times of that one form compare
/// as text (the store's retention relies on it).
pub fn rfc3339_ago(ago: std::time::Duration) -> String {
    rfc3339(time::OffsetDateTime::now_utc() - ago)
}

fn rfc3339(at: time::OffsetDateTime) -> String {
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    at.format(&format).unwrap_or_default()
}

/// Everything about a probe except its outcome.
#[derive(Clone, Debug)]
pub struct ProbeContext<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The exit; `None` for the baseline.
    pub exit: Option<&'a Exit>,
    /// The token sent.
    pub token: &'a str,
    /// The persona, e.g. `rustls/chrome`.
    pub persona: &'a str,
    /// When the probe started.
    pub started_at: String,
    /// The geo databases the sample's egress is looked up in (`audit --geoip`).
    pub geo: Option<&'a GeoIp>,
}

/// A failed probe as it is stored: class, phase and a message without secrets.
pub fn failure(error: &ProbeError) -> ProbeFailure {
    ProbeFailure {
        class: error.class().as_str().to_owned(),
        phase: error.phase().map(|p| p.to_string()),
        message: error.to_string(),
    }
}

/// Builds the record of one probe, comparing a sample with the baseline's.
pub fn record(
    context: ProbeContext<'_>,
    outcome: Result<ProbeOutcome, ProbeError>,
    baseline: Option<&Sample>,
) -> ProbeRecord {
    let (latency_ms, error, sample) = match outcome {
        Ok(outcome) => (
            Some(u64::try_from(outcome.latency.as_millis()).unwrap_or(u64::MAX)),
            None,
            Some(sample(outcome, baseline, context.geo)),
        ),
        Err(error) => (None, Some(failure(&error)), None),
    };
    ProbeRecord {
        schema_version: PROBE_SCHEMA_VERSION,
        run_id: context.run_id.to_owned(),
        exit: context.exit.map(|e| e.name.clone()),
        exit_url: context.exit.map(Exit::redacted_url),
        session: context
            .exit
            .and_then(|e| e.session.as_ref())
            .map(|s| s.id.clone()),
        token: context.token.to_owned(),
        persona: context.persona.to_owned(),
        started_at: context.started_at,
        latency_ms,
        error,
        sample,
        retried: Vec::new(),
        h3: None,
        ledger: None,
    }
}

fn sample(outcome: ProbeOutcome, baseline: Option<&Sample>, geo: Option<&GeoIp>) -> Sample {
    let echo = outcome.echo;
    let place = geo.and_then(|geo| Some(geo.place(echo.peer.ip.parse().ok()?)));
    let tls_voice = echo.tls.as_ref().map(|t| t.voice_id.clone());
    let h2_voice = echo.http2.as_ref().map(|h| h.voice_id.clone());
    let h1_voice = echo.http1.as_ref().map(|h| h.voice_id.clone());
    let http_voice = h2_voice.clone().or_else(|| h1_voice.clone());
    let remuxed = baseline.map(|b| remuxed(&echo.request, b.echo.request.stream_id));
    Sample {
        egress_ip: echo.peer.ip.clone(),
        tls_preserved: baseline.map(|b| b.tls_voice.is_some() && b.tls_voice == tls_voice),
        h2_preserved: baseline.map(|b| {
            let base = b.h2_voice.clone().or_else(|| b.h1_voice.clone());
            base.is_some() && base == http_voice
        }),
        alpn_preserved: baseline.map(|b| b.echo.alpn == echo.alpn),
        remuxed,
        tls_voice,
        h2_voice,
        h1_voice,
        bucket: bucket(echo.bucket, remuxed == Some(true)),
        profile: echo.profile.clone(),
        alpn: outcome.alpn,
        stream_id: echo.request.stream_id,
        request_index: echo.request.index,
        tls_intercepted: outcome.cert.as_ref().is_some_and(|c| !c.pinned),
        cert_spki_sha256: outcome
            .cert
            .as_ref()
            .map(|c| hex::encode(c.spki_sha256))
            .unwrap_or_default(),
        cert_issuer: outcome.cert.map(|c| c.issuer),
        coherence: Some(crate::coherence::of_echo(&echo)),
        geo: place,
        echo,
    }
}

/// The sample's bucket: the echo's, except that a re-muxed request (see [`remuxed`]) is bucket
/// C even when its connection looked fresh to the echo (a gateway that opens its pooled
/// connection with its own preface and SETTINGS). A downgrade stays D: it is the worse finding.
/// No h2 offered stays no bucket.
fn bucket(echo: Option<Bucket>, remuxed: bool) -> Option<Bucket> {
    match echo {
        Some(Bucket::D) | None => echo,
        Some(_) if remuxed => Some(Bucket::C),
        other => other,
    }
}

/// Whether a request was re-multiplexed on its way: it is not the first request on its
/// connection, or it arrived at another HTTP/2 stream id than the direct baseline's first request
/// (a fresh client connection opens stream 1, RFC 9113 section 5.1.1; a gateway that pools
/// clients onto one upstream connection hands later ones 3, 5, …). Stream ids are compared only
/// when both sides spoke h2; a downgrade to HTTP/1.1 is the ALPN and bucket D's business.
fn remuxed(request: &RequestPosition, baseline_stream_id: Option<u32>) -> bool {
    let other_stream = matches!(
        (request.stream_id, baseline_stream_id),
        (Some(seen), Some(base)) if seen != base
    );
    request.index > 1 || other_stream
}
