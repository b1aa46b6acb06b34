//! The pool the broker leases: the exits file's exits as lease units, each admitting what its
//! newest label allows, and the proxy URL a lease hands its holder.
//!
//! A unit's class follows its label's route (identity ⊂ anonymous ⊂ stateless; quarantine
//! admits nothing). An exit with no label, or whose newest probe is older than the labels' max
//! age, admits nothing. A gateway's slots (`gw#1`, `gw#2`, …) are judged together: each admits
//! only what every audited slot's label admits, since the broker mints a fresh session for
//! each lease and cannot pick the session the auditor saw.
//!
//! A unit's country, which a lease may ask for, is its exit's `country` in the exits file (what
//! the provider was asked for; an exit that leaves elsewhere is quarantined by `geo_mismatch`
//! unless the auditor's `[route]` says otherwise), else the country its label saw last, else
//! (`broker --geoip`, for labels audited without geo databases) where the broker's databases
//! place the label's last egress address.
//!
//! A unit's round-trip gap, which a lease may limit (`max_gap_ms`), is the smallest gap its
//! label measured (`latency.round_trip.gap_min_us`: what an origin timing the exit's connections
//! sees of the hidden leg behind it), kept in whole ms rounded up; unknown when the label has
//! none. A gateway's slots take the largest of their slots' gaps, and none when a slot's is
//! unknown, as they take the least class.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use exitvoice_exits::{Exit, Secret, SESSION_PLACEHOLDER};
use exitvoice_geo::GeoIp;
use exitvoice_lease::{gap_ms_of, LeaseClass, UnitSpec};
use exitvoice_schema::{ExitLabel, Route};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The exits of the exits file, by unit name.
#[derive(Clone, Debug, Default)]
pub struct Pool {
    /// Every exit a lease may name: the file's, and those an earlier file named (their live
    /// leases run out; a task holding one gets it back with its URL).
    exits: HashMap<String, Exit>,
    /// The file's exits, in its order: the units.
    order: Vec<String>,
}

impl Pool {
    /// The pool of `exits`.
    pub fn new(exits: Vec<Exit>) -> Self {
        let order = exits.iter().map(|e| e.name.clone()).collect();
        let exits = exits.into_iter().map(|e| (e.name.clone(), e)).collect();
        Self { exits, order }
    }

    /// The pool of `exits` after a reload: the exits this pool had that `exits` lacks stay
    /// known for their live leases, but are no units.
    pub fn reloaded(&self, exits: Vec<Exit>) -> Self {
        let mut pool = Self::new(exits);
        for (name, exit) in &self.exits {
            pool.exits
                .entry(name.clone())
                .or_insert_with(|| exit.clone());
        }
        pool
    }

    /// How many units.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the pool has no unit.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The exit behind `unit`.
    pub fn exit(&self, unit: &str) -> Option<&Exit> {
        self.exits.get(unit)
    }

    /// The units with what `labels` admit at `now` (labels whose newest probe is older than
    /// `max_age` admit nothing), `capacity` stateless leases each unless their exit says
    /// otherwise, lives of at most `max_life` ([`life`]), and their countries (see the module
    /// docs; `geo`: the broker's own databases).
    pub fn units(
        &self,
        labels: Option<&Labels>,
        now: OffsetDateTime,
        max_age: Duration,
        capacity: u32,
        max_life: Duration,
        geo: Option<&GeoIp>,
    ) -> Vec<UnitSpec> {
        let admitted = |name: &str| {
            let facts = labels?.get(name)?;
            let recent = facts.probed_at.is_some_and(|at| now - at <= max_age);
            admits(facts.route).filter(|_| recent)
        };
        let seen_in = |name: &str| {
            let facts = labels?.get(name)?;
            match (&facts.place, geo) {
                (Some(country), _) => country.clone(),
                (None, Some(geo)) => geo.place(facts.last_egress?).country,
                (None, None) => None,
            }
        };
        let gap_of = |name: &str| labels?.get(name)?.gap_min_us.map(gap_ms_of);
        // A gateway admits the least any of its slots admits, and has the largest gap.
        let mut gateways: HashMap<&str, (Option<LeaseClass>, Option<u32>)> = HashMap::new();
        for exit in self.order.iter().filter_map(|name| self.exits.get(name)) {
            if exit.session.is_some() {
                let class = admitted(&exit.name);
                let gap = gap_of(&exit.name);
                gateways
                    .entry(gateway_of(exit))
                    .and_modify(|(least, largest)| {
                        *least = (*least).min(class);
                        *largest = largest.zip(gap).map(|(a, b)| a.max(b));
                    })
                    .or_insert((class, gap));
            }
        }
        self.order
            .iter()
            .filter_map(|name| self.exits.get(name))
            .map(|exit| {
                let gateway = exit.session.is_some();
                UnitSpec {
                    unit: exit.name.clone(),
                    exit_name: gateway_of(exit).to_owned(),
                    admits: if gateway {
                        gateways.get(gateway_of(exit)).and_then(|g| g.0)
                    } else {
                        admitted(&exit.name)
                    },
                    capacity: exit.stateless_per_exit.unwrap_or(capacity),
                    gateway,
                    life_ms: i64::try_from(life(exit, max_life).as_millis()).unwrap_or(i64::MAX),
                    draining: false,
                    country: exit
                        .country
                        .clone()
                        .or_else(|| seen_in(&exit.name))
                        .map(|country| country.to_ascii_uppercase()),
                    gap_ms: if gateway {
                        gateways.get(gateway_of(exit)).and_then(|g| g.1)
                    } else {
                        gap_of(&exit.name)
                    },
                }
            })
            .collect()
    }
}

