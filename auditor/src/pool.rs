//! The pool as a whole, from its exits' labels: how many in each state, bucket, route and
//! client family pair, the success rate, and how many egress addresses the exits really leave
//! from (25 exits behind one egress are one exit: `collapsed_egress`).

use std::collections::{BTreeMap, HashSet};

use exitvoice_geo::GeoIp;
use exitvoice_schema::{ExitCoherence, ExitGeo, ExitLabel, Family, LabelsDoc, Place, Pool};

/// The pool summary, counted an exit's label at a time (a run never holds every label).
#[derive(Debug, Default)]
pub struct PoolTally {
    pool: Pool,
    egress: HashSet<String>,
    probes: u64,
    successes: u64,
    answering: u32,
    places: Places,
    /// Exits by the TCP voice of their newest SYN (`unknown` without one).
    stacks: BTreeMap<String, u32>,
    with_stack: bool,
}

impl PoolTally {
    /// Counts `label` in.
    pub fn add(&mut self, label: &ExitLabel) {
        let pool = &mut self.pool;
        pool.exits = pool.exits.saturating_add(1);
        let count =
            |map: &mut BTreeMap<String, u32>, key: String| *map.entry(key).or_default() += 1;
        count(&mut pool.by_state, label.state.to_string());
        count(
            &mut pool.by_bucket,
            label.bucket.map_or("none".to_owned(), |b| b.to_string()),
        );
        count(&mut pool.by_route, label.route.to_string());
        count(&mut pool.by_family, family_pair(label.coherence.as_ref()));
        self.successes += u64::from(label.samples);
        self.probes +=
            u64::from(label.samples) + label.errors.values().map(|&n| u64::from(n)).sum::<u64>();
        if label.samples > 0 {
            self.answering += 1;
        }
        for ip in &label.egress_ips {
            if !self.egress.contains(ip) {
                self.egress.insert(ip.clone());
            }
        }
        self.places.add_label(label);
        self.with_stack |= label.stack.is_some();
        count(
            &mut self.stacks,
            label
                .stack
                .as_ref()
                .map_or_else(|| "unknown".to_owned(), |s| s.voice.clone()),
        );
    }

    /// The pool of the labels counted.
    #[must_use]
    pub fn finish(self) -> Pool {
        let mut pool = self.pool;
        #[allow(clippy::cast_precision_loss)]
        {
            pool.success_rate =
                (self.probes > 0).then(|| self.successes as f64 / self.probes as f64);
        }
        pool.unique_egress = u32::try_from(self.egress.len()).unwrap_or(u32::MAX);
        pool.collapsed_egress = self.answering >= 2 && self.egress.len() == 1;
        self.places.count_into(&mut pool);
        // Nothing by stack when no exit has one.
        if self.with_stack {
            pool.by_stack = self.stacks;
        }
        pool
    }
}

/// The pool summary of `labels`.
#[cfg(test)]
pub(crate) fn summary(labels: &[ExitLabel]) -> Pool {
    let mut tally = PoolTally::default();
    for label in labels {
        tally.add(label);
    }
    tally.finish()
}

/// The pool by country and by network of each exit's newest placed sample, and the share of
/// the placed exits behind the largest network; nothing without `audit --geoip`.
#[derive(Debug, Default)]
struct Places {
    by_country: BTreeMap<String, u32>,
    by_asn: BTreeMap<String, u32>,
    with_asn: u32,
}

impl Places {
    fn add(&mut self, place: &Place) {
        let country = place
            .country
            .clone()
            .unwrap_or_else(|| "unknown".to_owned());
        *self.by_country.entry(country).or_default() += 1;
        let network = place
            .asn
            .map_or_else(|| "unknown".to_owned(), |n| format!("AS{n}"));
        *self.by_asn.entry(network).or_default() += 1;
        self.with_asn += u32::from(place.asn.is_some());
    }

    /// Counts the newest place of `label`, if it has one.
    fn add_label(&mut self, label: &ExitLabel) {
        if let Some(geo) = &label.geo {
            self.add(&geo.newest);
        }
    }

