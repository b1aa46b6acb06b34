//! Content negotiation on `Accept` (RFC 9110 section 12.5.1): HTML only for clients that prefer
//! it to JSON, so API clients (`*/*`, `application/json`, no header) keep getting JSON.

use axum::http::header::ACCEPT;
use axum::http::HeaderMap;

/// Whether the request's `Accept` ranks `text/html` above `application/json`. A tie (`*/*`
/// alone) goes to JSON: the echo's answer to a script must not change under it.
pub fn prefers_html(headers: &HeaderMap) -> bool {
    let mut html = 0.0_f32;
    let mut json = 0.0_f32;
    for value in headers.get_all(ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for range in value.split(',') {
            let mut params = range.split(';');
            let media = params
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            let q = params
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0)
                .clamp(0.0, 1.0);
            let (to_html, to_json) = match media.as_str() {
                "text/html" => (true, false),
                "application/json" => (false, true),
                "text/*" => (true, false),
                "application/*" => (false, true),
                "*/*" => (true, true),
                _ => (false, false),
            };
            if to_html {
                html = html.max(q);
            }
            if to_json {
                json = json.max(q);
            }
        }
    }
    html > json
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, value.parse().expect("header value"));
        headers
    }

    #[test]
    fn browsers_get_html_and_scripts_get_json() {
        // Chromium's and Firefox's navigation Accept headers.
        assert!(prefers_html(&accept(
            "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,\
             image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"
        )));
        assert!(prefers_html(&accept(
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        )));
        // curl, Go, Python requests, and no header at all.
        assert!(!prefers_html(&accept("*/*")));
        assert!(!prefers_html(&HeaderMap::new()));
        assert!(!prefers_html(&accept("application/json")));
        assert!(!prefers_html(&accept("text/html;q=0.5, application/json")));
        assert!(prefers_html(&accept("application/json;q=0.1, text/html")));
        assert!(!prefers_html(&accept("text/html;q=0")));
        // An unreadable weight counts as 1, as if it were absent.
        assert!(prefers_html(&accept("text/html;q=nonsense;;,")));
    }
}