/// When the first of `labels` still recent at `now` grows older than `max_age` (`None`: none
/// will): until then [`Pool::units`] works the same units out of the same labels.
pub fn next_age_out(
    labels: &Labels,
    now: OffsetDateTime,
    max_age: Duration,
) -> Option<OffsetDateTime> {
    let max_age = time::Duration::try_from(max_age).ok()?;
    labels
        .values()
        .filter_map(|facts| facts.probed_at?.checked_add(max_age))
        .filter(|&ages_out| ages_out >= now)
        .min()
}

/// What the pool reads of each exit's newest label, by exit name: kept in place of the labels
/// snapshot, which is read a page at a time ([`LabelFacts::of`]).
pub type Labels = HashMap<String, LabelFacts>;

/// What the pool reads of an exit's label: a few dozen bytes, where the label is kilobytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelFacts {
    /// When the exit was last probed.
    pub probed_at: Option<OffsetDateTime>,
    /// Its route.
    pub route: Route,
    /// The country its label placed it in (`audit --geoip`): `Some(None)` when placed where no
    /// database knew the country, `None` when not placed.
    pub place: Option<Option<String>>,
    /// Its last egress address, placed by `broker --geoip` when the label has no place.
    pub last_egress: Option<IpAddr>,
    /// Its smallest round-trip gap (`latency.round_trip.gap_min_us`), µs, when measured.
    pub gap_min_us: Option<u32>,
}

impl LabelFacts {
    /// The facts of `label`.
    pub fn of(label: &ExitLabel) -> Self {
        Self {
            probed_at: label
                .last_probe_at
                .as_deref()
                .and_then(|at| OffsetDateTime::parse(at, &Rfc3339).ok()),
            route: label.route,
            place: label.geo.as_ref().map(|geo| geo.newest.country.clone()),
            last_egress: label.egress_ips.last().and_then(|ip| ip.parse().ok()),
            gap_min_us: label
                .latency
                .round_trip
                .as_ref()
                .map(|round_trip| round_trip.gap_min_us),
        }
    }
}

/// The exit (for a gateway slot: the gateway) whose fence and bans a unit shares.
fn gateway_of(exit: &Exit) -> &str {
    match &exit.session {
        Some(_) => exit
            .name
            .rsplit_once('#')
            .map_or(&exit.name, |(gateway, _)| gateway),
        None => &exit.name,
    }
}

/// The class a route admits.
fn admits(route: Route) -> Option<LeaseClass> {
    match route {
        Route::Identity => Some(LeaseClass::Identity),
        Route::Anonymous => Some(LeaseClass::Anonymous),
        Route::Stateless => Some(LeaseClass::Stateless),
        Route::Quarantine => None,
    }
}

/// The proxy URL a lease on `exit` hands its holder: credentials included, the gateway's
/// `{session}` replaced by the lease's session id.
pub fn lease_url(exit: &Exit, session: Option<&str>) -> Secret {
    let user = exit.proxy.username.as_deref().map(|user| match session {
        Some(session) => user.replace(SESSION_PLACEHOLDER, session),
        None => user.to_owned(),
    });
    exit.proxy.with_user(user.as_deref())
}

