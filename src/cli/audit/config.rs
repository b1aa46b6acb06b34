//! From `audit`'s flags and its exits file to what the auditor is told: the exits, the echo
//! server, the run's configuration and, with `--preflight`, the pool's thresholds.

use std::time::Duration;

use anyhow::Context;
use exitvoice_auditor::drift::DriftConfig;
use exitvoice_auditor::labels::RouteRule;
use exitvoice_auditor::preflight::Thresholds;
use exitvoice_auditor::probe::chromium::ChromiumConfig;
use exitvoice_auditor::probe::H2Profile;
use exitvoice_auditor::schedule::{Persona, RunConfig};
use exitvoice_exits::dial::Timeouts;
use exitvoice_exits::{EchoTarget, Exit, ExitsFile};

use super::super::shared::open_geo;
use super::flags::Args;

/// What an `audit` process runs with.
pub(super) struct Setup {
    pub(super) exits: Vec<Exit>,
    pub(super) echo: EchoTarget,
    pub(super) config: RunConfig,
    /// `Some` with `--preflight`.
    pub(super) thresholds: Option<Thresholds>,
}

/// Reads the exits file and turns the flags into the auditor's configuration.
///
/// # Errors
/// An exits file that does not read or parse, no echo server, an unknown profile or persona,
/// a `--lease-ttl` under a second, a `--geoip` file that does not read.
pub(super) fn setup(args: &Args) -> anyhow::Result<Setup> {
    let bytes =
        std::fs::read(&args.exits).with_context(|| format!("reading {}", args.exits.display()))?;
    let file = ExitsFile::<RouteRule>::parse(&bytes)?;
    let echo = match (&args.echo_url, &args.echo_pin) {
        (Some(url), Some(pin)) => EchoTarget::new(url, pin)?,
        _ => file.echo.clone().context(
            "no echo server: add [echo] to the exits file or pass --echo-url/--echo-pin",
        )?,
    };
    let profile = H2Profile::named(&args.profile).with_context(|| {
        format!(
            "unknown profile {:?} (chrome, rustls-default)",
            args.profile
        )
    })?;
    let persona = match args.persona.as_str() {
        "rustls" => Persona::Rustls,
        "chromium" => Persona::Chromium(ChromiumConfig {
            binary: args.chromium.clone(),
            ..ChromiumConfig::default()
        }),
        other => anyhow::bail!("unknown persona {other:?} (rustls, chromium)"),
    };
    if args.lease_ttl < Duration::from_secs(1) {
        anyhow::bail!("--lease-ttl must be at least 1s");
    }
    let config = RunConfig {
        persona,
        samples: args
            .samples
            .unwrap_or(if args.preflight { 1 } else { 4 })
            .max(1),
        concurrency: args.concurrency.max(1),
        timeouts: Timeouts {
            connect: args.connect_timeout,
            tunnel: args.tunnel_timeout,
            tls: args.tls_timeout,
            response: args.response_timeout,
        },
        spacing: args.spacing,
        jitter: args.jitter,
        retries: args.retries,
        profile,
        drift: DriftConfig {
            min_samples: args.min_samples,
            ..DriftConfig::default()
        },
        route: RouteRule {
            recover_after: args.recover_after.unwrap_or(file.route.recover_after),
            ..file.route.clone()
        },
        lease_ttl: args.lease_ttl,
        period: args.every,
        quic: !args.no_quic,
        quic_timeout: args.quic_timeout,
        geo: open_geo(&args.geoip)?,
        ..RunConfig::default()
    };
    let thresholds = args.preflight.then(|| Thresholds {
        min_pass: args.min_pass,
        min_unique_egress: args.min_unique_egress,
        max_p95_ms: args
            .max_p95
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        min_h2_health: args.min_h2_health,
        expect_os: args.expect_os.clone(),
    });
    Ok(Setup {
        exits: file.exits,
        echo,
        config,
        thresholds,
    })
}
