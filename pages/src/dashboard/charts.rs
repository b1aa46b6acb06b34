//! Horizontal bar charts of the pool (exits by bucket, by route), as inline SVG with the numbers
//! written beside the bars: readable without JavaScript, and by a screen reader through the
//! figure's caption and the SVG's label.

use maud::{html, Markup};

/// Height of one bar's row, in SVG units.
const ROW: u32 = 24;
/// Width of the label column and of the longest bar.
const LABEL_W: u32 = 110;
const BAR_W: u32 = 240;

/// A bar chart of `counts` (label, count, CSS class of the bar), titled `title`.
pub(crate) fn bars(id: &str, title: &str, counts: &[(String, u32, String)]) -> Markup {
    let max = counts.iter().map(|(_, n, _)| *n).max().unwrap_or(0).max(1);
    let height = ROW * u32::try_from(counts.len()).unwrap_or(u32::MAX).max(1) + 4;
    let width = LABEL_W + BAR_W + 40;
    let description = counts
        .iter()
        .map(|(label, n, _)| format!("{label}: {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    html! {
        figure {
            figcaption #(id) { (title) }
            svg xmlns="http://www.w3.org/2000/svg" role="img" aria-labelledby=(id)
                aria-description=(description)
                viewBox={ "0 0 " (width) " " (height) } width="100%" {
                @for (i, (label, n, class)) in counts.iter().enumerate() {
                    @let y = ROW * u32::try_from(i).unwrap_or(u32::MAX);
                    @let w = BAR_W * n / max;
                    text x="0" y=(y + 16) { (label) }
                    rect class=(class) x=(LABEL_W) y=(y + 4) width=(w) height=(ROW - 8) {
                        title { (label) ": " (n) }
                    }
                    text x=(LABEL_W + w + 6) y=(y + 16) { (n) }
                }
            }
        }
    }
}
