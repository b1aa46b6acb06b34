//! OS names from a p0f v3 signature database (`p0f.fp`, e.g. Debian's `/etc/p0f/p0f.fp`): its
//! `[tcp:request]` section read, and a SYN matched against it as p0f matches (p0f README,
//! section 5, "TCP signatures": the fields, wildcards, `%n`, `mss*n`, `mtu*n`, `ttl-`, and the
//! fuzzy matches "'df' and 'id+' quirks are allowed to disappear; 'id-' or 'ecn' may appear; and
//! TTLs can change").
//!
//! The database is the operator's (`--p0f-db FILE`); none is shipped. Tools' signatures (class
//! `!`) name applications, not systems, and are skipped.

use super::options::OptionKind;
use super::quirks::Quirks;
use super::signature::WindowForm;
use super::syn::Syn;

/// Beyond this many hops a TTL match is only fuzzy (p0f's `MAX_DIST`).
const MAX_DIST: u8 = 35;
/// The section of SYN signatures.
const SECTION: &str = "[tcp:request]";

/// Why a signature database did not read: the line and what was wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("p0f database line {line}: {reason}")]
pub struct P0fDbError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub reason: &'static str,
}

/// A window as a signature writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Window {
    Any,
    Exact(u16),
    Modulo(u16),
    Mss(u32),
    Mtu(u32),
}

/// One `sig` line of `[tcp:request]`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Signature {
    /// `None` for `*`.
    version: Option<u8>,
    initial_ttl: u8,
    /// `ttl-`: the tool randomizes its TTL below this.
    random_ttl: bool,
    options_len: u8,
    mss: Option<u16>,
    window: Window,
    scale: Option<u8>,
    layout: Vec<OptionKind>,
    eol_pad: u8,
    quirks: Quirks,
    /// `None` for `*`; `Some(true)` for `+`.
    payload: Option<bool>,
}

/// A label and its signatures.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Label {
    generic: bool,
    /// Name and flavour, as p0f prints them (`Linux 3.11 and newer`).
    os: String,
    signatures: Vec<Signature>,
}

/// The SYN signatures of a p0f database.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct P0fDb {
    labels: Vec<Label>,
}

impl P0fDb {
    /// Reads the `[tcp:request]` section of a `p0f.fp` file.
    ///
    /// # Errors
    /// [`P0fDbError`] for a malformed `label` or `sig` line in that section, or a `sig` before
    /// any `label`.
    pub fn parse(text: &str) -> Result<Self, P0fDbError> {
        let mut labels: Vec<Label> = Vec::new();
        let mut in_section = false;
        let mut skipping_tool = false;
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            let error = |reason| P0fDbError {
                line: index + 1,
                reason,
            };
            if line.is_empty() || line.starts_with(';') {
                continue;
            }
            if line.starts_with('[') {
                in_section = line == SECTION;
                continue;
            }
            if !in_section {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(error("neither a label nor a sig"));
            };
            match key.trim() {
                "label" => {
                    let mut parts = value.trim().splitn(4, ':');
                    let kind = parts.next().unwrap_or_default();
                    let class = parts.next().ok_or_else(|| error("label without a class"))?;
                    let name = parts.next().ok_or_else(|| error("label without a name"))?;
                    let flavor = parts.next().unwrap_or_default();
                    skipping_tool = class == "!";
                    let os = if flavor.is_empty() {
                        name.to_owned()
                    } else {
                        format!("{name} {flavor}")
                    };
                    labels.push(Label {
                        generic: kind == "g",
                        os,
                        signatures: Vec::new(),
                    });
                }
                "sig" => {
                    let signature =
                        parse_signature(value.trim()).ok_or_else(|| error("bad sig"))?;
                    let label = labels
                        .last_mut()
                        .ok_or_else(|| error("sig before a label"))?;
                    if !skipping_tool {
                        label.signatures.push(signature);
                    }
                }
                // `sys` lines name the systems a tool runs on.
                _ => {}
            }
        }
        labels.retain(|label| !label.signatures.is_empty());
        Ok(Self { labels })
    }

    /// The OS the database names for `syn`, as p0f would: the first exact match of a specific
    /// label, else of a generic one, else the first fuzzy match.
    pub fn os(&self, syn: &Syn) -> Option<&str> {
        let mut generic = None;
        let mut fuzzy = None;
        for label in &self.labels {
            for signature in &label.signatures {
                match signature.matches(syn) {
                    Some(false) if !label.generic => return Some(&label.os),
                    Some(false) => {
                        generic.get_or_insert(label.os.as_str());
                    }
                    Some(true) => {
                        fuzzy.get_or_insert(label.os.as_str());
                    }
                    None => {}
                }
            }
        }
        generic.or(fuzzy)
    }
}

