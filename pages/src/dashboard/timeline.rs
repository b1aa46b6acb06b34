//! An exit's voice timeline: one lane per distinct voice, one mark per successful sample in the
//! lane of its voice, coloured by its bucket, and each failed probe a gap (a red rule across the
//! lanes). Samples are evenly spaced in probe order, oldest on the left; each mark's tooltip
//! (`<title>`) has its time, voice and bucket. Written server-side as inline SVG.

use exitvoice_schema::HistoryEntry;
use maud::{html, Markup};

/// Width of the lane-label column, of one sample's slot, and height of one lane, in SVG units.
const LABEL_W: usize = 130;
const SLOT_W: usize = 18;
const LANE_H: usize = 26;
/// Characters of a voice shown as its lane's label (the whole voice is in the table below).
const LABEL_CHARS: usize = 16;
/// Slots drawn at least, so a short history keeps a readable scale and its axis labels apart.
const MIN_SLOTS: usize = 16;

/// The distinct voices of `history`, first-seen order.
pub(crate) fn lanes(history: &[HistoryEntry]) -> Vec<&str> {
    let mut lanes: Vec<&str> = Vec::new();
    for voice in history.iter().filter_map(|e| e.voice.as_deref()) {
        if !lanes.contains(&voice) {
            lanes.push(voice);
        }
    }
    lanes
}

fn short(voice: &str) -> String {
    match voice.char_indices().nth(LABEL_CHARS) {
        Some((cut, _)) => format!("{}…", voice.get(..cut).unwrap_or(voice)),
        None => voice.to_owned(),
    }
}

/// The timeline of `history` (oldest first).
pub(crate) fn svg(history: &[HistoryEntry]) -> Markup {
    let lanes = lanes(history);
    let height = LANE_H * lanes.len().max(1) + 20;
    let width = LABEL_W + SLOT_W * history.len().max(MIN_SLOTS) + 10;
    let x = |i: usize| LABEL_W + SLOT_W * i + SLOT_W / 2;
    html! {
        svg #timeline xmlns="http://www.w3.org/2000/svg" role="img"
            aria-labelledby="timeline-title"
            viewBox={ "0 0 " (width) " " (height) } width=(width) height=(height) {
            title #timeline-title {
                "Voice timeline: " (history.len()) " probes, " (lanes.len()) " voices"
            }
            @for (lane, voice) in lanes.iter().enumerate() {
                @let y = LANE_H * lane + LANE_H / 2;
                text x="0" y=(y + 4) { (lane + 1) ". " (short(voice)) }
                line.axis x1=(LABEL_W) y1=(y) x2=(width - 10) y2=(y) {}
            }
            @for (i, entry) in history.iter().enumerate() {
                @match (&entry.voice, &entry.error) {
                    (Some(voice), _) => {
                        @let lane = lanes.iter().position(|l| l == voice).unwrap_or(0);
                        @let bucket = entry.bucket.map_or_else(|| "none".to_owned(), |b| b.to_string());
                        circle class={ "mark mark-" (bucket) } cx=(x(i)) cy=(LANE_H * lane + LANE_H / 2) r="6" {
                            title { (entry.at) ": " (voice) ", bucket " (bucket) }
                        }
                    },
                    (None, error) => {
                        line.gap x1=(x(i)) y1="2" x2=(x(i)) y2=(height - 20) {
                            title { (entry.at) ": failed (" (error.as_deref().unwrap_or("unknown")) ")" }
                        }
                    },
                }
            }
            text x=(LABEL_W) y=(height - 4) { "oldest" }
            text x=(width - 10) y=(height - 4) text-anchor="end" { "newest" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use exitvoice_schema::Bucket;

    fn entry(voice: Option<&str>, bucket: Option<Bucket>, error: Option<&str>) -> HistoryEntry {
        HistoryEntry {
            at: "2026-12-01T00:00:00Z".to_owned(),
            voice: voice.map(str::to_owned),
            bucket,
            error: error.map(str::to_owned),
        }
    }

    #[test]
    fn one_mark_per_sample_one_lane_per_voice_errors_as_gaps() {
        let history = [
            entry(Some("tlsv2_a+h2v1_a"), Some(Bucket::A), None),
            entry(None, None, Some("timeout")),
            entry(Some("tlsv2_b+h2v1_b"), Some(Bucket::C), None),
            entry(Some("tlsv2_a+h2v1_a"), Some(Bucket::A), None),
        ];
        let svg = svg(&history).into_string();
        assert_eq!(svg.matches("<circle").count(), 3, "{svg}");
        assert_eq!(svg.matches("class=\"mark mark-A\"").count(), 2, "{svg}");
        assert_eq!(svg.matches("class=\"mark mark-C\"").count(), 1, "{svg}");
        assert_eq!(svg.matches("class=\"gap\"").count(), 1, "{svg}");
        assert!(svg.contains("failed (timeout)"), "{svg}");
        assert_eq!(lanes(&history), ["tlsv2_a+h2v1_a", "tlsv2_b+h2v1_b"]);
        assert_eq!(short("tlsv2_0123456789abcdef"), "tlsv2_0123456789…");
    }
}
