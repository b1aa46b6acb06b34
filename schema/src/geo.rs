//! Where an address is, as a local geo database says: its country and its network (ASN and
//! organisation), and which database said so.

use serde::{Deserialize, Serialize};

/// An address's country and network, each `None` when no database given knows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    /// ISO 3166-1 alpha-2 country code (`DE`).
    pub country: Option<String>,
    /// Autonomous system number of the network that announces the address.
    pub asn: Option<u32>,
    /// That network's organisation, as the database names it.
    pub organization: Option<String>,
}

/// One geo database as its own metadata names it: shown wherever geo is, since some free
/// databases require attribution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeoSource {
    /// The file's name (no directory).
    pub file: String,
    /// The metadata's `database_type` (`GeoLite2-Country`, `DBIP-ASN-Lite`, …).
    pub database_type: String,
    /// The metadata's build date, `YYYY-MM-DD` (UTC).
    pub build_date: String,
}

/// An echo's `geo`: the visitor's place and the databases it was read from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EchoGeo {
    /// The visitor's country and network.
    #[serde(flatten)]
    pub place: Place,
    /// Every database given, in the order given.
    pub sources: Vec<GeoSource>,
}
