//! The lease store on Redis (`--store redis://…` or `rediss://…`).
//!
//! Each step is one Lua function of one Redis Functions library, atomic on the server
//! ([`common.lua`] starts the library): acquire, renew and release judge fence and holder and
//! change the pool in one step. Every time is the server's (`TIME` inside the function). An acquire never reads the pool: units
//! free for a class sit in sorted sets (`free:<rank>`: nothing live; `open:<rank>`: room for
//! stateless leases) ordered by the last grant or end on each (a write of the pool keeps that
//! order), and a grant or an end moves the one unit it touches; expired leases are ended, oldest first, by the next script that runs (a sorted set
//! by expiry; an acquire looks only once the first expiry has come). Fences are per exit (`HINCRBY`), bans and their back-off per (exit, origin).
//!
//! Every key starts with `<prefix>{<pool>}:`: the hash tag puts one pool in one Redis Cluster
//! slot, so a script's keys are always on one node; several pools spread over a cluster
//! (`redis+cluster://`, [`link`]).
//!
//! [`common.lua`]: https://redis.io/docs/latest/develop/interact/programmability/functions-intro/

use std::collections::HashMap;
use std::sync::Arc;

use exitvoice_lease::{
    Acquire, Effect, EgressRecord, ExitReport, Gauges, Granted, Refusal, Released, UnitSpec,
};
use redis::{FromRedisValue, Value};

use crate::durability::{self, Durability};
use crate::lease_store::{LeaseStore, StoreFailure};

mod epoch;
mod link;
mod url;

pub use epoch::Epochs;
use epoch::{lost, Lost, Recovery};
use link::Link;
pub use url::{RedisUrl, RedisUrlError};

/// Units written per script call: a whole pool of 100,000 is 200 calls, none blocking the
/// server for long.
const SYNC_CHUNK: usize = 500;

impl From<redis::RedisError> for StoreFailure {
    fn from(error: redis::RedisError) -> Self {
        Self::new(error)
    }
}

/// A live lease as [`ExitReport::live`] lists it: unit, class, holder, expiry.
type LiveLease = (String, String, String, i64);

/// The steps, each a function of the library.
#[derive(Clone, Copy, Debug)]
enum Step {
    Acquire,
    Renew,
    Release,
    Egress,
    Sync,
    Report,
    Gauges,
    Prune,
    Init,
    Rebase,
    Status,
    Now,
    Live,
    Task,
}

impl Step {
    const ALL: [Self; 14] = [
        Self::Acquire,
        Self::Renew,
        Self::Release,
        Self::Egress,
        Self::Sync,
        Self::Report,
        Self::Gauges,
        Self::Prune,
        Self::Init,
        Self::Rebase,
        Self::Status,
        Self::Now,
        Self::Live,
        Self::Task,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Acquire => "acquire",
            Self::Renew => "renew",
            Self::Release => "release",
            Self::Egress => "egress",
            Self::Sync => "sync",
            Self::Report => "report",
            Self::Gauges => "gauges",
            Self::Prune => "prune",
            Self::Init => "init",
            Self::Rebase => "rebase",
            Self::Status => "status",
            Self::Now => "now",
            Self::Live => "live",
            Self::Task => "task",
        }
    }

    fn body(self) -> &'static str {
        match self {
            Self::Acquire => include_str!("acquire.lua"),
            Self::Renew => include_str!("renew.lua"),
            Self::Release => include_str!("release.lua"),
            Self::Egress => include_str!("egress.lua"),
            Self::Sync => include_str!("sync.lua"),
            Self::Report => include_str!("report.lua"),
            Self::Gauges => include_str!("gauges.lua"),
            Self::Prune => include_str!("prune.lua"),
            Self::Init => include_str!("init.lua"),
            Self::Rebase => include_str!("rebase.lua"),
            Self::Status => include_str!("status.lua"),
            Self::Now => include_str!("now.lua"),
            Self::Live => include_str!("live.lua"),
            Self::Task => include_str!("task.lua"),
        }
    }
}

