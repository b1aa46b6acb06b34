//! What a worker's reported outcome does to the exit it used (a gateway's user:pass variants are
//! not one proxy, so one ban must not kill them all):
//! - `ok`: a success; the exit's failure streak ends, its expired bans are forgotten;
//! - `403`, `429`, `captcha`: the origin refused the exit: a gateway's session id is retired
//!   (never the whole gateway), a plain exit is banned for that origin;
//! - `timeout`, `error`: the exit failed; a streak of them bans the whole exit;
//! - `closed` (the forward proxy saw a tunnel end with nothing to judge it by) and any other
//!   HTTP status (`100`–`599`): reported, nothing follows.
//!
//! Bans last `ban-ttl`, doubled for each earlier ban of the same pair, times a jitter drawn
//! between 1 and 1.25 so repeat offenders do not all come back at once.

use std::time::Duration;

use exitvoice_lease::{Backoff, Effect};
use rand::Rng;

/// The longest outcome accepted, in bytes.
const MAX_OUTCOME: usize = 32;

/// Why an outcome was not accepted.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("outcome must be ok, captcha, timeout, error, closed or an HTTP status (100-599)")]
pub struct BadOutcome;

/// The effect of `outcome` under a ban length of `ban_ttl` and a failure streak of `streak`.
///
/// # Errors
/// [`BadOutcome`] for anything but the outcomes above.
pub fn effect(outcome: &str, ban_ttl: Duration, streak: u32) -> Result<Effect, BadOutcome> {
    let backoff = || Backoff {
        ttl_ms: i64::try_from(ban_ttl.as_millis()).unwrap_or(i64::MAX),
        jitter: rand::rng().random_range(1.0..1.25),
    };
    if outcome.len() > MAX_OUTCOME {
        return Err(BadOutcome);
    }
    Ok(match outcome {
        "ok" => Effect::Success,
        "403" | "429" | "captcha" => Effect::Blocked(backoff()),
        "timeout" | "error" => Effect::Failed {
            backoff: backoff(),
            streak,
        },
        // The proxy saw the tunnel end with nothing to judge it by.
        "closed" => Effect::Neutral,
        status => match status.parse::<u16>() {
            Ok(100..=599) if status.len() == 3 => Effect::Neutral,
            _ => return Err(BadOutcome),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_and_their_effects() {
        let hour = Duration::from_secs(3600);
        assert_eq!(effect("ok", hour, 3), Ok(Effect::Success));
        for blocked in ["403", "429", "captcha"] {
            let Ok(Effect::Blocked(backoff)) = effect(blocked, hour, 3) else {
                panic!("{blocked} blocks");
            };
            assert_eq!(backoff.ttl_ms, 3_600_000);
            assert!((1.0..1.25).contains(&backoff.jitter));
        }
        assert!(matches!(
            effect("timeout", hour, 3),
            Ok(Effect::Failed { streak: 3, .. })
        ));
        assert_eq!(effect("503", hour, 3), Ok(Effect::Neutral));
        assert_eq!(effect("closed", hour, 3), Ok(Effect::Neutral));
        for bad in [
            "",
            "OK",
            "99",
            "600",
            "4030",
            "+429",
            "error; drop table",
            &"9".repeat(40),
        ] {
            assert_eq!(effect(bad, hour, 3), Err(BadOutcome), "{bad:?}");
        }
    }
}
