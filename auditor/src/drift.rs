//! Drift classification of an exit's recent voices (DESIGN.md, "drift state").
//!
//! Over the last [`DriftConfig::window`] successful samples, oldest first:
//! - fewer than [`DriftConfig::min_samples`] → `unknown` (never `stable` on thin evidence);
//! - one voice → `stable`;
//! - three or more voices → `mutating`;
//! - two voices with exactly one switch, the new voice holding for at least
//!   [`DriftConfig::min_run_after_switch`] samples → `stable`, with `changed_at` the time of the
//!   first sample of the new voice (a re-provisioned exit, not a flapping one);
//! - two voices with one switch but too short a run after it → `unknown` (cannot tell a switch
//!   from the start of a flap yet);
//! - two voices with two or more switches → `alternating`.

use exitvoice_schema::DriftState;

/// Tunables of the classifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriftConfig {
    /// Samples considered, most recent last (DESIGN.md: 8).
    pub window: usize,
    /// Fewer successful samples than this → `unknown`.
    pub min_samples: usize,
    /// After a single switch, the new voice must hold this many samples to count as stable.
    pub min_run_after_switch: usize,
}

impl Default for DriftConfig {
    fn default() -> Self {
        Self {
            window: 8,
            min_samples: 3,
            min_run_after_switch: 2,
        }
    }
}

/// The classification: state, and when the voice changed for a stable exit after a switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drift<T> {
    /// The drift state.
    pub state: DriftState,
    /// Timestamp of the first sample of the current voice, after one clean switch.
    pub changed_at: Option<T>,
}

/// Classifies `samples` (voice, timestamp), oldest first; only the last `window` count.
pub fn classify<V: PartialEq, T: Clone>(samples: &[(V, T)], config: DriftConfig) -> Drift<T> {
    let start = samples.len().saturating_sub(config.window);
    let window = samples.get(start..).unwrap_or_default();
    let unknown = Drift {
        state: DriftState::Unknown,
        changed_at: None,
    };
    if window.is_empty() || window.len() < config.min_samples {
        return unknown;
    }
    let mut distinct: Vec<&V> = Vec::new();
    for (voice, _) in window {
        if !distinct.contains(&voice) {
            distinct.push(voice);
        }
    }
    let switches: Vec<usize> = (1..window.len())
        .filter(|&i| window.get(i).map(|s| &s.0) != window.get(i - 1).map(|s| &s.0))
        .collect();
    match (distinct.len(), switches.as_slice()) {
        (1, _) => Drift {
            state: DriftState::Stable,
            changed_at: None,
        },
        (2, [switch]) if window.len() - switch >= config.min_run_after_switch => Drift {
            state: DriftState::Stable,
            changed_at: window.get(*switch).map(|s| s.1.clone()),
        },
        (2, [_]) => unknown,
        (2, _) => Drift {
            state: DriftState::Alternating,
            changed_at: None,
        },
        _ => Drift {
            state: DriftState::Mutating,
            changed_at: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(voices: &str) -> Drift<usize> {
        let samples: Vec<(char, usize)> = voices.chars().zip(0..).collect();
        classify(&samples, DriftConfig::default())
    }

    #[test]
    fn table_of_voice_sequences() {
        use DriftState::*;
        let table: &[(&str, DriftState, Option<usize>)] = &[
            ("", Unknown, None),
            ("A", Unknown, None),
            ("AA", Unknown, None),
            ("AAA", Stable, None),
            ("AAAA", Stable, None),
            ("AAAABBBB", Stable, Some(4)),
            ("AABB", Stable, Some(2)),
            ("AAAAB", Unknown, None),
            ("ABAB", Alternating, None),
            ("ABABABAB", Alternating, None),
            ("AABBA", Alternating, None),
            ("ABC", Mutating, None),
            ("AAAAAABC", Mutating, None),
            // Only the last 8 count: the old C dropped out, one clean switch A→B remains.
            ("CAAAABBBB", Stable, Some(5)),
            // Window of 8 entirely B after an old switch: plain stable.
            ("AAAABBBBBBBB", Stable, None),
            // The old flapping dropped out of the window.
            ("ABABAAAAAAAA", Stable, None),
        ];
        for (voices, state, changed_at) in table {
            let drift = run(voices);
            assert_eq!(drift.state, *state, "{voices}");
            assert_eq!(drift.changed_at, *changed_at, "{voices}");
        }
    }

    #[test]
    fn minimum_is_configurable() {
        let config = DriftConfig {
            min_samples: 6,
            ..DriftConfig::default()
        };
        let samples: Vec<(u8, u8)> = vec![(1, 0), (1, 1), (1, 2), (1, 3), (1, 4)];
        assert_eq!(classify(&samples, config).state, DriftState::Unknown);
    }
}
