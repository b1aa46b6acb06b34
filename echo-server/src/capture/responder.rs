//! What answers each request: the API, above capture. The server hands it to `Shared` once, as
//! it does the [`super::RecordSink`]; capture knows nothing of the routes behind it.

use futures_util::future::BoxFuture;
use hyper::body::Incoming;

use super::arrival::Arrival;

/// Answers the requests of every connection.
pub(crate) trait Responder: Send + Sync {
    /// The answer to `request`, which arrived as `arrival` says. It never fails: an error is an
    /// answer too.
    fn answer(
        &self,
        request: http::Request<Incoming>,
        arrival: Arrival,
    ) -> BoxFuture<'static, axum::response::Response>;
}
