//! The round-trip gap: how far a client is from the address that reached the echo.
//!
//! The echo measures two round trips on every connection. The transport's (TCP) ends at the
//! host that opened the TCP connection: for a client behind a proxy exit, the exit. Every round
//! trip above TCP (the TLS handshake's last flight answered by the client's `Finished`, an
//! HTTP/2 PING answered by the client's stack) goes through the exit to the client and back. The
//! difference, the **gap**, is the hidden leg between the client and its exit; a direct client
//! shows only its own processing time there.
//!
//! All values are integer microseconds; a measure that could not be had is absent, never zero.
//! [`RoundTrips::judge`] turns the measures into a [`GapVerdict`] with its reason, by the
//! thresholds below (docs/latency.md says how they were chosen).

use serde::{Deserialize, Serialize};

/// Gap from which a connection is `possible`ly proxied, microseconds.
pub const POSSIBLE_GAP_US: u32 = 10_000;
/// Share of the application round trip the gap must also reach for `possible`, percent.
pub const POSSIBLE_RATIO_PCT: u32 = 25;
/// Gap from which a connection is `likely` proxied, microseconds.
pub const LIKELY_GAP_US: u32 = 20_000;
/// Share of the application round trip the gap must also reach for `likely`, percent.
pub const LIKELY_RATIO_PCT: u32 = 50;

/// What the gap says of a connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GapVerdict {
    /// The application round trip is the transport's plus processing time: no hidden leg.
    Direct,
    /// A gap at or over the `possible` thresholds.
    Possible,
    /// A gap at or over the `likely` thresholds.
    Likely,
    /// A round trip is missing; the reason says which and why.
    #[default]
    Unknown,
}

impl GapVerdict {
    /// The verdict as written in JSON and CSV.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Possible => "possible",
            Self::Likely => "likely",
            Self::Unknown => "unknown",
        }
    }

    /// The verdict of a gap of `gap_us` over an application round trip of `app_us`.
    pub fn of_gap(gap_us: u32, app_us: u32) -> Self {
        let ratio = ratio_pct(gap_us, app_us);
        if gap_us >= LIKELY_GAP_US && ratio >= LIKELY_RATIO_PCT {
            Self::Likely
        } else if gap_us >= POSSIBLE_GAP_US && ratio >= POSSIBLE_RATIO_PCT {
            Self::Possible
        } else {
            Self::Direct
        }
    }
}

/// `gap_us` as a share of `app_us`, whole percent (0 when `app_us` is 0).
pub fn ratio_pct(gap_us: u32, app_us: u32) -> u32 {
    if app_us == 0 {
        return 0;
    }
    u32::try_from(u64::from(gap_us) * 100 / u64::from(app_us)).unwrap_or(u32::MAX)
}

/// The kernel's round-trip estimates of a TCP connection (`TCP_INFO`, `tcp(7)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpRoundTrip {
    /// Smoothed round trip (`tcpi_rtt`).
    pub rtt_us: u32,
    /// Smallest round trip sampled (`tcpi_min_rtt`); absent before the first sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rtt_us: Option<u32>,
    /// Round-trip variation (`tcpi_rttvar`); absent where there is a single sample (a capture's
    /// handshake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rttvar_us: Option<u32>,
}

impl TcpRoundTrip {
    /// The best estimate of the path's round trip: the smallest sample, else the smoothed one.
    pub fn path_us(&self) -> u32 {
        self.min_rtt_us.unwrap_or(self.rtt_us)
    }
}

/// What the echo measured of one connection's round trips, before judging.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Measures {
    /// `TCP_INFO` after the handshake.
    pub tcp: Option<TcpRoundTrip>,
    /// `TCP_INFO` when the connection ended (known only once it has).
    pub tcp_at_close: Option<TcpRoundTrip>,
    /// Why there is no transport round trip, when there is none.
    pub tcp_absent: Option<&'static str>,
    /// From the server's last handshake flight to the client's answer to it.
    pub tls_us: Option<u32>,
    /// Each answered HTTP/2 PING, in order.
    pub pings_us: Vec<u32>,
    /// A PING the echo sent had no answer yet when this was judged.
    pub ping_unanswered: bool,
    /// The QUIC stack's round-trip estimate (end to end: no transport below it).
    pub quic_us: Option<u32>,
}

/// The `latency` object of an echo and of a stored connection.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundTrips {
    /// Smoothed TCP round trip after the handshake, to the host that opened the connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_rtt_us: Option<u32>,
    /// Smallest TCP round trip sampled by then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_min_rtt_us: Option<u32>,
    /// TCP round-trip variation by then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_rttvar_us: Option<u32>,
    /// The kernel's estimates when the connection ended (stored rows written at its end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_at_close: Option<TcpRoundTrip>,
    /// From the server's last handshake flight sent to the client's answer received (TLS 1.3:
    /// its `Finished`; TLS 1.2: its key exchange and `Finished`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_rtt_us: Option<u32>,
    /// The fastest answered HTTP/2 PING.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2_ping_rtt_us: Option<u32>,
    /// Every answered HTTP/2 PING, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub h2_ping_samples_us: Vec<u32>,
    /// The QUIC stack's round-trip estimate of an HTTP/3 connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic_rtt_us: Option<u32>,
    /// The application round trip the gap is taken from: the smallest of TLS and PING.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_rtt_us: Option<u32>,
    /// Application round trip minus the transport's smallest (0 when the first is smaller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap_us: Option<u32>,
    /// The gap as a share of the application round trip, whole percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap_ratio: Option<u32>,
    /// What the gap says.
    pub verdict: GapVerdict,
    /// Why, in words, with the numbers.
    pub reason: String,
}

