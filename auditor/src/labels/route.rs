//! The route rule applied to one window: its inputs, every reason they give, and the route.

use exitvoice_schema::{Bucket, DriftState, Flags, Route};

use super::rule::RouteRule;

/// What the route rule reads from an exit's window.
pub(super) struct RouteInputs<'a> {
    /// Why the exit is failing, if it is.
    pub failing: Option<String>,
    pub state: DriftState,
    /// Bucket of the newest sample.
    pub bucket: Option<Bucket>,
    /// Buckets of every sample in the window.
    pub window_buckets: &'a [Bucket],
    pub flags: Flags,
    /// A rotating exit whose samples all left from one egress.
    pub not_rotating: bool,
    /// A sample left from another country or network than the exits file expects.
    pub geo_mismatch: bool,
    /// The round-trip gap says `likely`: a client far behind the exit.
    pub latency_gap: bool,
}

/// Every reason the rule finds, by the route it asks for.
pub(super) struct Reasons {
    quarantine: Vec<String>,
    /// Reasons for stateless that are not quarantine reasons too.
    stateless: Vec<String>,
    /// What keeps the exit from identity.
    not_identity: Vec<String>,
    /// Reasons listed that change no route.
    notes: Vec<String>,
}

/// A route and every reason for it, most severe first.
pub(super) struct Decision {
    pub route: Route,
    pub reasons: Vec<String>,
}

impl RouteInputs<'_> {
    /// Every reason `rule` finds in the inputs (see the module docs).
    pub fn reasons(&self, rule: &RouteRule) -> Reasons {
        let buckets_in = |wanted: &[Bucket]| -> Vec<String> {
            let mut seen: Vec<Bucket> = Vec::new();
            for b in self.window_buckets {
                if wanted.contains(b) && !seen.contains(b) {
                    seen.push(*b);
                }
            }
            seen.iter().map(|b| format!("bucket {b}")).collect()
        };
        let mut quarantine: Vec<String> = self.failing.iter().cloned().collect();
        if rule.quarantine_intercepted && self.flags.tls_intercepted {
            quarantine.push("tls_intercepted".to_owned());
        }
        if rule.quarantine_reoriginated && self.flags.tls_reoriginated {
            quarantine.push("tls_reoriginated".to_owned());
        }
        if self.not_rotating {
            quarantine.push("not_rotating".to_owned());
        }
        if rule.quarantine_not_proxied && self.flags.not_proxied {
            quarantine.push("not_proxied".to_owned());
        }
        if rule.quarantine_geo_mismatch && self.geo_mismatch {
            quarantine.push("geo_mismatch".to_owned());
        }
        let mut notes = Vec::new();
        if self.latency_gap {
            if rule.quarantine_latency_gap {
                quarantine.push("latency_gap".to_owned());
            } else {
                notes.push("latency_gap".to_owned());
            }
        }
        quarantine.extend(buckets_in(&rule.quarantine_buckets));
        if rule.quarantine_states.contains(&self.state) {
            quarantine.push(format!("state {}", self.state));
        }
        let mut stateless: Vec<String> = Vec::new();
        if rule.stateless_states.contains(&self.state) {
            stateless.push(format!("state {}", self.state));
        }
        stateless.extend(buckets_in(&rule.stateless_buckets));
        stateless.retain(|r| !quarantine.contains(r));
        let identity_state = rule.identity_states.contains(&self.state);
        let identity_bucket = self
            .bucket
            .is_some_and(|b| rule.identity_buckets.contains(&b));
        let mut not_identity: Vec<String> = Vec::new();
        if !identity_state {
            not_identity.push(format!("state {}", self.state));
        }
        if !identity_bucket {
            not_identity.push(
                self.bucket
                    .map_or("no h2 bucket".to_owned(), |b| format!("bucket {b}")),
            );
        }
        if !self.flags.tls_preserved {
            not_identity.push("tls not preserved".to_owned());
        }
        if !self.flags.h2_preserved {
            not_identity.push("h2 not preserved".to_owned());
        }
        if self.geo_mismatch && !rule.quarantine_geo_mismatch {
            not_identity.push("geo_mismatch".to_owned());
        }
        Reasons {
            quarantine,
            stateless,
            not_identity,
            notes,
        }
    }
}

impl Reasons {
    /// The worst route any reason asks for, with every reason, most severe first.
    pub fn decide(self) -> Decision {
        let route = if !self.quarantine.is_empty() {
            Route::Quarantine
        } else if !self.stateless.is_empty() {
            Route::Stateless
        } else if self.not_identity.is_empty() {
            let mut reasons = vec!["stable, browser-shaped, preserved".to_owned()];
            reasons.extend(self.notes);
            return Decision {
                route: Route::Identity,
                reasons,
            };
        } else {
            Route::Anonymous
        };
        let mut reasons = self.quarantine;
        for reason in self
            .stateless
            .into_iter()
            .chain(self.not_identity)
            .chain(self.notes)
        {
            if !reasons.contains(&reason) {
                reasons.push(reason);
            }
        }
        Decision { route, reasons }
    }
}