    /// Counts `pool` by country and network again from these places, and names `geo` among
    /// its sources.
    fn recount(self, pool: &mut Pool, geo: &GeoIp) {
        pool.by_country.clear();
        pool.by_asn.clear();
        pool.largest_asn_share = None;
        self.count_into(pool);
        for source in geo.sources() {
            if !pool.geo_sources.contains(&source) {
                pool.geo_sources.push(source);
            }
        }
    }

    fn count_into(self, pool: &mut Pool) {
        if self.by_country.is_empty() {
            return;
        }
        let largest = self
            .by_asn
            .iter()
            .filter(|(network, _)| *network != "unknown")
            .map(|(_, &count)| count)
            .max();
        pool.largest_asn_share = largest.map(|n| f64::from(n) / f64::from(self.with_asn));
        pool.by_country = self.by_country;
        pool.by_asn = self.by_asn;
    }
}

/// Places the exits of `doc` whose labels have none (audited without `--geoip`) by their
/// egress addresses in `geo`, looked up now (`labels`, `dashboard` and `broker --geoip`), and
/// counts the pool by country and network again ([`place_label`], [`Places`]). How many exits
/// it placed.
pub fn place_unplaced(doc: &mut LabelsDoc, geo: &GeoIp) -> usize {
    let mut placing = Placing::default();
    for label in &mut doc.exits {
        placing.place(label, geo);
    }
    placing.recount(doc.pool.as_mut(), geo)
}

/// [`place_unplaced`] a label at a time, for a snapshot read a page at a time.
#[derive(Debug, Default)]
pub struct Placing {
    places: Places,
    placed: usize,
}

impl Placing {
    /// Places `label` ([`place_label`]) and counts its place.
    pub fn place(&mut self, label: &mut ExitLabel, geo: &GeoIp) {
        self.placed += usize::from(place_label(label, geo));
        self.places.add_label(label);
    }

    /// Counts `pool` by country and network again when a label was placed; how many were.
    pub fn recount(self, pool: Option<&mut Pool>, geo: &GeoIp) -> usize {
        if let (1.., Some(pool)) = (self.placed, pool) {
            self.places.recount(pool, geo);
        }
        self.placed
    }
}

/// Places `label` by its egress addresses in `geo` when it has no place (audited without
/// `--geoip`); labels placed when their samples were recorded keep those places. The newest
/// place is the last egress address's (first seen first). Whether it placed the label.
pub fn place_label(label: &mut ExitLabel, geo: &GeoIp) -> bool {
    if label.geo.is_some() {
        return false;
    }
    let places: Vec<Place> = label
        .egress_ips
        .iter()
        .filter_map(|ip| ip.parse().ok())
        .map(|ip| geo.place(ip))
        .collect();
    let Some(newest) = places.last().cloned() else {
        return false;
    };
    let mut exit = ExitGeo {
        newest,
        countries: Vec::new(),
        asns: Vec::new(),
    };
    for place in places {
        if let Some(country) = place.country.filter(|c| !exit.countries.contains(c)) {
            exit.countries.push(country);
        }
        if let Some(asn) = place.asn.filter(|n| !exit.asns.contains(n)) {
            exit.asns.push(asn);
        }
    }
    label.geo = Some(exit);
    true
}