/// The steps as one Redis Functions library (`FUNCTION LOAD`), loaded on the first call that
/// finds it missing (a new server, or one restarted without its data). The shared helpers are
/// set up once, when it loads, rather than on every call as an `EVAL` script's are, which cost
/// the server ~9 µs a call (docs/decisions.md). Its name carries a hash of its code, so brokers
/// of different versions on one server each call their own.
struct Library {
    code: String,
    /// `exitvoice_<hash>`: the library's name, and its functions' names' start.
    name: String,
}

impl Library {
    fn new() -> Self {
        let common = include_str!("common.lua");
        let mut source = common.to_owned();
        for step in Step::ALL {
            source.push_str(step.body());
        }
        let hash = redis::Script::new(&source).get_hash().to_owned();
        let name = format!("exitvoice_{}", &hash[..16]);
        let mut code = format!("#!lua name={name}\n{common}\n");
        for step in Step::ALL {
            code.push_str(&format!(
                "redis.register_function('{name}_{}', function(KEYS, ARGV)\nbind(KEYS[1])\n{}\nend)\n",
                step.name(),
                step.body()
            ));
        }
        Self { code, name }
    }

    fn function(&self, step: Step) -> String {
        format!("{}_{}", self.name, step.name())
    }
}

/// Whether Redis answered that a function is not loaded.
fn not_loaded(error: &redis::RedisError) -> bool {
    error.to_string().contains("Function not found")
}

/// Leases one liveness call asks about at most: one script runs for a bounded time.
const LIVE_CHUNK: usize = 500;

/// The broker's state in one Redis (or one slot of a Redis Cluster).
#[derive(Clone)]
pub struct RedisLeases {
    connection: Link,
    /// `<prefix>{<pool>}:`, every key's start.
    keys: Arc<str>,
    library: Arc<Library>,
    recovery: Arc<Recovery>,
}

impl RedisLeases {
    /// Connects to `url` (for TLS, `ca_pem` replaces the system's roots when given) and keeps
    /// the state of `pool` under keys starting `exitvoice:{pool}:`, its epochs in `epochs`.
    ///
    /// # Errors
    /// A server that cannot be reached or refuses the credentials. The message never quotes
    /// the URL.
    pub async fn connect(
        url: &RedisUrl,
        ca_pem: Option<Vec<u8>>,
        pool: &str,
        epochs: Epochs,
    ) -> Result<Self, StoreFailure> {
        let connection = Link::connect(url, ca_pem).await?;
        Ok(Self {
            connection,
            keys: format!("exitvoice:{{{pool}}}:").into(),
            library: Arc::new(Library::new()),
            recovery: Arc::new(Recovery::new(epochs, pool)),
        })
    }

    /// Runs `step`; when the pool's state is gone or may be older than it was, starts a new
    /// epoch and runs it again.
    async fn run<T: FromRedisValue>(&self, step: Step, args: &[String]) -> Result<T, StoreFailure> {
        match self.run_once(step, args).await {
            Err(error) if lost(&error) => {
                self.recover().await?;
                Ok(self.run_once(step, args).await?)
            }
            answer => Ok(answer?),
        }
    }

    /// Runs `step` once (`FCALL`), loading the library first when the server lacks it.
    async fn run_once<T: FromRedisValue>(
        &self,
        step: Step,
        args: &[String],
    ) -> redis::RedisResult<T> {
        let mut call = redis::cmd("FCALL");
        call.arg(self.library.function(step))
            .arg(1)
            .arg(&*self.keys);
        for arg in args {
            call.arg(arg);
        }
        let mut connection = self.connection.clone();
        match call.query_async(&mut connection).await {
            Err(error) if not_loaded(&error) => {
                redis::cmd("FUNCTION")
                    .arg("LOAD")
                    .arg("REPLACE")
                    .arg(&self.library.code)
                    .query_async::<()>(&mut connection)
                    .await?;
                call.query_async(&mut connection).await
            }
            answer => answer,
        }
    }

