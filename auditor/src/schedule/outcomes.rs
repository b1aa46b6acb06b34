//! Probes by outcome (`ok`, or the failure's error class): all a run keeps of its probe
//! records once they are stored, for the summary log and the metrics.

use std::collections::BTreeMap;

use exitvoice_schema::ProbeRecord;

/// How many probes ended how.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcomes(BTreeMap<String, u64>);

impl Outcomes {
    /// Counts `record` under its outcome.
    pub fn count(&mut self, record: &ProbeRecord) {
        let outcome = record
            .error
            .as_ref()
            .map_or("ok", |error| error.class.as_str());
        match self.0.get_mut(outcome) {
            Some(count) => *count += 1,
            None => {
                self.0.insert(outcome.to_owned(), 1);
            }
        }
    }

    /// Probes counted.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Each outcome with its count, outcomes in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0
            .iter()
            .map(|(outcome, &count)| (outcome.as_str(), count))
    }
}
