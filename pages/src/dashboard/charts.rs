//! Horizontal bar charts of the pool (exits by bucket, by route), as inline SVG with the numbers
//! written beside the bars: readable without JavaScript, and by a screen reader through the
//! figure's caption (the SVG's label) and its `<desc>` (every count).

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
                viewBox={ "0 0 " (width) " " (height) } width="100%" {
                desc { (description) }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_proportional_and_labelled_with_their_counts() {
        let counts = [
            ("A".to_owned(), 4, "mark-A".to_owned()),
            ("B".to_owned(), 1, "mark-B".to_owned()),
            ("C".to_owned(), 0, "mark-C".to_owned()),
        ];
        let svg = bars("chart", "Exits by bucket", &counts).into_string();
        assert!(
            svg.contains(r#"class="mark-A" x="110" y="4" width="240""#),
            "{svg}"
        );
        assert!(
            svg.contains(r#"class="mark-B" x="110" y="28" width="60""#),
            "{svg}"
        );
        assert!(
            svg.contains(r#"class="mark-C" x="110" y="52" width="0""#),
            "{svg}"
        );
        assert!(svg.contains("<desc>A: 4, B: 1, C: 0</desc>"), "{svg}");
        // No exits at all: no division by zero, empty bars.
        let none = bars("chart", "t", &[("A".to_owned(), 0, "bar".to_owned())]).into_string();
        assert!(none.contains(r#"width="0""#), "{none}");
    }
}
