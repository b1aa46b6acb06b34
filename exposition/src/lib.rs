//! Prometheus exposition shared by the echo server, the auditor and the broker: the OpenMetrics
//! content type, the writers their collectors use for series read at scrape time (nothing is
//! counted on a request's path for the exposition), `GET /metrics` over a registry, and the
//! listener that serves it on its own address ([`Listener`]), all on the `prometheus-client`
//! crate's text encoder. A scrape only reads: no series is cleared or refilled under it, so two
//! scrapes at once read the same figures. A registry that does not encode is our failure, and
//! answers `500`.
#![forbid(unsafe_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// The OpenMetrics text content type (OpenMetrics 1.0, section "Overall Structure").
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Writes one series without labels.
///
/// # Errors
/// Only if writing into the text fails.
pub fn single(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric: &impl EncodeMetric,
) -> Result<(), std::fmt::Error> {
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// Writes one family of `kind` with a single label, one series per `(value, metric)`.
///
/// # Errors
/// Only if writing into the text fails.
pub fn by_label<'a, M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    (name, help, kind): (&str, &str, MetricType),
    label: &str,
    series: impl IntoIterator<Item = (&'a str, M)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, kind)?;
    for (value, metric) in series {
        metric.encode(family.encode_family(&[(label, value)])?)?;
    }
    Ok(())
}

/// Writes one counter family with a single label, one series per `(value, count)`.
///
/// # Errors
/// Only if writing into the text fails.
pub fn counters_by<'a>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    counts: impl IntoIterator<Item = (&'a str, u64)>,
) -> Result<(), std::fmt::Error> {
    let series = counts
        .into_iter()
        .map(|(value, count)| (value, ConstCounter::new(count)));
    by_label(encoder, (name, help, MetricType::Counter), label, series)
}

/// A gauge from a count of any integer type (Prometheus values are signed 64-bit or float).
pub fn gauge(value: impl TryInto<i64>) -> ConstGauge<i64> {
    ConstGauge::new(value.try_into().unwrap_or(i64::MAX))
}

/// The OpenMetrics text of `registry`.
///
/// # Errors
/// Only if writing into the text fails.
pub fn text(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)?;
    Ok(text)
}

/// The OpenMetrics answer for a scrape of `registry` (`500` if it does not encode).
pub fn answer(registry: &Registry) -> Response {
    match text(registry) {
        Ok(body) => ([(CONTENT_TYPE, OPENMETRICS)], body).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// `GET /metrics` over `registry` (its collectors read their figures at each scrape).
pub fn router(registry: Registry) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(Arc::new(registry))
}

async fn scrape(State(registry): State<Arc<Registry>>) -> Response {
    answer(&registry)
}

/// A socket bound for `GET /metrics` (`--metrics-listen`), before it serves.
#[derive(Debug)]
pub struct Listener {
    socket: tokio::net::TcpListener,
    local: SocketAddr,
}

impl Listener {
    /// Binds `addr` (port 0 picks a free one).
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub async fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        let socket = tokio::net::TcpListener::bind(addr).await?;
        let local = socket.local_addr()?;
        Ok(Self { socket, local })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serves [`router`] over `registry` until `stop` completes.
    ///
    /// # Errors
    /// When the listener fails.
    pub async fn serve(
        self,
        registry: Registry,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        axum::serve(self.socket, router(registry))
            .with_graceful_shutdown(stop)
            .await
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::collector::Collector;

    use super::*;

    #[derive(Debug)]
    struct Two;

    impl Collector for Two {
        fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            single(&mut encoder, "open", "Open now.", &gauge(3_u64))?;
            counters_by(
                &mut encoder,
                "refused",
                "Refused, by reason.",
                "reason",
                [("rate", 2), ("ip", 5)],
            )?;
            by_label(
                &mut encoder,
                ("exits", "Exits, by state.", MetricType::Gauge),
                "state",
                [("stable", gauge(7_u32))],
            )
        }
    }

    /// A collector that cannot write its series (our failure, not the client's).
    #[derive(Debug)]
    struct Broken;

    impl Collector for Broken {
        fn encode(&self, _: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            Err(std::fmt::Error)
        }
    }

    #[test]
    fn a_registry_that_does_not_encode_answers_500() {
        let mut registry = Registry::with_prefix("t");
        registry.register_collector(Box::new(Broken));
        assert_eq!(
            answer(&registry).status(),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        let mut registry = Registry::with_prefix("t");
        registry.register_collector(Box::new(Two));
        let ok = answer(&registry);
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(ok.headers()[CONTENT_TYPE], OPENMETRICS);
    }

    #[test]
    fn series_are_written_as_openmetrics_text() {
        let mut registry = Registry::with_prefix("t");
        registry.register_collector(Box::new(Two));
        let text = text(&registry).unwrap();
        for line in [
            "# TYPE t_open gauge",
            "t_open 3",
            "# TYPE t_refused counter",
            "t_refused_total{reason=\"rate\"} 2",
            "t_refused_total{reason=\"ip\"} 5",
            "# TYPE t_exits gauge",
            "t_exits{state=\"stable\"} 7",
            "# EOF",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} not in\n{text}");
        }
    }
}
