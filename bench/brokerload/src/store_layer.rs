//! `brokerload store`: the broker's store layer driven directly, without HTTP: each client
//! loops acquire (class `identity`) then release (`ok`) through [`LeaseStore`], on a pool of its
//! own with a share of it leased (and never released) first.

use std::time::Instant;

use exitvoice_broker::lease_store::LeaseStore;
use exitvoice_lease::{Acquire, Effect, LeaseClass, UnitSpec};

use crate::drive::{Cycler, Step};

/// One client of the store.
pub struct StoreClient<S> {
    store: S,
    client: usize,
    next: u64,
}

impl<S: LeaseStore> Cycler for StoreClient<S> {
    async fn cycle(&mut self) -> anyhow::Result<Step> {
        self.next += 1;
        let id = format!(
            "c{}-{}-{:08x}",
            self.client,
            self.next,
            rand::random::<u32>()
        );
        let asked = Instant::now();
        let granted = self.store.acquire(&request(&id, 60_000)).await?;
        let acquire = asked.elapsed();
        let Some(lease) = granted else {
            return Ok(Step {
                acquire,
                done: false,
                failed: true,
            });
        };
        let released = self
            .store
            .release(&lease.lease_id, lease.fence, "ok", None, Effect::Success)
            .await?;
        Ok(Step {
            acquire,
            done: released.is_ok(),
            failed: false,
        })
    }
}

fn request(id: &str, ttl_ms: i64) -> Acquire<'_> {
    Acquire {
        lease_id: id,
        class: LeaseClass::Identity,
        holder: "load",
        task: None,
        origin: None,
        ttl_ms,
        life_ms: 3_600_000,
        session_nonce: "s",
        stateless_per_origin: None,
        fences: 1,
        country: None,
        max_gap_ms: None,
    }
}

/// Writes a pool of `units` exits admitting `identity` into `store`, leases `held` of them for
/// an hour, and returns `clients` clients.
///
/// # Errors
/// The store failing, or fewer than `held` units free.
pub async fn prepare<S: LeaseStore>(
    store: S,
    units: usize,
    held: usize,
    clients: usize,
) -> anyhow::Result<Vec<StoreClient<S>>> {
    let specs: Vec<UnitSpec> = (0..units)
        .map(|n| UnitSpec {
            unit: format!("e-{n}"),
            exit_name: format!("e-{n}"),
            admits: Some(LeaseClass::Identity),
            capacity: 1,
            gateway: false,
            life_ms: 3_600_000,
            draining: false,
            country: None,
            gap_ms: None,
        })
        .collect();
    store.sync_units(&specs, true).await?;
    for n in 0..held {
        let id = format!("held-{n}");
        if store.acquire(&request(&id, 3_600_000)).await?.is_none() {
            anyhow::bail!("only {n} of {held} units could be held");
        }
    }
    Ok((0..clients)
        .map(|client| StoreClient {
            store: store.clone(),
            client,
            next: 0,
        })
        .collect())
}
