//! A lease as a renewal or a release reads it back, and the judgement of its fence and expiry.

use exitvoice_lease::Refusal;

pub(super) struct LeaseRow {
    pub(super) unit: String,
    pub(super) exit_name: String,
    pub(super) origin: Option<String>,
    pub(super) session: Option<String>,
    pub(super) fence: i64,
    pub(super) expires_ms: i64,
    pub(super) life_ends_ms: i64,
    pub(super) state: String,
}

/// The lease if `fence` is its own and it is live at `now`, else why not.
pub(super) fn judge(lease: Option<LeaseRow>, fence: i64, now: i64) -> Result<LeaseRow, Refusal> {
    let lease = lease.ok_or(Refusal::Unknown)?;
    if lease.fence != fence {
        return Err(Refusal::StaleFence);
    }
    match lease.state.as_str() {
        "released" => Err(Refusal::Released),
        "revoked" => Err(Refusal::Revoked),
        _ if lease.expires_ms <= now => Err(Refusal::Expired),
        _ => Ok(lease),
    }
}
