//! `/exits/<name>`: one exit's label, its voice timeline and its recent probes.

use axum::extract::{Path, State};
use axum::response::Html;
use exitvoice_schema::{ExitLabel, LabelsDoc, ProbeRecord};
use maud::{html, Markup};

use super::exits::{bucket_badge, route_badge, set_flags};
use super::{latest, timeline, DashboardError, DashboardState};
use crate::layout::document;

/// Probes listed under the timeline, newest last.
const PROBES_SHOWN: u32 = 50;

pub(super) async fn page(
    State(state): State<DashboardState>,
    Path(name): Path<String>,
) -> Result<Html<String>, DashboardError> {
    let doc = latest(&state).await?;
    let label = doc
        .exits
        .iter()
        .find(|l| l.name == name)
        .ok_or(DashboardError::NoExit)?;
    let probes = match &doc.persona {
        Some(persona) => {
            state
                .store
                .recent_probes(Some(&label.name), persona, PROBES_SHOWN)
                .await?
        }
        None => Vec::new(),
    };
    Ok(Html(render(&doc, label, &probes)))
}

fn render(doc: &LabelsDoc, label: &ExitLabel, probes: &[ProbeRecord]) -> String {
    let lead = html! {
        code { (label.url) } " · labels of " (doc.generated_at) " · "
        a href="/exits" { "all exits" }
    };
    let body = html! {
        (verdict(label))
        section aria-labelledby="timeline-heading" {
            h2 #timeline-heading { "Voice timeline" }
            p.note {
                "One lane per voice, one mark per successful probe (colour: bucket A green, B blue, \
                 C orange, D red, none grey), a red rule per failed probe; oldest on the left."
            }
            div.scroll { (timeline::svg(&label.history)) }
            div.scroll { table #lanes {
                caption { "The lanes' voices" }
                thead { tr { th scope="col" { "Lane" } th scope="col" { "Voice" } th scope="col" { "Samples" } } }
                tbody {
                    @for (i, voice) in timeline::lanes(&label.history).iter().enumerate() {
                        tr {
                            td { (i + 1) }
                            td { code { (voice) } }
                            td { (label.history.iter().filter(|e| e.voice.as_deref() == Some(voice)).count()) }
                        }
                    }
                }
            } }
        }
        (probe_table(probes, doc.persona.is_some()))
    };
    document(&format!("Exit {}", label.name), lead, body).into_string()
}

/// Microseconds as milliseconds, one decimal.
fn gap_ms(us: u32) -> String {
    format!("{:.1} ms", f64::from(us) / 1000.0)
}

fn verdict(label: &ExitLabel) -> Markup {
    html! {
        section aria-labelledby="verdict" {
            h2 #verdict { "Verdict" }
            div.scroll { table #label {
                caption { "The exit's label" }
                tbody {
                    tr { th scope="row" { "State" } td #state { (label.state) } }
                    tr { th scope="row" { "Route" } td #route { (route_badge(label)) " " (label.route_reason) } }
                    tr { th scope="row" { "Bucket" } td { (bucket_badge(label)) } }
                    tr { th scope="row" { "Flags" } td { (set_flags(&label.flags).join(", ")) } }
                    tr { th scope="row" { "Samples" } td { (label.samples) } }
                    tr { th scope="row" { "Latency p50 / p95" }
                         td { (label.latency.p50_ms.map_or("—".to_owned(), |v| format!("{v} ms"))) " / "
                              (label.latency.p95_ms.map_or("—".to_owned(), |v| format!("{v} ms"))) } }
                    @if let Some(rt) = &label.latency.round_trip {
                        tr { th scope="row" { "Round-trip gap" }
                             td #gap { (rt.verdict.as_str()) ": " (gap_ms(rt.excess_gap_us)) " behind the exit ("
                                  "smallest " (gap_ms(rt.gap_min_us)) ", median " (gap_ms(rt.gap_p50_us))
                                  @if let Some(b) = rt.baseline_gap_us { ", baseline " (gap_ms(b)) }
                                  ")" @if rt.moved { "; moved since the run before ("
                                  (rt.previous_run_gap_min_us.map_or("—".to_owned(), gap_ms)) ")" } } }
                    }
                    tr { th scope="row" { "Egress" }
                         td { @for ip in &label.egress_ips { code { (ip) } " " } } }
                    tr { th scope="row" { "Last probe" } td { (label.last_probe_at.as_deref().unwrap_or("never")) } }
                    @if let Some(since) = &label.quarantined_since {
                        tr { th scope="row" { "Quarantined since" } td { (since) } }
                    }
                }
            } }
            h3 { "Route reasons" }
            ul { @for reason in &label.route_reasons { li { (reason) } } }
            @if !label.changes.is_empty() {
                div.scroll { table {
                    caption { "What differs from the direct baseline" }
                    thead { tr { th scope="col" { "Layer" } th scope="col" { "Field" }
                                 th scope="col" { "Baseline" } th scope="col" { "Through the exit" } } }
                    tbody { @for c in &label.changes {
                        tr { td { (c.layer) } td { (c.field) } td { code { (c.before) } } td { code { (c.after) } } }
                    } }
                } }
            }
        }
    }
}

fn probe_table(probes: &[ProbeRecord], has_persona: bool) -> Markup {
    html! {
        section aria-labelledby="probes-heading" {
            h2 #probes-heading { "Recent probes" }
            @if !has_persona {
                p { "These labels name no persona (a version 1 snapshot): their probes are not listed." }
            }
            div.scroll { table #probes {
                caption { "The exit's most recent probes, oldest first" }
                thead { tr {
                    th scope="col" { "Started" } th scope="col" { "Latency" } th scope="col" { "Gap" }
                    th scope="col" { "Egress" }
                    th scope="col" { "TLS voice" } th scope="col" { "HTTP voice" } th scope="col" { "Bucket" }
                    th scope="col" { "ALPN" } th scope="col" { "Error" }
                } }
                tbody {
                    @for probe in probes {
                        @let sample = probe.sample.as_ref();
                        tr.probe {
                            td { (probe.started_at) }
                            td { (probe.latency_ms.map_or("—".to_owned(), |v| format!("{v} ms"))) }
                            td.gap { (sample.and_then(|s| s.echo.latency.as_ref()).and_then(|l| l.gap_us)
                                      .map_or("—".to_owned(), gap_ms)) }
                            td { @if let Some(s) = sample { code { (s.egress_ip) } } }
                            td { @if let Some(v) = sample.and_then(|s| s.tls_voice.as_ref()) { code { (v) } } }
                            td { @if let Some(v) = sample.and_then(|s| s.h2_voice.as_ref().or(s.h1_voice.as_ref())) { code { (v) } } }
                            td { (sample.and_then(|s| s.bucket).map_or("none".to_owned(), |b| b.to_string())) }
                            td { (sample.and_then(|s| s.alpn.as_deref()).unwrap_or("")) }
                            td { @if let Some(e) = &probe.error {
                                (e.class) @if let Some(phase) = &e.phase { " (" (phase) ")" } ": " (e.message)
                            } }
                        }
                    }
                }
            } }
        }
    }
}