    /// Starts the pool's next epoch, unless another instance has (see [`epoch`]).
    async fn recover(&self) -> Result<(), StoreFailure> {
        let recovery = &self.recovery;
        let _turn = recovery.turn.lock().await;
        let waited = std::time::Instant::now();
        loop {
            let lock = recovery.tables.broker_epoch_lock(&recovery.pool).await?;
            let (state, seen): (String, Option<i64>) = self.run_once(Step::Status, &[]).await?;
            let state = match state.as_str() {
                "current" => {
                    lock.release().await?;
                    return Ok(());
                }
                "forgotten" => Lost::Forgotten,
                "older" => Lost::Older,
                _ => return Err(shape("the pool's status")),
            };
            // A pool never written before granted nothing: nothing to wait for.
            let granted = state == Lost::Older || lock.current().is_some();
            // An epoch taken moments ago is being written into Redis by the instance that took
            // it: wait for that rather than take another (and hold grants for nothing).
            let starting = lock
                .age_ms()
                .is_some_and(|age| u128::try_from(age).unwrap_or(0) < epoch::STARTING.as_millis())
                && waited.elapsed() < epoch::STARTING;
            if starting {
                lock.release().await?;
                tokio::time::sleep(epoch::STARTING_POLL).await;
                continue;
            }
            // Past Redis's own epoch too, should the SQL database have gone back.
            let epoch = lock.advance_past(seen).await?;
            let hold_ms = if granted { recovery.hold_ms() } else { 0 };
            let args = [epoch.to_string(), hold_ms.to_string()];
            let step = match state {
                Lost::Forgotten => Step::Init,
                Lost::Older => Step::Rebase,
            };
            let started: i64 = match self.run_once(step, &args).await {
                Ok(started) => started,
                Err(error) => {
                    // Whether Redis heard it is unknown: the epoch is spent, and nobody waits
                    // for it (the next instance takes another at once).
                    let tables = &recovery.tables;
                    let _ = tables.broker_epoch_spent(&recovery.pool, epoch).await;
                    return Err(error.into());
                }
            };
            if started == 1 && granted {
                tracing::warn!(
                    epoch,
                    hold_ms,
                    "{}: a new epoch, no grants until every lease the lost writes may have \
                     granted has run out",
                    state.what()
                );
                if state == Lost::Forgotten {
                    self.write_units(&recovery.known(), true).await?;
                }
            }
            return Ok(());
        }
    }

    /// Writes `units` (see [`LeaseStore::sync_units`]) without starting a new epoch.
    async fn write_units(&self, units: &[UnitSpec], whole: bool) -> redis::RedisResult<u64> {
        // Each write stamps its units; after a whole pool, the sweep takes every unit without
        // this stamp out of service.
        let stamp = format!("{:016x}", rand::random::<u64>());
        let mut revoked = 0;
        for chunk in units.chunks(SYNC_CHUNK) {
            let mut args = vec![stamp.clone()];
            for spec in chunk {
                args.extend([
                    spec.unit.clone(),
                    spec.exit_name.clone(),
                    spec.rank().to_string(),
                    spec.capacity.to_string(),
                    u8::from(spec.gateway).to_string(),
                    spec.life_ms.to_string(),
                    spec.country.clone().unwrap_or_default(),
                    spec.gap_ms.map(|gap| gap.to_string()).unwrap_or_default(),
                ]);
            }
            revoked += self.run_once::<u64>(Step::Sync, &args).await?;
        }
        if whole {
            let args = [stamp, "sweep".to_owned()];
            revoked += self.run_once::<u64>(Step::Sync, &args).await?;
        }
        Ok(revoked)
    }
}

/// A script's answer that is not what the script returns: the store is not ours.
fn shape(what: &str) -> StoreFailure {
    StoreFailure::message(format!("Redis answered {what} in an unexpected shape"))
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}

fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        other => text(other)?.parse().ok(),
    }
}

fn refusal(reason: &str) -> Option<Refusal> {
    Some(match reason {
        "unknown" => Refusal::Unknown,
        "stale_fence" => Refusal::StaleFence,
        "expired" => Refusal::Expired,
        "released" => Refusal::Released,
        "revoked" => Refusal::Revoked,
        "life_cap" => Refusal::LifeCap,
        _ => return None,
    })
}

/// `{'refused', reason}`, or the answer's fields after `'ok'`.
fn judged(answer: Vec<Value>, what: &str) -> Result<Result<Vec<Value>, Refusal>, StoreFailure> {
    match answer.first().and_then(text).as_deref() {
        Some("ok") => Ok(Ok(answer.into_iter().skip(1).collect())),
        Some("refused") => answer
            .get(1)
            .and_then(text)
            .as_deref()
            .and_then(refusal)
            .map(Err)
            .ok_or_else(|| shape(what)),
        _ => Err(shape(what)),
    }
}