/// An exit's families as `tls+http` (`-` for an unknown side), `none` without a coherence.
fn family_pair(coherence: Option<&ExitCoherence>) -> String {
    fn name(family: &Option<Family>) -> &str {
        family.as_ref().map_or("-", |f| f.name.as_str())
    }
    coherence.map_or_else(
        || "none".to_owned(),
        |c| {
            format!(
                "{}+{}",
                name(&c.newest.tls_family),
                name(&c.newest.http_family)
            )
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use exitvoice_schema::{DriftState, Route};

    fn label(name: &str, egress: &[&str], samples: u32, errors: u32) -> ExitLabel {
        let json = serde_json::json!({
            "name": name, "url": "http://h:1", "tags": {},
            "egress_ips": egress, "state": "stable", "changed_at": null, "bucket": "A",
            "flags": {"tls_preserved": true, "h2_preserved": true, "tls_intercepted": false},
            "voices": [], "route": "identity", "route_reason": "r", "samples": samples,
            "errors": if errors > 0 { serde_json::json!({"timeout": errors}) } else { serde_json::json!({}) },
            "latency": {"p50_ms": null, "p95_ms": null}, "last_probe_at": null, "history": [],
        });
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn counts_rates_and_collapsed_egress() {
        let family = |name: &str| Family {
            name: name.into(),
            exact: false,
        };
        let coherent = |tls: &str, http: Option<&str>| ExitCoherence {
            newest: exitvoice_schema::Coherence {
                score: 1.0,
                reasons: vec![],
                tls_family: Some(family(tls)),
                http_family: http.map(family),
                ua_family: None,
                ua_os: None,
                tcp_os: None,
            },
            baseline_score: None,
            kept: true,
        };
        let mut a = label("a", &["10.0.0.1"], 4, 0);
        a.coherence = Some(coherent("rustls", Some("chrome")));
        let mut b = label("b", &["10.0.0.2"], 3, 1);
        b.coherence = Some(coherent("openssl", None));
        let mut failing = label("c", &[], 0, 4);
        failing.route = Route::Quarantine;
        failing.state = DriftState::Unknown;
        failing.bucket = None;
        let pool = summary(&[a, b, failing]);
        assert_eq!(pool.exits, 3);
        assert_eq!(pool.by_route.get("identity"), Some(&2));
        assert_eq!(pool.by_route.get("quarantine"), Some(&1));
        assert_eq!(pool.by_bucket.get("none"), Some(&1));
        assert_eq!(pool.by_state.get("unknown"), Some(&1));
        assert_eq!(pool.by_family.get("rustls+chrome"), Some(&1));
        assert_eq!(pool.by_family.get("openssl+-"), Some(&1));
        assert_eq!(pool.by_family.get("none"), Some(&1));
        assert_eq!(pool.success_rate, Some(7.0 / 12.0));
        assert_eq!(pool.unique_egress, 2);
        assert!(!pool.collapsed_egress);
        let same = summary(&[
            label("a", &["10.0.0.1"], 4, 0),
            label("b", &["10.0.0.1"], 4, 0),
        ]);
        assert!(same.collapsed_egress && same.unique_egress == 1);
        // One answering exit is no pool to collapse.
        assert!(!summary(&[label("a", &["10.0.0.1"], 4, 0)]).collapsed_egress);
        assert_eq!(summary(&[]).success_rate, None);
    }

    #[test]
    fn the_pool_by_country_and_network() {
        let placed = |name: &str, country: Option<&str>, asn: Option<u32>| {
            let mut exit = label(name, &["10.0.0.1"], 4, 0);
            exit.geo = Some(exitvoice_schema::ExitGeo {
                newest: Place {
                    country: country.map(str::to_owned),
                    asn,
                    organization: None,
                },
                ..exitvoice_schema::ExitGeo::default()
            });
            exit
        };
        let pool = summary(&[
            placed("a", Some("DE"), Some(3320)),
            placed("b", Some("DE"), Some(3320)),
            placed("c", Some("FR"), Some(3215)),
            placed("d", None, None),
            label("e", &["10.0.0.2"], 4, 0),
        ]);
        assert_eq!(pool.by_country.get("DE"), Some(&2));
        assert_eq!(pool.by_country.get("FR"), Some(&1));
        assert_eq!(pool.by_country.get("unknown"), Some(&1));
        assert_eq!(pool.by_asn.get("AS3320"), Some(&2));
        assert_eq!(pool.by_asn.get("unknown"), Some(&1));
        assert_eq!(pool.largest_asn_share, Some(2.0 / 3.0));
        let blind = summary(&[label("e", &["10.0.0.2"], 4, 0)]);
        assert!(blind.by_country.is_empty() && blind.largest_asn_share.is_none());
    }
}
