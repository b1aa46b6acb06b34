//! What a run is told: its tunables, who sends the probes, and the progress counters it keeps.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use exitvoice_exits::dial::Timeouts;
use exitvoice_geo::GeoIp;

use crate::drift::DriftConfig;
use crate::labels::RouteRule;
use crate::probe::chromium::ChromiumConfig;
use crate::probe::H2Profile;

/// Tunables of a run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Samples per exit per run (default 4).
    pub samples: u32,
    /// Most probes in flight at once, over all exits.
    pub concurrency: usize,
    /// Per-phase limits.
    pub timeouts: Timeouts,
    /// Gap between two samples of the same exit.
    pub spacing: Duration,
    /// Random extra gap, uniform in `0..=jitter`.
    pub jitter: Duration,
    /// Retries of a transient failure.
    pub retries: u32,
    /// First retry delay; doubles each retry.
    pub backoff: Duration,
    /// Who sends the probes.
    pub persona: Persona,
    /// The h2 profile the built-in persona sends.
    pub profile: H2Profile,
    /// Drift classifier tunables.
    pub drift: DriftConfig,
    /// The route rule.
    pub route: RouteRule,
    /// Probe counters a progress display can read while the run goes on.
    pub progress: Arc<Progress>,
    /// How long an auditor's claim on an exit lasts unless renewed (a live run renews its
    /// claims every third of it): how soon another auditor takes the exits of one that died.
    pub lease_ttl: Duration,
    /// With `--every`, the period: an exit probed (by any auditor on the database) in the last
    /// 80 % of it is not probed again. Without, every exit is probed.
    pub period: Option<Duration>,
    /// Whether a run makes QUIC probes (HTTP/3 over UDP): one direct, then one per exit after
    /// its first sample while the direct one gets through (`audit --no-quic` turns them off).
    pub quic: bool,
    /// The QUIC probes' handshake limit (in place of [`Timeouts::tls`]): through an exit that
    /// drops UDP it always runs out, once per exit per run, so it is short.
    pub quic_timeout: Duration,
    /// `audit --geoip`: each sample's egress is looked up as it is recorded.
    pub geo: Option<Arc<GeoIp>>,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            samples: 4,
            concurrency: 8,
            timeouts: Timeouts::default(),
            spacing: Duration::from_millis(200),
            jitter: Duration::from_millis(300),
            retries: 2,
            backoff: Duration::from_millis(250),
            persona: Persona::Rustls,
            profile: H2Profile::chrome(),
            drift: DriftConfig::default(),
            route: RouteRule::default(),
            progress: Arc::default(),
            lease_ttl: Duration::from_secs(60),
            period: None,
            quic: true,
            quic_timeout: Duration::from_secs(3),
            geo: None,
        }
    }
}

impl RunConfig {
    /// The persona name stored with each probe: `rustls/<profile>` or `chromium`.
    pub fn persona(&self) -> String {
        match self.persona {
            Persona::Rustls => format!("rustls/{}", self.profile.name),
            Persona::Chromium(_) => "chromium".to_owned(),
        }
    }

    /// The limits of a QUIC probe.
    pub(super) fn quic_timeouts(&self) -> Timeouts {
        Timeouts {
            tls: self.quic_timeout,
            ..self.timeouts
        }
    }
}

/// Who sends the probes. Labels are kept per persona.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Persona {
    /// The built-in rustls client with the run's [`H2Profile`].
    Rustls,
    /// Real headless Chromium through a forwarding shim.
    Chromium(ChromiumConfig),
}

/// Counters of the current run: probes planned and finished (baseline included).
#[derive(Debug, Default)]
pub struct Progress {
    /// Probes finished so far.
    pub done: AtomicU64,
    /// Probes planned.
    pub total: AtomicU64,
}