fn array(value: &Value) -> &[Value] {
    match value {
        Value::Array(items) => items,
        _ => &[],
    }
}

fn effect_args(effect: Effect) -> [String; 4] {
    let backoff = |kind: &str, ttl: i64, jitter: f64, streak: u32| {
        [
            kind.to_owned(),
            ttl.to_string(),
            jitter.to_string(),
            streak.to_string(),
        ]
    };
    match effect {
        Effect::Success => backoff("success", 0, 1.0, 0),
        Effect::Neutral => backoff("neutral", 0, 1.0, 0),
        Effect::Retire => backoff("retire", 0, 1.0, 0),
        Effect::Blocked(b) => backoff("blocked", b.ttl_ms, b.jitter, 0),
        Effect::Failed { backoff: b, streak } => backoff("failed", b.ttl_ms, b.jitter, streak),
    }
}

impl LeaseStore for RedisLeases {
    async fn now_ms(&self) -> Result<i64, StoreFailure> {
        Ok(self.run_once(Step::Now, &[]).await?)
    }

    async fn sync_units(&self, units: &[UnitSpec], whole: bool) -> Result<u64, StoreFailure> {
        let revoked = match self.write_units(units, whole).await {
            Err(error) if lost(&error) => {
                self.recover().await?;
                self.write_units(units, whole).await?
            }
            written => written?,
        };
        self.recovery.note(units, whole);
        Ok(revoked)
    }

    async fn acquire(&self, request: &Acquire<'_>) -> Result<Option<Granted>, StoreFailure> {
        let cap = request
            .stateless_per_origin
            .filter(|_| !request.class.exclusive())
            .unwrap_or(0);
        let args = [
            request.lease_id.to_owned(),
            request.class.as_str().to_owned(),
            request.holder.to_owned(),
            request.task.unwrap_or("").to_owned(),
            request.origin.unwrap_or("").to_owned(),
            request.ttl_ms.to_string(),
            request.life_ms.to_string(),
            request.session_nonce.to_owned(),
            cap.to_string(),
            request.fences.max(1).to_string(),
            request.country.unwrap_or("").to_owned(),
            request
                .max_gap_ms
                .map(|gap| gap.to_string())
                .unwrap_or_default(),
        ];
        let answer: Option<Vec<Value>> = self.run(Step::Acquire, &args).await?;
        let Some(fields) = answer else {
            return Ok(None);
        };
        let granted = (|| {
            Some(Granted {
                lease_id: text(fields.first()?)?,
                unit: text(fields.get(1)?)?,
                exit_name: text(fields.get(2)?)?,
                fence: int(fields.get(3)?)?,
                expires_ms: int(fields.get(4)?)?,
                life_ends_ms: int(fields.get(5)?)?,
                session: text(fields.get(6)?),
                now_ms: int(fields.get(7)?)?,
                sticky: int(fields.get(8)?)? == 1,
            })
        })();
        granted.map(Some).ok_or_else(|| shape("an acquire"))
    }

    async fn renew(
        &self,
        lease_id: &str,
        fence: i64,
        ttl_ms: i64,
    ) -> Result<Result<i64, Refusal>, StoreFailure> {
        let args = [lease_id.to_owned(), fence.to_string(), ttl_ms.to_string()];
        let answer: Vec<Value> = self.run(Step::Renew, &args).await?;
        Ok(match judged(answer, "a renewal")? {
            Ok(fields) => Ok(fields
                .first()
                .and_then(int)
                .ok_or_else(|| shape("a renewal"))?),
            Err(refusal) => Err(refusal),
        })
    }

