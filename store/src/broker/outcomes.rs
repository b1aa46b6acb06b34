//! What a released lease's outcome does to its exit: bans with exponential back-off, its error
//! streak, a gateway session id retired.

use exitvoice_lease::{Backoff, Effect};

use super::lease_row::LeaseRow;
use super::transaction::Locked;
use crate::handle::StoreError;

/// Applies a released lease's `effect` at `now`: until when it banned, if it did, and how many
/// expired bans it forgot.
pub(super) async fn apply(
    tx: &mut Locked,
    lease: &LeaseRow,
    effect: Effect,
    now: i64,
) -> Result<(Option<i64>, u64), StoreError> {
    let origin = lease.origin.as_deref().unwrap_or("");
    match effect {
        Effect::Success => {
            sqlx::query("UPDATE broker_exits SET error_streak = 0 WHERE exit_name = $1")
                .bind(&lease.exit_name)
                .execute(&mut **tx)
                .await?;
            let recovered = sqlx::query(
                "DELETE FROM broker_bans WHERE exit_name = $1 AND origin IN ('', $2) \
                 AND until_ms <= $3",
            )
            .bind(&lease.exit_name)
            .bind(origin)
            .bind(now)
            .execute(&mut **tx)
            .await?
            .rows_affected();
            Ok((None, recovered))
        }
        Effect::Blocked(backoff) => match &lease.session {
            // A gateway: the session id goes, never the whole gateway.
            Some(session) => {
                retire(tx, &lease.exit_name, session, now).await?;
                Ok((None, 0))
            }
            None => Ok((
                Some(ban(tx, &lease.exit_name, origin, backoff, now).await?),
                0,
            )),
        },
        Effect::Failed { backoff, streak } => {
            let reached: i64 = sqlx::query_scalar(
                "UPDATE broker_exits SET error_streak = error_streak + 1 WHERE exit_name = $1 \
                 RETURNING error_streak",
            )
            .bind(&lease.exit_name)
            .fetch_one(&mut **tx)
            .await?;
            if reached < i64::from(streak.max(1)) {
                return Ok((None, 0));
            }
            sqlx::query("UPDATE broker_exits SET error_streak = 0 WHERE exit_name = $1")
                .bind(&lease.exit_name)
                .execute(&mut **tx)
                .await?;
            Ok((Some(ban(tx, &lease.exit_name, "", backoff, now).await?), 0))
        }
        Effect::Neutral => Ok((None, 0)),
        Effect::Retire => {
            if let Some(session) = &lease.session {
                retire(tx, &lease.exit_name, session, now).await?;
            }
            Ok((None, 0))
        }
    }
}

/// Retires the gateway session id `session` of `exit_name`: never issued again.
async fn retire(
    tx: &mut Locked,
    exit_name: &str,
    session: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO broker_retired_sessions (exit_name, session, retired_ms) \
         VALUES ($1, $2, $3) ON CONFLICT (exit_name, session) DO NOTHING",
    )
    .bind(exit_name)
    .bind(session)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Bans `exit_name` for `origin` (`''`: for every origin) from `now`; until when.
async fn ban(
    tx: &mut Locked,
    exit_name: &str,
    origin: &str,
    backoff: Backoff,
    now: i64,
) -> Result<i64, StoreError> {
    let strikes: i64 = sqlx::query_scalar(
        "INSERT INTO broker_bans (exit_name, origin, until_ms, strikes) VALUES ($1, $2, 0, 1) \
         ON CONFLICT (exit_name, origin) DO UPDATE SET strikes = broker_bans.strikes + 1 \
         RETURNING strikes",
    )
    .bind(exit_name)
    .bind(origin)
    .fetch_one(&mut **tx)
    .await?;
    let doubled = 1_i64 << (strikes - 1).clamp(0, 6);
    #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
    let length =
        (backoff.ttl_ms.saturating_mul(doubled) as f64 * backoff.jitter.clamp(1.0, 2.0)) as i64;
    let until = now.saturating_add(length.max(1));
    sqlx::query("UPDATE broker_bans SET until_ms = $1 WHERE exit_name = $2 AND origin = $3")
        .bind(until)
        .bind(exit_name)
        .bind(origin)
        .execute(&mut **tx)
        .await?;
    Ok(until)
}
