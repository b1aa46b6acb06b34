//! What answers each request: the API, above capture. The server hands it to `Shared` once, as
//! it does the [`super::RecordSink`]; capture knows nothing of the routes behind it.

use std::future::Ready;

use futures_util::future::{BoxFuture, Either};
use hyper::body::Incoming;

use super::arrival::Arrival;

/// An answer: ready when the request is answered (a request with no body to read, answered
/// before it returns: nothing to box), or a future for one that still has to be read.
pub(crate) type Answer =
    Either<Ready<axum::response::Response>, BoxFuture<'static, axum::response::Response>>;

/// Answers the requests of every connection.
pub(crate) trait Responder: Send + Sync {
    /// The answer to `request`, which arrived as `arrival` says. It never fails: an error is an
    /// answer too.
    fn answer(&self, request: http::Request<Incoming>, arrival: Arrival) -> Answer;
}
