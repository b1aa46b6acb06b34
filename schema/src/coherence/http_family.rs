//! The HTTP/2 family of an Akamai string, by shape: the SETTINGS identifiers in wire order and
//! the pseudo-header order, not the values that move with each release.

use super::{families, Family};

/// The HTTP/2 family of an Akamai string `S|WU|P|PS`, exact when the whole string was recorded.
pub fn http_family(akamai: &str) -> Option<Family> {
    let mut parts = akamai.split('|');
    let settings = parts.next()?;
    let pseudo = parts.nth(2)?;
    let ids: Vec<&str> = settings
        .split([';', ','])
        .filter_map(|s| s.split(':').next())
        .filter(|id| !id.is_empty())
        .collect();
    let ids = ids.join(",");
    families::H2_SHAPES
        .iter()
        .find(|shape| shape.settings_ids == ids && shape.pseudo == pseudo)
        .map(|shape| Family::new(shape.name, shape.exact.contains(&akamai)))
}
