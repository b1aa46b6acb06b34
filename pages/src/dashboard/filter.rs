//! Filtering and sorting the exits table by query parameters, so it works without JavaScript:
//! `/exits?state=stable&route=identity&bucket=A&tag=region=eu&sort=p95&order=desc`.

use std::cmp::Ordering;

use exitvoice_schema::ExitLabel;
use serde::Deserialize;

/// The query parameters of `/exits`. Empty values mean "any" (what an unset `<select>` sends).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ExitQuery {
    /// Drift state: `stable`, `alternating`, `mutating`, `unknown`.
    pub(crate) state: String,
    /// Route: `identity`, `anonymous`, `stateless`, `quarantine`.
    pub(crate) route: String,
    /// Bucket `A`–`D`, or `none`.
    pub(crate) bucket: String,
    /// `key=value` (that tag with that value) or `key` (that tag with any value).
    pub(crate) tag: String,
    /// Country of the newest sample (`audit --geoip`), or `unknown`.
    pub(crate) country: String,
    /// Network of the newest sample, `AS<number>`, or `unknown`.
    pub(crate) asn: String,
    /// A column of [`SORT_KEYS`]; the exits file's order when empty or unknown.
    pub(crate) sort: String,
    /// `desc` for descending; anything else ascending.
    pub(crate) order: String,
}

/// The columns the table sorts by, with their headings.
pub(crate) const SORT_KEYS: [(&str, &str); 12] = [
    ("name", "Exit"),
    ("state", "State"),
    ("bucket", "Bucket"),
    ("route", "Route"),
    ("country", "Country"),
    ("asn", "Network"),
    ("samples", "Samples"),
    ("errors", "Errors"),
    ("p50", "p50 ms"),
    ("p95", "p95 ms"),
    ("gap", "Gap ms"),
    ("last_probe", "Last probe"),
];

/// The hidden leg behind an exit as its label measured it (`None` without a measure).
pub(crate) fn excess_gap(label: &ExitLabel) -> Option<u32> {
    label.latency.round_trip.as_ref().map(|rt| rt.excess_gap_us)
}

/// The country of a label's newest sample as the filter and the page write it: `unknown`
/// when no database placed it.
pub(crate) fn country_name(label: &ExitLabel) -> String {
    label
        .geo
        .as_ref()
        .and_then(|g| g.newest.country.clone())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The network of a label's newest sample, `AS<number>` or `unknown`.
pub(crate) fn asn_name(label: &ExitLabel) -> String {
    label
        .geo
        .as_ref()
        .and_then(|g| g.newest.asn)
        .map_or_else(|| "unknown".to_owned(), |n| format!("AS{n}"))
}

/// The bucket of a label as the filter and the page write it.
pub(crate) fn bucket_name(label: &ExitLabel) -> String {
    label
        .bucket
        .map_or_else(|| "none".to_owned(), |b| b.to_string())
}

impl ExitQuery {
    /// Whether `label` passes every filter set.
    pub(crate) fn keeps(&self, label: &ExitLabel) -> bool {
        let tag_ok = match self.tag.split_once('=') {
            _ if self.tag.is_empty() => true,
            Some((key, value)) => label.tags.get(key).is_some_and(|v| v == value),
            None => label.tags.contains_key(&self.tag),
        };
        (self.state.is_empty() || label.state.to_string() == self.state)
            && (self.route.is_empty() || label.route.to_string() == self.route)
            && (self.bucket.is_empty() || bucket_name(label) == self.bucket)
            && (self.country.is_empty() || country_name(label) == self.country)
            && (self.asn.is_empty() || asn_name(label) == self.asn)
            && tag_ok
    }

    /// Whether the order is descending.
    pub(crate) fn descending(&self) -> bool {
        self.order == "desc"
    }

    /// The labels this query keeps, in its order (a stable sort: ties keep the file's order).
    pub(crate) fn apply<'a>(&self, labels: &'a [ExitLabel]) -> Vec<&'a ExitLabel> {
        let mut kept: Vec<&ExitLabel> = labels.iter().filter(|l| self.keeps(l)).collect();
        let compare: Option<fn(&ExitLabel, &ExitLabel) -> Ordering> = match self.sort.as_str() {
            "name" => Some(|a, b| a.name.cmp(&b.name)),
            "state" => Some(|a, b| a.state.to_string().cmp(&b.state.to_string())),
            "bucket" => Some(|a, b| bucket_name(a).cmp(&bucket_name(b))),
            "route" => Some(|a, b| route_rank(a).cmp(&route_rank(b))),
            "country" => Some(|a, b| country_name(a).cmp(&country_name(b))),
            "asn" => Some(|a, b| {
                let number = |l: &ExitLabel| l.geo.as_ref().and_then(|g| g.newest.asn);
                number(a).cmp(&number(b))
            }),
            "samples" => Some(|a, b| a.samples.cmp(&b.samples)),
            "errors" => Some(|a, b| error_count(a).cmp(&error_count(b))),
            "p50" => Some(|a, b| a.latency.p50_ms.cmp(&b.latency.p50_ms)),
            "p95" => Some(|a, b| a.latency.p95_ms.cmp(&b.latency.p95_ms)),
            "gap" => Some(|a, b| excess_gap(a).cmp(&excess_gap(b))),
            "last_probe" => Some(|a, b| a.last_probe_at.cmp(&b.last_probe_at)),
            _ => None,
        };
        if let Some(compare) = compare {
            kept.sort_by(|a, b| compare(a, b));
            if self.descending() {
                kept.reverse();
            }
        }
        kept
    }
}