impl Signature {
    /// `None` when it does not match; `Some(fuzzy)` when it does.
    fn matches(&self, syn: &Syn) -> Option<bool> {
        if self.layout != syn.options.layout
            || self.eol_pad != syn.options.eol_pad
            || self.options_len != syn.ip.options_len
        {
            return None;
        }
        // A signature for both versions ignores the other version's quirks.
        let quirks = match (self.version, syn.ip.version) {
            (None, 4) => self.quirks.without(Quirks::FLOW),
            (None, _) => self.quirks.without(Quirks(
                Quirks::DF.0 | Quirks::NONZERO_ID.0 | Quirks::ZERO_ID.0,
            )),
            _ => self.quirks,
        };
        let mut fuzzy = false;
        if quirks != syn.quirks {
            let deleted = quirks.without(syn.quirks);
            let added = syn.quirks.without(quirks);
            let may_disappear = Quirks(Quirks::DF.0 | Quirks::NONZERO_ID.0);
            let may_appear = Quirks(Quirks::ZERO_ID.0 | Quirks::ECN.0);
            if deleted.without(may_disappear) != Quirks::default()
                || added.without(may_appear) != Quirks::default()
            {
                return None;
            }
            fuzzy = true;
        }
        let ttl = syn.ip.ttl;
        if self.random_ttl {
            if self.initial_ttl < ttl {
                return None;
            }
        } else if self.initial_ttl < ttl || self.initial_ttl - ttl > MAX_DIST {
            fuzzy = true;
        }
        if self
            .mss
            .is_some_and(|mss| Some(mss) != syn.options.mss.or(Some(0)))
        {
            return None;
        }
        if self
            .scale
            .is_some_and(|scale| scale != syn.options.window_scale.unwrap_or(0))
        {
            return None;
        }
        if self
            .payload
            .is_some_and(|data| data != (syn.payload_len > 0))
        {
            return None;
        }
        let window_matches = match (self.window, syn.window_form()) {
            (Window::Any, _) => true,
            (Window::Exact(window), _) => window == syn.window,
            (Window::Modulo(divisor), _) => syn.window.is_multiple_of(divisor),
            (Window::Mss(n), WindowForm::Mss(m)) | (Window::Mtu(n), WindowForm::Mtu(m)) => n == m,
            _ => false,
        };
        window_matches.then_some(fuzzy)
    }
}

/// One `sig` value: `ver:ittl:olen:mss:wsize,scale:olayout:quirks:pclass`.
fn parse_signature(text: &str) -> Option<Signature> {
    let fields: Vec<&str> = text.split(':').collect();
    let [version, ttl, olen, mss, window, layout, quirks, payload] = fields[..] else {
        return None;
    };
    let version = match version {
        "*" => None,
        "4" => Some(4),
        "6" => Some(6),
        _ => return None,
    };
    // `64`, `64-` (random below 64) or `54+10` (observed plus distance).
    let (initial_ttl, random_ttl) = match ttl.strip_suffix('-') {
        Some(ttl) => (ttl.parse().ok()?, true),
        None => match ttl.split_once('+') {
            Some((seen, distance)) => (
                seen.parse::<u8>()
                    .ok()?
                    .checked_add(distance.parse().ok()?)?,
                false,
            ),
            None => (ttl.parse().ok()?, false),
        },
    };
    let (window, scale) = window.split_once(',')?;
    let window = if window == "*" {
        Window::Any
    } else if let Some(n) = window.strip_prefix('%') {
        Window::Modulo(n.parse().ok().filter(|n| *n > 0)?)
    } else if let Some(n) = window.strip_prefix("mss*") {
        Window::Mss(n.parse().ok()?)
    } else if let Some(n) = window.strip_prefix("mtu*") {
        Window::Mtu(n.parse().ok()?)
    } else {
        Window::Exact(window.parse().ok()?)
    };
    let (layout, eol_pad) = parse_layout(layout)?;
    Some(Signature {
        version,
        initial_ttl,
        random_ttl,
        options_len: olen.parse().ok()?,
        mss: wildcard(mss)?,
        window,
        scale: wildcard(scale)?,
        layout,
        eol_pad,
        quirks: parse_quirks(quirks)?,
        payload: match payload {
            "*" => None,
            "0" => Some(false),
            "+" => Some(true),
            _ => return None,
        },
    })
}

/// `*` as `Some(None)`, a number as `Some(Some(n))`, anything else as `None`.
fn wildcard<T: std::str::FromStr>(text: &str) -> Option<Option<T>> {
    match text {
        "*" => Some(None),
        number => number.parse().ok().map(Some),
    }
}

