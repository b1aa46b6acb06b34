//! What the API's handlers share ([`ApiState`]), and the version of its JSON shapes.

use std::sync::Arc;

use exitvoice_geo::GeoIp;
use exitvoice_store::Store;
use time::OffsetDateTime;

use crate::capture::admission::Admission;
use crate::config::ApiToken;
use crate::ledger::Ledger;
use crate::metrics::Metrics;
use crate::writer::WriterHandle;

/// Version of the API's JSON shapes other than the echo itself (which carries its own).
pub const API_VERSION: u32 = 1;

/// What the handlers share, behind one `Arc`: axum clones the state for each extractor that
/// takes it, several times a request.
pub(crate) type ApiState = Arc<ApiShared>;

/// What [`ApiState`] points to.
#[derive(Debug)]
pub(crate) struct ApiShared {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) store: Store,
    pub(crate) writer: WriterHandle,
    pub(crate) api_token: Option<ApiToken>,
    /// The per-source buckets new connections take from; token queries take from them too.
    pub(crate) admission: Arc<Admission>,
    pub(crate) body_cap: usize,
    pub(crate) started: OffsetDateTime,
    /// The h3 downgrade ledger, fed by every echo request.
    pub(crate) ledger: Arc<Ledger>,
    /// Whether TCP answers carry `alt-svc` (QUIC on).
    pub(crate) alt_svc: bool,
    /// The `--geoip` databases, if any.
    pub(crate) geo: Option<Arc<GeoIp>>,
}
