//! exitvoice data contract: voice, observation, probe and label types and their JSON shapes, and
//! the coherence rules both sides judge by ([`coherence`]). The store that keeps them is the
//! `exitvoice-store` crate.
//!
//! Both the echo server and the auditor depend on this crate and on nothing of each other.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::print_stdout, clippy::dbg_macro))]

mod alpn;
pub mod coherence;
pub mod decimal;
pub mod echo;
pub mod geo;
pub mod label;
mod label_csv;
mod label_json;
pub mod observation;
pub mod probe;
pub mod raw_json;
pub mod round_trip;
pub mod tcp;
pub mod voice;

pub use coherence::{Coherence, Families, Family};
pub use echo::{
    Alpn, Echo, Http1Echo, Http2Connection, Http2Echo, Peer, PeerPolicy, RequestPosition, Spoken,
    TlsEcho, ECHO_SCHEMA_VERSION,
};
pub use geo::{EchoGeo, GeoSource, Place};
pub use label::{
    Baseline, Change, DriftState, Egress, ExitCoherence, ExitGeo, ExitLabel, ExitStack, Flags,
    H3Label, HistoryEntry, LabelsDoc, Latency, Pool, RoundTripLabel, Route, Transition,
    LABELS_SCHEMA_VERSION,
};
pub use label_csv::{labels_csv, LabelsCsvWriter, CSV_COLUMNS};
pub use label_json::LabelsJsonWriter;
pub use observation::{
    compose_echo, rfc3339_ms, CleanEcho, ConnectionFacts, ConnectionRecord, ConnectionRow,
    ConnectionSummary, Failure, FirstRequest, Layers, LayersFn, Observation, ObservationQuery,
    RequestRecord, StoredFacts, StoredObservation, OBSERVATION_SCHEMA_VERSION,
};
pub use probe::{
    H3Probe, LedgerVerdict, ProbeFailure, ProbeRecord, Sample, UdpPath, PROBE_SCHEMA_VERSION,
};
pub use raw_json::RawJson;
pub use round_trip::{GapVerdict, Measures, RoundTrips, TcpRoundTrip};
pub use tcp::{TcpAbsence, TcpAbsent, TcpEcho};
pub use voice::{Bucket, VoiceId};