fn parse_layout(text: &str) -> Option<(Vec<OptionKind>, u8)> {
    let mut layout = Vec::new();
    let mut eol_pad = 0;
    for name in text.split(',').filter(|name| !name.is_empty()) {
        let kind = match name {
            "nop" => OptionKind::NOP,
            "mss" => OptionKind::MSS,
            "ws" => OptionKind::WINDOW_SCALE,
            "sok" => OptionKind::SACK_PERMITTED,
            "sack" => OptionKind::SACK,
            "ts" => OptionKind::TIMESTAMPS,
            other => {
                if let Some(pad) = other.strip_prefix("eol+") {
                    eol_pad = pad.parse().ok()?;
                    OptionKind::EOL
                } else {
                    OptionKind(other.strip_prefix('?')?.parse().ok()?)
                }
            }
        };
        layout.push(kind);
    }
    Some((layout, eol_pad))
}

fn parse_quirks(text: &str) -> Option<Quirks> {
    let mut quirks = Quirks::default();
    for name in text.split(',').filter(|name| !name.is_empty()) {
        quirks.set(Quirks::named(name)?);
    }
    Some(quirks)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A label per kind of window notation, in p0f.fp's syntax.
    const DB: &str = "
; comment
[mtu]
label = Ethernet
sig   = 1500
[tcp:request]
label = s:unix:Linux:3.11 and newer
sig   = *:64:0:*:mss*20,10:mss,sok,ts,nop,ws:df,id+:0
label = s:!:NMap:SYN scan
sys   = @unix,@win
sig   = *:64-:0:1460:1024,0:mss::0
label = g:win:Windows:NT kernel
sig   = *:128:0:*:%8192,*:mss,nop,ws,nop,nop,sok:df,id+:0
[tcp:response]
label = s:unix:Linux:3.x
sig   = *:64:0:*:mss*10,0:mss::0
";

    fn syn(ttl: u8, window: u16, scale: u8, options: &[u8]) -> Syn {
        let tcp_len = 20 + options.len();
        let total = u16::try_from(20 + tcp_len).unwrap().to_be_bytes();
        let mut bytes = vec![
            0x45, 0, total[0], total[1], 0x12, 0x34, 0x40, 0, ttl, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0,
            2,
        ];
        let w = window.to_be_bytes();
        let words = u8::try_from(tcp_len / 4).unwrap() << 4;
        bytes.extend([
            0, 1, 0, 2, 0, 0, 0, 9, 0, 0, 0, 0, words, 2, w[0], w[1], 0, 0, 0, 0,
        ]);
        let mut options = options.to_vec();
        if let Some(at) = options.iter().position(|b| *b == 0xee) {
            options[at] = scale;
        }
        bytes.extend(options);
        super::super::parse_syn(&bytes).unwrap()
    }

    /// MSS 1460, SACK permitted, timestamps, NOP, window scale (`0xee`: the scale).
    const LINUX: [u8; 20] = [
        2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 0xee,
    ];
    /// MSS 1460, NOP, window scale, NOP, NOP, SACK permitted.
    const WINDOWS: [u8; 12] = [2, 4, 5, 0xb4, 1, 3, 3, 0xee, 1, 1, 4, 2];

    #[test]
    fn names_the_first_matching_label() {
        let db = P0fDb::parse(DB).unwrap();
        assert_eq!(
            db.os(&syn(64, 1460 * 20, 10, &LINUX)),
            Some("Linux 3.11 and newer")
        );
        // 64 - 50 = 14 hops: still exact.
        assert_eq!(
            db.os(&syn(50, 1460 * 20, 10, &LINUX)),
            Some("Linux 3.11 and newer")
        );
        assert_eq!(db.os(&syn(64, 1460 * 21, 10, &LINUX)), None, "mss*21");
        assert_eq!(db.os(&syn(64, 1460 * 20, 7, &LINUX)), None, "scale 7");
        assert_eq!(
            db.os(&syn(128, 8192 * 7, 8, &WINDOWS)),
            Some("Windows NT kernel")
        );
        assert_eq!(db.os(&syn(128, 8000, 8, &WINDOWS)), None, "%8192");
    }

    #[test]
    fn tools_and_other_sections_are_not_systems() {
        let db = P0fDb::parse(DB).unwrap();
        assert_eq!(db.labels.len(), 2, "{db:?}");
    }

    #[test]
    fn malformed_lines_are_typed_errors() {
        let error = P0fDb::parse("[tcp:request]\nsig = 4:64:0:*:mss*20,10:mss::0\n").unwrap_err();
        assert_eq!(error.line, 2);
        let error =
            P0fDb::parse("[tcp:request]\nlabel = s:unix:Linux:x\nsig = 4:64\n").unwrap_err();
        assert_eq!((error.line, error.reason), (3, "bad sig"));
        let error =
            P0fDb::parse("[tcp:request]\nlabel = s:unix:Linux:x\nsig = 4:64:0:*:*,*:zz::0\n")
                .unwrap_err();
        assert_eq!(error.line, 3);
    }
}
