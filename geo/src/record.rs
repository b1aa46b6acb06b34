//! One database's record for an address, in the layouts people download, read into a
//! [`Place`]:
//! - MaxMind GeoLite2/GeoIP2 and DB-IP Lite: `country.iso_code` (else
//!   `registered_country.iso_code`), `autonomous_system_number`,
//!   `autonomous_system_organization`;
//! - IPinfo Lite: `country_code`, `asn` (`"AS15169"`), `as_name`.
//!
//! Fields of other layouts are ignored; a field of an unexpected type makes the record an error.
//!
//! A MaxMind DB stores an unsigned number as `uint16`, `uint32`, `uint64` or `uint128`, and
//! writers choose: libmaxminddb's `mmdblookup` reads any of them, and PyPI's `mmdb-writer` writes
//! an ASN below 65,536 as `uint16`. The reader's typed `u32` takes only `uint32`, so the network's
//! number is read as whatever width it has and kept when it fits in 32 bits.

use exitvoice_schema::Place;
use serde::de::{Deserializer, Visitor};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Record {
    country: Option<Country>,
    registered_country: Option<Country>,
    country_code: Option<String>,
    #[serde(default, deserialize_with = "any_unsigned")]
    autonomous_system_number: Option<u32>,
    autonomous_system_organization: Option<String>,
    asn: Option<Asn>,
    as_name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Country {
    iso_code: Option<String>,
}

/// IPinfo writes `AS15169`; a number is taken as it is.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Asn {
    Number(u32),
    Text(String),
}

/// An unsigned number of any width the format has, that fits in 32 bits.
fn any_unsigned<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    struct Unsigned;
    impl Visitor<'_> for Unsigned {
        type Value = u32;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an unsigned number below 2^32")
        }

        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<u32, E> {
            u32::try_from(n).map_err(|_| E::custom("an unsigned number above 2^32 - 1"))
        }

        fn visit_u128<E: serde::de::Error>(self, n: u128) -> Result<u32, E> {
            u32::try_from(n).map_err(|_| E::custom("an unsigned number above 2^32 - 1"))
        }
    }
    deserializer.deserialize_any(Unsigned).map(Some)
}

impl Asn {
    fn number(&self) -> Option<u32> {
        match self {
            Self::Number(n) => Some(*n),
            Self::Text(text) => text
                .strip_prefix("AS")
                .or_else(|| text.strip_prefix("as"))
                .unwrap_or(text)
                .parse()
                .ok(),
        }
    }
}

impl Record {
    /// What the record says, in either layout.
    pub(crate) fn place(self) -> Place {
        let country = [self.country, self.registered_country]
            .into_iter()
            .flatten()
            .find_map(|c| c.iso_code)
            .or(self.country_code)
            .filter(|code| !code.is_empty());
        Place {
            country,
            asn: self
                .autonomous_system_number
                .or_else(|| self.asn.as_ref().and_then(Asn::number)),
            organization: self
                .autonomous_system_organization
                .or(self.as_name)
                .filter(|name| !name.is_empty()),
        }
    }
}

/// Fills what `place` does not know yet from `more` (the databases are asked in the order
/// given; the first that knows the country answers it, and the first that knows the network).
pub(crate) fn merge(place: &mut Place, more: Place) {
    if place.country.is_none() {
        place.country = more.country;
    }
    // A network's number and name come from one database together.
    if place.asn.is_none() && place.organization.is_none() {
        place.asn = more.asn;
        place.organization = more.organization;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_asn_reads_as_text_or_number() {
        assert_eq!(Asn::Text("AS15169".into()).number(), Some(15169));
        assert_eq!(Asn::Text("64500".into()).number(), Some(64500));
        assert_eq!(Asn::Number(7).number(), Some(7));
        assert_eq!(Asn::Text("ASX".into()).number(), None);
    }

    #[test]
    fn the_first_database_that_knows_a_part_answers_it() {
        let mut place = Place {
            country: Some("DE".into()),
            ..Place::default()
        };
        merge(
            &mut place,
            Place {
                country: Some("FR".into()),
                asn: Some(64500),
                organization: Some("Example".into()),
            },
        );
        assert_eq!(place.country.as_deref(), Some("DE"));
        assert_eq!(place.asn, Some(64500));
        assert_eq!(place.organization.as_deref(), Some("Example"));
    }
}