/// Routes from the most usable to the least (the order `Route` is declared in).
fn route_rank(label: &ExitLabel) -> u8 {
    use exitvoice_schema::Route;
    match label.route {
        Route::Identity => 0,
        Route::Anonymous => 1,
        Route::Stateless => 2,
        Route::Quarantine => 3,
    }
}

/// Failed probes of the window.
pub(crate) fn error_count(label: &ExitLabel) -> u32 {
    label.errors.values().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A label with only what the filters read set.
    fn label(name: &str, state: &str, route: &str, bucket: Option<&str>, p95: u64) -> ExitLabel {
        serde_json::from_value(serde_json::json!({
            "name": name, "url": "http://127.0.0.1:1", "tags": {"region": name},
            "egress_ips": [], "state": state, "changed_at": null, "bucket": bucket,
            "flags": {"tls_preserved": false, "h2_preserved": false, "tls_intercepted": false},
            "voices": [], "route": route, "route_reason": "", "samples": 0, "errors": {},
            "latency": {"p50_ms": null, "p95_ms": p95}, "last_probe_at": null, "history": [],
        }))
        .expect("a label")
    }

    fn names(query: &ExitQuery, labels: &[ExitLabel]) -> Vec<String> {
        query.apply(labels).iter().map(|l| l.name.clone()).collect()
    }

    #[test]
    fn filters_and_sorting_by_query() {
        let labels = [
            label("eu", "stable", "identity", Some("A"), 80),
            label("us", "mutating", "stateless", Some("B"), 20),
            label("ap", "unknown", "quarantine", None, 50),
        ];
        let query = |text: &str| -> ExitQuery {
            serde_json::from_value(serde_json::Value::Object(
                text.split('&')
                    .filter_map(|pair| pair.split_once('='))
                    .map(|(k, v)| (k.to_owned(), serde_json::Value::from(v)))
                    .collect(),
            ))
            .expect("a query")
        };
        assert_eq!(names(&query(""), &labels), ["eu", "us", "ap"]);
        assert_eq!(names(&query("state=stable"), &labels), ["eu"]);
        assert_eq!(names(&query("route=quarantine"), &labels), ["ap"]);
        assert_eq!(names(&query("bucket=none"), &labels), ["ap"]);
        assert_eq!(names(&query("bucket=B&route=stateless"), &labels), ["us"]);
        assert!(names(&query("bucket=B&route=identity"), &labels).is_empty());
        assert_eq!(names(&query("tag=region"), &labels).len(), 3);
        assert_eq!(names(&query("tag=region=us"), &labels), ["us"]);
        assert_eq!(names(&query("sort=p95"), &labels), ["us", "ap", "eu"]);
        assert_eq!(
            names(&query("sort=p95&order=desc"), &labels),
            ["eu", "ap", "us"]
        );
        assert_eq!(names(&query("sort=route"), &labels), ["eu", "us", "ap"]);
        assert_eq!(names(&query("sort=name"), &labels), ["ap", "eu", "us"]);
        assert_eq!(names(&query("sort=nonsense"), &labels), ["eu", "us", "ap"]);
    }

    #[test]
    fn filters_and_sorting_by_country_and_network() {
        let placed = |name: &str, country: &str, asn: u32| {
            let mut l = label(name, "stable", "identity", Some("A"), 1);
            l.geo = Some(exitvoice_schema::ExitGeo {
                newest: exitvoice_schema::Place {
                    country: Some(country.to_owned()),
                    asn: Some(asn),
                    organization: None,
                },
                ..exitvoice_schema::ExitGeo::default()
            });
            l
        };
        let labels = [
            placed("de", "DE", 3320),
            placed("fr", "FR", 3215),
            label("none", "stable", "identity", Some("A"), 1),
        ];
        let query = |country: &str, asn: &str, sort: &str| ExitQuery {
            country: country.to_owned(),
            asn: asn.to_owned(),
            sort: sort.to_owned(),
            ..ExitQuery::default()
        };
        assert_eq!(names(&query("DE", "", ""), &labels), ["de"]);
        assert_eq!(names(&query("unknown", "", ""), &labels), ["none"]);
        assert_eq!(names(&query("", "AS3215", ""), &labels), ["fr"]);
        assert_eq!(names(&query("", "", "asn"), &labels), ["none", "fr", "de"]);
        assert_eq!(
            names(&query("", "", "country"), &labels),
            ["de", "fr", "none"]
        );
    }
}