    async fn release(
        &self,
        lease_id: &str,
        fence: i64,
        outcome: &str,
        latency_ms: Option<i64>,
        effect: Effect,
    ) -> Result<Result<Released, Refusal>, StoreFailure> {
        let mut args = vec![
            lease_id.to_owned(),
            fence.to_string(),
            outcome.to_owned(),
            latency_ms.map(|ms| ms.to_string()).unwrap_or_default(),
        ];
        args.extend(effect_args(effect));
        let answer: Vec<Value> = self.run(Step::Release, &args).await?;
        let fields = match judged(answer, "a release")? {
            Ok(fields) => fields,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let released = (|| {
            Some(Released {
                unit: text(fields.first()?)?,
                exit_name: text(fields.get(1)?)?,
                banned_until_ms: int(fields.get(2)?),
                recovered_bans: u64::try_from(int(fields.get(3)?)?).ok()?,
                retired_session: text(fields.get(4)?),
                now_ms: int(fields.get(5)?)?,
            })
        })();
        released.map(Ok).ok_or_else(|| shape("a release"))
    }

    async fn record_egress(
        &self,
        lease_id: &str,
        ip: &str,
        country: Option<&str>,
    ) -> Result<EgressRecord, StoreFailure> {
        let args = [
            lease_id.to_owned(),
            ip.to_owned(),
            country.unwrap_or("").to_owned(),
        ];
        let answer: Vec<Value> = self.run(Step::Egress, &args).await?;
        Ok(EgressRecord {
            previous: answer.first().and_then(text),
            previous_country: answer.get(2).and_then(text).filter(|c| !c.is_empty()),
            shared: answer
                .get(1)
                .and_then(int)
                .ok_or_else(|| shape("an egress"))?
                == 1,
        })
    }

    async fn exit_reports(
        &self,
        since_ms: i64,
        most: i64,
    ) -> Result<Vec<ExitReport>, StoreFailure> {
        let args = [since_ms.to_string(), most.max(0).to_string()];
        let answer: Vec<Value> = self.run(Step::Report, &args).await?;
        let [_, exits, live, bans, ended] = answer.as_slice() else {
            return Err(shape("a report"));
        };
        let mut reports: Vec<ExitReport> = array(exits)
            .chunks(2)
            .filter_map(|pair| {
                Some(ExitReport {
                    exit_name: text(pair.first()?)?,
                    served: int(pair.get(1)?)?,
                    ..ExitReport::default()
                })
            })
            .collect();
        reports.sort_by(|a, b| a.exit_name.cmp(&b.exit_name));
        let index: std::collections::HashMap<String, usize> = reports
            .iter()
            .enumerate()
            .map(|(i, report)| (report.exit_name.clone(), i))
            .collect();
        let report_of = |exit: Option<String>| exit.and_then(|exit| index.get(&exit).copied());
        // Live leases in the order they were granted, as the SQL stores list them.
        let mut granted: Vec<(i64, usize, LiveLease)> = array(live)
            .chunks(6)
            .filter_map(|lease| {
                let at = report_of(lease.first().and_then(text))?;
                let live = (
                    text(lease.get(1)?)?,
                    text(lease.get(2)?)?,
                    text(lease.get(3)?)?,
                    int(lease.get(4)?)?,
                );
                Some((int(lease.get(5)?)?, at, live))
            })
            .collect();
        granted.sort_by_key(|(at, _, _)| *at);
        for (_, at, lease) in granted {
            if let Some(report) = reports.get_mut(at) {
                report.live.push(lease);
            }
        }
        for ban in array(bans).chunks(3) {
            let at = report_of(ban.first().and_then(text));
            let pair = (|| Some((text(ban.get(1)?)?, int(ban.get(2)?)?)))();
            if let (Some(report), Some(pair)) = (at.and_then(|at| reports.get_mut(at)), pair) {
                report.bans.push(pair);
            }
        }
        for lease in array(ended).chunks(3) {
            let at = report_of(lease.first().and_then(text));
            if let Some(report) = at.and_then(|at| reports.get_mut(at)) {
                report.outcomes.extend(lease.get(1).and_then(text));
                report.latencies_ms.extend(lease.get(2).and_then(int));
            }
        }
        Ok(reports)
    }

    async fn gauges(&self) -> Result<Gauges, StoreFailure> {
        let answer: Vec<Value> = self.run(Step::Gauges, &[]).await?;
        let [live, bans, collisions] = answer.as_slice() else {
            return Err(shape("the gauges"));
        };
        Ok(Gauges {
            live: array(live)
                .chunks(2)
                .filter_map(|pair| Some((text(pair.first()?)?, int(pair.get(1)?)?)))
                .collect(),
            bans: int(bans).ok_or_else(|| shape("the gauges"))?,
            collisions: int(collisions).ok_or_else(|| shape("the gauges"))?,
        })
    }

    async fn durability(&self) -> Durability {
        let mut settings = HashMap::new();
        let mut connection = self.connection.clone();
        for name in ["appendonly", "appendfsync", "save", "min-replicas-to-write"] {
            // A managed Redis may refuse `CONFIG`: that setting stays unknown.
            let answer: redis::RedisResult<HashMap<String, String>> = redis::cmd("CONFIG")
                .arg("GET")
                .arg(name)
                .query_async(&mut connection)
                .await;
            settings.extend(answer.unwrap_or_default());
        }
        let info: redis::RedisResult<String> = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut connection)
            .await;
        for line in info.unwrap_or_default().lines() {
            if let Some((name @ ("role" | "connected_slaves"), value)) = line.split_once(':') {
                settings.insert(name.to_owned(), value.trim().to_owned());
            }
        }
        durability::redis(&settings)
    }