impl RoundTrips {
    /// The measures, judged.
    pub fn judge(measures: &Measures) -> Self {
        let pings = &measures.pings_us;
        let ping_min = pings.iter().copied().min();
        let mut out = Self {
            tcp_rtt_us: measures.tcp.map(|t| t.rtt_us),
            tcp_min_rtt_us: measures.tcp.and_then(|t| t.min_rtt_us),
            tcp_rttvar_us: measures.tcp.and_then(|t| t.rttvar_us),
            tcp_at_close: measures.tcp_at_close,
            tls_rtt_us: measures.tls_us,
            h2_ping_rtt_us: ping_min,
            h2_ping_samples_us: pings.clone(),
            quic_rtt_us: measures.quic_us,
            ..Self::default()
        };
        let app = match (measures.tls_us, ping_min) {
            (Some(tls), Some(ping)) => Some((
                tls.min(ping),
                if ping <= tls { "h2 PING" } else { "TLS flight" },
            )),
            (Some(tls), None) => Some((tls, "TLS flight")),
            (None, Some(ping)) => Some((ping, "h2 PING")),
            (None, None) => None,
        };
        out.app_rtt_us = app.map(|(us, _)| us);
        let tcp = measures.tcp.or(measures.tcp_at_close);
        let Some(tcp) = tcp else {
            out.reason = format!(
                "no transport round trip: {}",
                measures.tcp_absent.unwrap_or("not measured")
            );
            return out;
        };
        let Some((app_us, source)) = app else {
            out.reason = "no application round trip: the TLS handshake was not timed and no \
                          HTTP/2 PING was answered"
                .to_owned();
            return out;
        };
        let tcp_us = tcp.path_us();
        let gap = app_us.saturating_sub(tcp_us);
        let ratio = ratio_pct(gap, app_us);
        out.gap_us = Some(gap);
        out.gap_ratio = Some(ratio);
        if measures.ping_unanswered && ping_min.is_none() {
            // The TLS flight alone also holds the client's certificate checks: without a PING
            // answer to bound it, a large TLS gap may be a slow client, not a hidden leg.
            out.reason = format!(
                "the client did not answer the echo's HTTP/2 PING (RFC 9113 section 6.7 \
                 obliges it to); the TLS flight alone ({app_us} us) cannot tell a hidden leg \
                 from the client's own processing"
            );
            return out;
        }
        out.verdict = GapVerdict::of_gap(gap, app_us);
        out.reason = format!(
            "application round trip {app_us} us ({source}) against the transport's {tcp_us} us: \
             gap {gap} us, {ratio} % of it"
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(min: u32) -> Option<TcpRoundTrip> {
        Some(TcpRoundTrip {
            rtt_us: min + 20,
            min_rtt_us: Some(min),
            rttvar_us: Some(10),
        })
    }

    #[test]
    fn thresholds_split_direct_possible_and_likely() {
        let judged = |tls, pings: Vec<u32>| {
            RoundTrips::judge(&Measures {
                tcp: tcp(100),
                tls_us: Some(tls),
                pings_us: pings,
                ..Measures::default()
            })
        };
        let direct = judged(2_100, vec![300, 250]);
        assert_eq!(direct.verdict, GapVerdict::Direct);
        assert_eq!(direct.app_rtt_us, Some(250));
        assert_eq!(direct.gap_us, Some(150));
        assert_eq!(direct.h2_ping_rtt_us, Some(250));
        let possible = judged(15_100, vec![]);
        assert_eq!(
            (possible.verdict, possible.gap_us),
            (GapVerdict::Possible, Some(15_000))
        );
        let likely = judged(80_100, vec![80_500]);
        assert_eq!(likely.verdict, GapVerdict::Likely);
        assert_eq!(likely.gap_ratio, Some(99));
        // A long transport path: a 12 ms gap over 200 ms is processing, not a hidden leg.
        let far = RoundTrips::judge(&Measures {
            tcp: tcp(200_000),
            tls_us: Some(212_000),
            ..Measures::default()
        });
        assert_eq!(far.verdict, GapVerdict::Direct);
    }

    #[test]
    fn missing_measures_are_absent_and_unknown_with_a_reason() {
        let none = RoundTrips::judge(&Measures {
            tcp_absent: Some("relayed by a load balancer"),
            tls_us: Some(900),
            ..Measures::default()
        });
        assert_eq!(none.verdict, GapVerdict::Unknown);
        assert!(none.reason.contains("load balancer"), "{}", none.reason);
        let json = serde_json::to_value(&none).expect("json");
        assert!(json.get("tcp_rtt_us").is_none() && json.get("gap_us").is_none());
        assert_eq!(json["tls_rtt_us"], 900);

        let silent = RoundTrips::judge(&Measures {
            tcp: tcp(50),
            tls_us: Some(40_000),
            ping_unanswered: true,
            ..Measures::default()
        });
        assert_eq!(silent.verdict, GapVerdict::Unknown);
        assert!(silent.reason.contains("PING"), "{}", silent.reason);
        assert!(silent.h2_ping_rtt_us.is_none());
    }
}
