//! Browser HTTP/2 profiles (docs/voice-http.md, "Browser profiles": reference values taken
//! from lexiforest/curl-impersonate signatures of real browsers and from decrypted conformance
//! captures).
//!
//! A prefix matches a profile only when every defining field is equal: the first SETTINGS frame
//! (ids and values in wire order, GREASE ids removed first since Chromium may add a random one),
//! the connection WINDOW_UPDATE before the first HEADERS, the PRIORITY frames before it, the
//! first request's HEADERS priority (present or not, exclusive bit, dependency, and a weight from
//! the profile's list) and the first request's pseudo-header order. Only the weight has a list:
//! Chromium derives it from the request priority (`256, 220, 183, 147, 110` for highest to idle,
//! net/spdy's priority to weight ladder), so a navigation and a `fetch()` from the same browser
//! both match. Edge, Brave, Opera and other Chromium browsers share Chrome's stack and match the
//! Chrome profiles; HTTP/2 alone cannot tell them apart.

use crate::h2::H2Prefix;

/// The HEADERS priority a profile expects on its first request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadersPriority {
    /// No PRIORITY flag.
    Absent,
    /// PRIORITY flag with these fields.
    Present {
        /// E bit.
        exclusive: bool,
        /// Stream dependency.
        dependency: u32,
        /// Accepted real weights (wire byte + 1).
        weights: &'static [u16],
    },
}

/// One browser's HTTP/2 connection start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BrowserProfile {
    /// Profile name, e.g. `chrome-119+`.
    pub name: &'static str,
    /// First SETTINGS (id, value), wire order, without GREASE ids.
    pub settings: &'static [(u16, u32)],
    /// Connection WINDOW_UPDATE increment, if sent before the first HEADERS.
    pub window_update: Option<u32>,
    /// PRIORITY frames before the first HEADERS: (stream, exclusive, dependency, weight).
    pub priority_frames: &'static [(u32, bool, u32, u16)],
    /// HEADERS priority of the first request.
    pub headers_priority: HeadersPriority,
    /// Pseudo-header order of the first request.
    pub pseudo_order: &'static [&'static str],
}

/// Chromium's weights for request priorities HIGHEST, MEDIUM, LOW, LOWEST, IDLE.
const CHROMIUM_WEIGHTS: &[u16] = &[256, 220, 183, 147, 110];
const MASP: &[&str] = &[":method", ":authority", ":scheme", ":path"];
const MPAS: &[&str] = &[":method", ":path", ":authority", ":scheme"];
const MSAP: &[&str] = &[":method", ":scheme", ":authority", ":path"];
const CHROME_PRIORITY: HeadersPriority = HeadersPriority::Present {
    exclusive: true,
    dependency: 0,
    weights: CHROMIUM_WEIGHTS,
};

/// The profile table, newest first within each browser.
pub const PROFILES: &[BrowserProfile] = &[
    BrowserProfile {
        name: "chrome-119+",
        settings: &[(1, 65_536), (2, 0), (4, 6_291_456), (6, 262_144)],
        window_update: Some(15_663_105),
        priority_frames: &[],
        headers_priority: CHROME_PRIORITY,
        pseudo_order: MASP,
    },
    BrowserProfile {
        name: "chrome-107-118",
        settings: &[(1, 65_536), (2, 0), (3, 1000), (4, 6_291_456), (6, 262_144)],
        window_update: Some(15_663_105),
        priority_frames: &[],
        headers_priority: CHROME_PRIORITY,
        pseudo_order: MASP,
    },
    BrowserProfile {
        name: "chrome-99-106",
        settings: &[(1, 65_536), (3, 1000), (4, 6_291_456), (6, 262_144)],
        window_update: Some(15_663_105),
        priority_frames: &[],
        headers_priority: CHROME_PRIORITY,
        pseudo_order: MASP,
    },
    BrowserProfile {
        name: "firefox-133+",
        settings: &[(1, 65_536), (2, 0), (4, 131_072), (5, 16_384)],
        window_update: Some(12_517_377),
        priority_frames: &[],
        headers_priority: HeadersPriority::Present {
            exclusive: false,
            dependency: 0,
            weights: &[42],
        },
        pseudo_order: MPAS,
    },
    BrowserProfile {
        name: "safari-18.4+",
        settings: &[(2, 0), (3, 100), (4, 2_097_152), (9, 1)],
        window_update: Some(10_420_225),
        priority_frames: &[],
        headers_priority: HeadersPriority::Absent,
        pseudo_order: MSAP,
    },
    BrowserProfile {
        name: "safari-18.0",
        settings: &[(2, 0), (3, 100), (4, 2_097_152), (8, 1), (9, 1)],
        window_update: Some(10_420_225),
        priority_frames: &[],
        headers_priority: HeadersPriority::Present {
            exclusive: false,
            dependency: 0,
            weights: &[256],
        },
        pseudo_order: MSAP,
    },
];

impl BrowserProfile {
    /// Whether `prefix` matches this profile exactly (see the module docs).
    pub fn matches(&self, prefix: &H2Prefix) -> bool {
        let Some(settings) = prefix.settings() else {
            return false;
        };
        let mut sent = settings.entries.iter().filter(|s| !s.is_grease());
        let mut want = self.settings.iter();
        loop {
            match (sent.next(), want.next()) {
                (None, None) => break,
                (Some(s), Some(&(id, value))) if s.id == id && s.value == value => {}
                _ => return false,
            }
        }
        if prefix.connection_window_update() != self.window_update {
            return false;
        }
        let mut frames = prefix.priority_frames();
        let mut want = self.priority_frames.iter();
        loop {
            match (frames.next(), want.next()) {
                (None, None) => break,
                (Some((stream, f)), Some(&(s, e, d, w)))
                    if stream == s && f.exclusive == e && f.dependency == d && f.weight == w => {}
                _ => return false,
            }
        }
        let Some(request) = prefix.first_request() else {
            return false;
        };
        let priority_ok = match (self.headers_priority, request.priority) {
            (HeadersPriority::Absent, None) => true,
            (
                HeadersPriority::Present {
                    exclusive,
                    dependency,
                    weights,
                },
                Some(p),
            ) => {
                p.exclusive == exclusive
                    && p.dependency == dependency
                    && weights.contains(&p.weight)
            }
            _ => false,
        };
        priority_ok
            && request
                .pseudo_header_order()
                .eq(self.pseudo_order.iter().map(|s| s.as_bytes()))
    }
}

/// The first browser profile `prefix` matches.
pub fn browser_profile(prefix: &H2Prefix) -> Option<&'static BrowserProfile> {
    PROFILES.iter().find(|p| p.matches(prefix))
}
