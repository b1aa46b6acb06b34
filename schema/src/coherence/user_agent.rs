//! The family a User-Agent header claims (RFC 9110 section 10.1.5: product tokens, most
//! significant first). Browsers all start with `Mozilla/5.0` and name themselves by a token
//! inside; libraries start with their own product token. A claim, not a fingerprint: anyone can
//! send any User-Agent, which is what the `ua_family_ne_tls_family` reason catches.

use super::Family;

/// Longest User-Agent read; the tokens that name a family come well before (real browser
/// User-Agents are under 300 bytes).
const MAX_USER_AGENT: usize = 1024;

/// Library User-Agents by their leading product token (`curl/8.5.0`, `Go-http-client/2.0`, …).
/// aiohttp sends `Python/3.11 aiohttp/3.8.4`, urllib `Python-urllib/3.11`.
const LIBRARY_PREFIXES: &[(&str, &str)] = &[
    ("Apache-HttpClient/", "java"),
    ("Go-http-client/", "go"),
    ("Java-http-client/", "java"),
    ("Java/", "java"),
    ("Python-urllib/", "python"),
    ("Python/", "python"),
    ("axios/", "node"),
    ("curl/", "curl"),
    ("nghttp2/", "nghttp2"),
    ("node", "node"),
    ("python-httpx/", "python"),
    ("python-requests/", "python"),
    ("undici", "node"),
];

/// Browser tokens, first match wins: on iOS every browser is WebKit (Chrome says `CriOS`,
/// Firefox `FxiOS`), so those count as Safari before `Chrome/` or `Firefox/` are looked for.
/// Edge, Opera and the other Chromium browsers carry `Chrome/` too.
const BROWSER_TOKENS: &[(&str, &str)] = &[
    ("CriOS/", "safari"),
    ("FxiOS/", "safari"),
    ("Firefox/", "firefox"),
    ("Chrome/", "chrome"),
    ("Chromium/", "chrome"),
    ("Safari/", "safari"),
];

/// The family a User-Agent claims; `None` when it names none the table knows.
pub fn ua_family(user_agent: &str) -> Option<Family> {
    let head = truncate(user_agent.trim_start());
    let name = if head.starts_with("Mozilla/") {
        BROWSER_TOKENS
            .iter()
            .find(|(token, _)| head.contains(token))
            .map(|(_, family)| *family)
    } else {
        LIBRARY_PREFIXES
            .iter()
            .find(|(prefix, _)| head.starts_with(prefix))
            .map(|(_, family)| *family)
    }?;
    Some(Family::new(name, false))
}

/// Operating-system tokens of a browser's User-Agent comment (`(Windows NT 10.0; Win64; x64)`),
/// first match wins: an iPhone's says `like Mac OS X`, Android's and ChromeOS's `Linux`.
const OS_TOKENS: &[(&str, &str)] = &[
    ("iPhone", "ios"),
    ("iPad", "ios"),
    ("Android", "android"),
    ("CrOS", "chromeos"),
    ("Windows NT", "windows"),
    ("Mac OS X", "macos"),
    ("Macintosh", "macos"),
    ("Linux", "linux"),
];

/// The operating system a browser's User-Agent claims (`windows`, `macos`, `ios`, `android`,
/// `chromeos`, `linux`); `None` for a library's, which claims none, or an unknown one.
pub fn ua_os(user_agent: &str) -> Option<&'static str> {
    let head = truncate(user_agent.trim_start());
    if !head.starts_with("Mozilla/") {
        return None;
    }
    OS_TOKENS
        .iter()
        .find(|(token, _)| head.contains(token))
        .map(|(_, os)| *os)
}

/// At most [`MAX_USER_AGENT`] bytes of `text`, cut at a character boundary.
fn truncate(text: &str) -> &str {
    let mut end = MAX_USER_AGENT.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}