/// The longest life a lease on `exit` may have: `max_life`, and below a gateway's sticky
/// window by a tenth of it (at least five seconds), so a renewing holder never outlives the
/// address it was promised.
pub fn life(exit: &Exit, max_life: Duration) -> Duration {
    match exit.session.as_ref().and_then(|s| s.sticky) {
        Some(window) => {
            let margin = (window / 10).max(Duration::from_secs(5));
            max_life.min(window.saturating_sub(margin).max(window / 2))
        }
        None => max_life,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use exitvoice_exits::ExitsFile;
    use exitvoice_schema::LabelsDoc;

    fn pool(text: &str) -> Pool {
        let file: ExitsFile<serde::de::IgnoredAny> = ExitsFile::parse(text.as_bytes()).unwrap();
        Pool::new(file.exits)
    }

    fn facts(doc: &LabelsDoc) -> Labels {
        doc.exits
            .iter()
            .map(|label| (label.name.clone(), LabelFacts::of(label)))
            .collect()
    }

    fn labels(routes: &[(&str, &str, &str)]) -> LabelsDoc {
        let exits: Vec<serde_json::Value> = routes
            .iter()
            .map(|(name, route, at)| {
                serde_json::json!({
                    "name": name, "route": route, "last_probe_at": at, "url": "", "tags": {},
                    "egress_ips": [], "state": "stable", "changed_at": null, "bucket": null,
                    "voices": [], "route_reason": "", "samples": 1, "errors": {}, "history": [],
                    "latency": {"p50_ms": null, "p95_ms": null},
                    "flags": {"tls_preserved": true, "h2_preserved": true, "tls_intercepted": false,
                              "remuxed": false, "not_proxied": false, "tls_reoriginated": false},
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "schema_version": 2, "generated_at": "2026-12-02T10:00:00Z", "baseline": null,
            "exits": exits
        }))
        .unwrap()
    }

    const HOUR: Duration = Duration::from_secs(3600);

    const FILE: &str = r#"
[[exits]]
name = "dc"
url = "http://u:p@127.0.0.1:1"
[[exits]]
name = "gw"
url = "http://user-{session}:p@127.0.0.1:2"
sessions = 2
sticky = "10m"
stateless_per_exit = 5
"#;

    /// The units stay as they are until the moment `next_age_out` names, and change just after
    /// it; a label already too old and one with no probe time do not count.
    #[test]
    fn units_stay_the_same_until_the_first_recent_label_ages_out() {
        let pool = pool(FILE);
        let at = |text: &str| OffsetDateTime::parse(text, &Rfc3339).unwrap();
        let doc = labels(&[
            ("dc", "identity", "2026-12-02T09:30:00Z"),
            ("gw#1", "identity", "2026-12-02T09:50:00Z"),
            ("gw#2", "identity", "2026-12-02T08:00:00Z"),
            ("gone", "identity", "not a time"),
        ]);
        let labels = facts(&doc);
        let now = at("2026-12-02T10:00:00Z");
        let until = next_age_out(&labels, now, HOUR).unwrap();
        assert_eq!(until, at("2026-12-02T10:30:00Z"));
        let units = |now| pool.units(Some(&labels), now, HOUR, 2, HOUR, None);
        assert_eq!(units(now), units(until));
        let after = units(until + time::Duration::SECOND);
        assert_ne!(units(now), after);
        assert_eq!(after[0].admits, None, "dc aged out");
        // Once every label is old, none will age out.
        assert_eq!(
            next_age_out(&labels, at("2026-12-02T11:00:00Z"), HOUR),
            None
        );
    }

    #[test]
    fn labels_decide_and_a_gateway_admits_what_all_its_slots_admit() {
        let pool = pool(FILE);
        let now = OffsetDateTime::parse("2026-12-02T10:00:00Z", &Rfc3339).unwrap();
        let doc = labels(&[
            ("dc", "identity", "2026-12-02T09:30:00Z"),
            ("gw#1", "identity", "2026-12-02T09:30:00Z"),
            ("gw#2", "stateless", "2026-12-02T09:30:00Z"),
        ]);
        let units = pool.units(
            Some(&facts(&doc)),
            now,
            Duration::from_secs(7200),
            2,
            HOUR,
            None,
        );
        let admits: Vec<_> = units
            .iter()
            .map(|u| {
                (
                    u.unit.as_str(),
                    u.exit_name.as_str(),
                    u.admits,
                    u.gateway,
                    u.life_ms,
                    u.capacity,
                )
            })
            .collect();
        assert_eq!(
            admits,
            [
                ("dc", "dc", Some(LeaseClass::Identity), false, 3_600_000, 2),
                ("gw#1", "gw", Some(LeaseClass::Stateless), true, 540_000, 5),
                ("gw#2", "gw", Some(LeaseClass::Stateless), true, 540_000, 5),
            ]
        );
        // Too old, or no label at all: nothing.
        let stale = pool.units(
            Some(&facts(&doc)),
            now,
            Duration::from_secs(600),
            2,
            HOUR,
            None,
        );
        assert!(stale.iter().all(|u| u.admits.is_none()));
        assert!(pool
            .units(None, now, Duration::from_secs(7200), 2, HOUR, None)
            .iter()
            .all(|u| u.admits.is_none()));
        let quarantined = labels(&[("dc", "quarantine", "2026-12-02T09:30:00Z")]);
        assert_eq!(
            pool.units(
                Some(&facts(&quarantined)),
                now,
                Duration::from_secs(7200),
                2,
                HOUR,
                None
            )[0]
            .admits,
            None
        );
    }

    #[test]
    fn a_units_country_is_its_exits_else_the_one_its_label_saw() {
        let pool = pool(
            r#"
[[exits]]
name = "filed"
url = "http://u:p@127.0.0.1:1"
country = "de"
[[exits]]
name = "seen"
url = "http://u:p@127.0.0.1:2"
[[exits]]
name = "unknown"
url = "http://u:p@127.0.0.1:3"
"#,
        );
        let at = "2026-12-02T09:30:00Z";
        let mut doc = labels(&[
            ("filed", "identity", at),
            ("seen", "identity", at),
            ("unknown", "identity", at),
        ]);
        let place = |country: &str| exitvoice_schema::ExitGeo {
            newest: exitvoice_schema::Place {
                country: Some(country.to_owned()),
                asn: None,
                organization: None,
            },
            countries: vec![country.to_owned()],
            asns: Vec::new(),
        };
        // The file's country wins over what the label saw (a mismatch is the auditor's to judge).
        doc.exits[0].geo = Some(place("FR"));
        doc.exits[1].geo = Some(place("ch"));
        let now = OffsetDateTime::parse("2026-12-02T10:00:00Z", &Rfc3339).unwrap();
        let countries: Vec<_> = pool
            .units(Some(&facts(&doc)), now, HOUR, 2, HOUR, None)
            .into_iter()
            .map(|u| u.country)
            .collect();
        assert_eq!(
            countries,
            [Some("DE".to_owned()), Some("CH".to_owned()), None]
        );
    }

    #[test]
    fn a_units_gap_is_its_labels_smallest_and_a_gateways_its_slots_largest() {
        let pool = pool(
            r#"
[[exits]]
name = "near"
url = "http://u:p@127.0.0.1:1"
[[exits]]
name = "unmeasured"
url = "http://u:p@127.0.0.1:2"
[[exits]]
name = "gw"
url = "http://user-{session}:p@127.0.0.1:3"
sessions = 2
"#,
        );
        let at = "2026-12-02T09:30:00Z";
        let mut doc = labels(&[
            ("near", "identity", at),
            ("unmeasured", "identity", at),
            ("gw#1", "identity", at),
            ("gw#2", "identity", at),
        ]);
        let gap = |us: u32| exitvoice_schema::RoundTripLabel {
            samples: 3,
            gap_min_us: us,
            excess_gap_us: us,
            ..Default::default()
        };
        doc.exits[0].latency.round_trip = Some(gap(5_000));
        doc.exits[2].latency.round_trip = Some(gap(4_000));
        doc.exits[3].latency.round_trip = Some(gap(30_400));
        let now = OffsetDateTime::parse("2026-12-02T10:00:00Z", &Rfc3339).unwrap();
        let gaps = |doc: &LabelsDoc| -> Vec<Option<u32>> {
            pool.units(Some(&facts(doc)), now, HOUR, 2, HOUR, None)
                .into_iter()
                .map(|u| u.gap_ms)
                .collect()
        };
        // Whole ms, rounded up: 30.4 ms is kept as 31, and so is 30.9 ms: a refresh leaves
        // the units alone.
        assert_eq!(gaps(&doc), [Some(5), None, Some(31), Some(31)]);
        let before = pool.units(Some(&facts(&doc)), now, HOUR, 2, HOUR, None);
        doc.exits[3].latency.round_trip = Some(gap(30_900));
        assert_eq!(
            pool.units(Some(&facts(&doc)), now, HOUR, 2, HOUR, None),
            before
        );
        // A slot never measured leaves its gateway's gap unknown.
        doc.exits[3].latency.round_trip = None;
        assert_eq!(gaps(&doc), [Some(5), None, None, None]);
    }

    #[test]
    fn a_lease_gets_its_session_in_the_url_and_a_life_below_the_sticky_window() {
        let pool = pool(FILE);
        let gw = pool.exit("gw#1").unwrap();
        let url = lease_url(gw, Some("ab12"));
        assert_eq!(url.expose(), "http://user-ab12:p@127.0.0.1:2");
        assert_eq!(
            lease_url(pool.exit("dc").unwrap(), None).expose(),
            "http://u:p@127.0.0.1:1"
        );
        assert_eq!(
            life(gw, Duration::from_secs(3600)),
            Duration::from_secs(540)
        );
        assert_eq!(
            life(pool.exit("dc").unwrap(), Duration::from_secs(3600)),
            Duration::from_secs(3600)
        );
    }
}
