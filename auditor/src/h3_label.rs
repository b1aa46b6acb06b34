//! An exit's `h3` label: does its UDP reach the echo, and is QUIC through it the client's own?
//! From the exit's newest QUIC probe (kept on the first sample's record of each run) against the
//! newest direct one, and for the Chromium persona the echo's ledger on its identity.

use exitvoice_schema::{H3Label, H3Probe, ProbeRecord, UdpPath};

/// The label of an exit whose records (oldest first) are `records`; `None` until a direct QUIC
/// probe exists (`baseline`).
pub fn label(records: &[ProbeRecord], baseline: Option<&H3Probe>) -> Option<H3Label> {
    let baseline = baseline?;
    let chromium_ledger = records.iter().rev().find_map(|r| r.ledger.clone());
    let newest = records
        .iter()
        .rev()
        .find_map(|r| r.h3.as_ref().map(|h3| (r, h3)));
    let Some((record, probe)) = newest else {
        return Some(H3Label {
            baseline_h3: baseline.udp_carried,
            via: None,
            udp_carried: None,
            reason: None,
            preserved: None,
            egress_ip: None,
            checked_at: None,
            chromium_ledger,
        });
    };
    let reason = match (&probe.error, probe.via) {
        (Some(error), _) => Some(format!("{}: {}", error.class, error.message)),
        (None, UdpPath::HttpConnect) => Some("HTTP CONNECT carries TCP only".to_owned()),
        (None, _) => None,
    };
    let preserved = (baseline.udp_carried && probe.udp_carried).then(|| {
        let voices = probe.voices();
        voices.iter().all(Option::is_some) && voices == baseline.voices()
    });
    Some(H3Label {
        baseline_h3: baseline.udp_carried,
        via: Some(probe.via),
        udp_carried: Some(probe.udp_carried),
        reason,
        preserved,
        egress_ip: probe.egress_ip.clone(),
        checked_at: Some(record.started_at.clone()),
        chromium_ledger,
    })
}

/// The `h3_gap` flag: the baseline speaks h3 where the exit's newest probe could not.
pub fn gap(label: Option<&H3Label>) -> bool {
    label.is_some_and(|l| l.baseline_h3 && l.udp_carried == Some(false))
}

#[cfg(test)]
mod tests {
    use exitvoice_schema::{ProbeFailure, PROBE_SCHEMA_VERSION};

    use super::*;

    fn carried(via: UdpPath, quic_voice: &str) -> H3Probe {
        H3Probe {
            udp_carried: true,
            tls_voice_id: Some("tlsv1_a".into()),
            quic_voice_id: Some(quic_voice.into()),
            http3_voice_id: Some("h3v1_c".into()),
            egress_ip: Some("127.0.0.2".into()),
            ..H3Probe::not_carried(via)
        }
    }

    fn record(at: &str, h3: Option<H3Probe>) -> ProbeRecord {
        ProbeRecord {
            schema_version: PROBE_SCHEMA_VERSION,
            run_id: "r".into(),
            exit: Some("e".into()),
            exit_url: None,
            session: None,
            token: "t".into(),
            persona: "rustls/chrome".into(),
            started_at: at.into(),
            latency_ms: None,
            error: None,
            sample: None,
            retried: Vec::new(),
            h3,
            ledger: None,
        }
    }

    #[test]
    fn no_baseline_no_label() {
        let records = [record("1", Some(carried(UdpPath::Socks5UdpAssociate, "q")))];
        assert_eq!(label(&records, None), None);
    }

    #[test]
    fn newest_probe_counts_and_voices_compare() {
        let baseline = carried(UdpPath::Direct, "q");
        let records = [
            record("1", Some(H3Probe::not_carried(UdpPath::Socks5UdpAssociate))),
            record("2", None),
            record("3", Some(carried(UdpPath::Socks5UdpAssociate, "q"))),
            record("4", None),
        ];
        let l = label(&records, Some(&baseline)).unwrap();
        assert_eq!(
            (l.udp_carried, l.preserved, l.checked_at.as_deref()),
            (Some(true), Some(true), Some("3"))
        );
        assert!(!gap(Some(&l)));
        let records = [record(
            "5",
            Some(carried(UdpPath::Socks5UdpAssociate, "other")),
        )];
        let l = label(&records, Some(&baseline)).unwrap();
        assert_eq!(l.preserved, Some(false));
    }

    #[test]
    fn http_connect_and_failures_are_gaps_only_when_the_baseline_speaks_h3() {
        let connect = [record(
            "1",
            Some(H3Probe::not_carried(UdpPath::HttpConnect)),
        )];
        let l = label(&connect, Some(&carried(UdpPath::Direct, "q"))).unwrap();
        assert_eq!(l.reason.as_deref(), Some("HTTP CONNECT carries TCP only"));
        assert_eq!(l.preserved, None);
        assert!(gap(Some(&l)));
        let l = label(&connect, Some(&H3Probe::not_carried(UdpPath::Direct))).unwrap();
        assert!(!l.baseline_h3 && !gap(Some(&l)));
        let refused = H3Probe {
            error: Some(ProbeFailure {
                class: "proxy_refused".into(),
                phase: None,
                message: "no UDP".into(),
            }),
            ..H3Probe::not_carried(UdpPath::Socks5UdpAssociate)
        };
        let l = label(
            &[record("1", Some(refused))],
            Some(&carried(UdpPath::Direct, "q")),
        )
        .unwrap();
        assert_eq!(l.reason.as_deref(), Some("proxy_refused: no UDP"));
        assert!(gap(Some(&l)));
        let none = label(&[record("1", None)], Some(&carried(UdpPath::Direct, "q"))).unwrap();
        assert_eq!((none.via, none.udp_carried), (None, None));
        assert!(!gap(Some(&none)));
    }
}