    async fn prune(&self, keep_ms: i64, batch: i64) -> Result<u64, StoreFailure> {
        let args = [keep_ms.to_string(), batch.max(0).to_string()];
        self.run(Step::Prune, &args).await
    }

    async fn live(&self, leases: &[(String, i64)]) -> Result<Vec<bool>, StoreFailure> {
        let mut live = Vec::with_capacity(leases.len());
        for chunk in leases.chunks(LIVE_CHUNK) {
            let args: Vec<String> = chunk
                .iter()
                .flat_map(|(id, fence)| [id.clone(), fence.to_string()])
                .collect();
            let answer: Vec<i64> = self.run(Step::Live, &args).await?;
            if answer.len() != chunk.len() {
                return Err(shape("a liveness check"));
            }
            live.extend(answer.into_iter().map(|one| one == 1));
        }
        Ok(live)
    }

    async fn task_lease(&self, task: &str) -> Result<Option<(String, i64)>, StoreFailure> {
        let answer: Vec<Value> = self.run(Step::Task, &[task.to_owned()]).await?;
        match answer.as_slice() {
            [] => Ok(None),
            [id, fence] => Ok(Some((
                text(id).ok_or_else(|| shape("a task's lease"))?,
                int(fence).ok_or_else(|| shape("a task's lease"))?,
            ))),
            _ => Err(shape("a task's lease")),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use exitvoice_lease::LeaseClass;

    use super::*;
    use crate::lease_store::suite::{ask, unit};

    /// An acquire looks for expired leases only once `reap_at` has come (common.lua): a
    /// renewal that shortens a lease brings it forward, so the unit is free once the shorter
    /// lease has run out, not when the first would have.
    #[tokio::test]
    async fn a_shortened_lease_frees_its_unit_when_it_runs_out() {
        let server = exitvoice_redistest::server();
        let dir = tempfile::tempdir().unwrap();
        let epochs = Epochs {
            store: exitvoice_store::Store::open(&dir.path().join("epochs.db"))
                .await
                .unwrap(),
            hold: Duration::from_secs(3600),
        };
        let url = server.url().parse().unwrap();
        let pool = exitvoice_redistest::fresh_prefix("shortened");
        let store = RedisLeases::connect(&url, None, &pool, epochs)
            .await
            .unwrap();
        store
            .sync_units(&[unit("a", Some(LeaseClass::Identity))], true)
            .await
            .unwrap();
        let first = store
            .acquire(&ask("l1", LeaseClass::Identity, None))
            .await
            .unwrap()
            .unwrap();
        assert!(
            store
                .acquire(&ask("l2", LeaseClass::Identity, None))
                .await
                .unwrap()
                .is_none(),
            "a is held"
        );
        let expires = store.renew("l1", first.fence, 200).await.unwrap().unwrap();
        assert!(
            expires < first.expires_ms,
            "the renewal shortened the lease"
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
        let next = store
            .acquire(&ask("l3", LeaseClass::Identity, None))
            .await
            .unwrap();
        assert_eq!(next.map(|lease| lease.unit).as_deref(), Some("a"));
    }
}
