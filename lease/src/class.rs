//! The lease classes: what a unit's label admits and what a lease asks for.

/// What a unit's label admits, and what a lease asks for: identity ⊂ anonymous ⊂ stateless.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LeaseClass {
    /// Work that keeps no session; may share a unit with other stateless leases.
    Stateless = 1,
    /// Exclusive, not identity-preserving.
    Anonymous = 2,
    /// Exclusive, and the exit keeps the client's identity.
    Identity = 3,
}

impl LeaseClass {
    /// The API's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stateless => "stateless",
            Self::Anonymous => "anonymous",
            Self::Identity => "identity",
        }
    }

    /// The class named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "stateless" => Some(Self::Stateless),
            "anonymous" => Some(Self::Anonymous),
            "identity" => Some(Self::Identity),
            _ => None,
        }
    }

    /// Whether a lease of this class holds its unit alone.
    pub fn exclusive(self) -> bool {
        self != Self::Stateless
    }

    /// Whether a unit whose label admits this class serves a lease of `class` (a unit fit for
    /// identity serves anonymous and stateless leases too).
    pub fn serves(self, class: Self) -> bool {
        self.rank() >= class.rank()
    }

    /// Its rank in the store (and the Redis store's keys): 1 stateless, 2 anonymous,
    /// 3 identity.
    pub fn rank(self) -> i64 {
        self as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [LeaseClass; 3] = [
        LeaseClass::Stateless,
        LeaseClass::Anonymous,
        LeaseClass::Identity,
    ];

    #[test]
    fn names_parse_back() {
        for class in ALL {
            assert_eq!(LeaseClass::parse(class.as_str()), Some(class));
        }
        assert_eq!(LeaseClass::parse("Identity"), None);
        assert_eq!(LeaseClass::parse(""), None);
    }

    #[test]
    fn a_unit_serves_its_class_and_those_below() {
        for unit in ALL {
            for lease in ALL {
                assert_eq!(unit.serves(lease), unit >= lease, "{unit:?} {lease:?}");
            }
        }
        assert_eq!(ALL.map(LeaseClass::rank), [1, 2, 3]);
        assert_eq!(ALL.map(LeaseClass::exclusive), [false, true, true]);
    }
}
