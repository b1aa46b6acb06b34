//! [`Exit`]: one way out, with the sticky-session id of a gateway when it has one, and the
//! [`SessionMinter`] that mints and retires those ids.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use rand::Rng;

use crate::proxy_url::ProxyUrl;
use crate::secret::Secret;

/// The placeholder a gateway user name carries for the sticky-session id.
pub const SESSION_PLACEHOLDER: &str = "{session}";
/// Replaced in a proxy user name by the exit's `country`, when the file is read: gateways pick
/// the exit country from the user name.
pub const COUNTRY_PLACEHOLDER: &str = "{country}";

/// One exit: a proxy, or one sticky session of a gateway.
#[derive(Clone, Debug)]
pub struct Exit {
    /// Unique name (`<name>` or `<name>#<slot>` for gateway sessions); the key of its labels.
    pub name: String,
    /// The proxy. For a gateway session the user name still holds [`SESSION_PLACEHOLDER`].
    pub proxy: ProxyUrl,
    /// Free-form tags (tier, region, …), exported with the labels.
    pub tags: BTreeMap<String, String>,
    /// The gateway session, when the exit is one.
    pub session: Option<Session>,
    /// PEM file of the CA(s) that sign an `https://` proxy's certificate; the system bundle when
    /// `None`.
    pub proxy_ca: Option<PathBuf>,
    /// The exit is a rotating gateway: its samples must leave from at least two egresses.
    pub rotate: bool,
    /// How many stateless leases the broker puts on this exit at once (on a gateway: on each
    /// session), instead of the broker's `stateless-per-exit`.
    pub stateless_per_exit: Option<u32>,
    /// The country the exit should leave from (`country` in the exits file, two letters as
    /// written there): an expectation the auditor checks each sample's egress against.
    pub country: Option<String>,
    /// The network (autonomous system) the exit should leave from (`asn`), likewise.
    pub asn: Option<u32>,
}

/// A gateway sticky session: a slot number, the id currently minted for it, and how long the
/// gateway keeps one id on one egress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// 1-based slot within the gateway.
    pub slot: u32,
    /// The session id substituted into the user name, minted by a [`SessionMinter`].
    pub id: String,
    /// The gateway's sticky window (`sticky` in the exits file): how long the provider pins a
    /// session id to one egress. `None` when the file does not say.
    pub sticky: Option<Duration>,
}

impl Exit {
    /// A plain exit: no tags, no session, system CAs.
    pub fn new(name: impl Into<String>, proxy: ProxyUrl) -> Self {
        Self {
            name: name.into(),
            proxy,
            tags: BTreeMap::new(),
            session: None,
            proxy_ca: None,
            rotate: false,
            stateless_per_exit: None,
            country: None,
            asn: None,
        }
    }

    /// The user name and password to send, with the session id substituted.
    pub fn credentials(&self) -> Option<(String, Option<&Secret>)> {
        let user = self.proxy.username.as_ref()?;
        let user = match &self.session {
            Some(session) => user.replace(SESSION_PLACEHOLDER, &session.id),
            None => user.clone(),
        };
        Some((user, self.proxy.password.as_ref()))
    }

    /// The credentials as a proxy handshake sends them: the user name (session substituted)
    /// and the password, empty when none is set.
    pub fn auth(&self) -> Option<(String, &str)> {
        self.credentials()
            .map(|(user, pass)| (user, pass.map_or("", |p| p.expose())))
    }

    /// The redacted proxy URL (password `***`, session placeholder kept).
    pub fn redacted_url(&self) -> String {
        self.proxy.redacted()
    }
}

/// Mints gateway session ids and remembers every id retired after a failure, so none is reused.
#[derive(Debug, Default)]
pub struct SessionMinter {
    retired: HashSet<String>,
}

impl SessionMinter {
    /// A minter with no retired ids.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh id: 16 lowercase hex digits, never one retired before.
    pub fn mint(&self) -> String {
        let mut rng = rand::rng();
        loop {
            let id = format!("{:016x}", rng.random::<u64>());
            if !self.retired.contains(&id) {
                return id;
            }
        }
    }

    /// Retires the exit's session id after a failure and gives the slot a fresh one.
    /// Does nothing for exits without a session.
    pub fn rotate(&mut self, exit: &mut Exit) {
        if let Some(session) = &mut exit.session {
            self.retired.insert(std::mem::take(&mut session.id));
            session.id = self.mint();
        }
    }

    /// Whether `id` was retired.
    pub fn is_retired(&self, id: &str) -> bool {
        self.retired.contains(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_of_an_exit_hides_the_password() {
        let exit = Exit::new(
            "e",
            ProxyUrl::parse("socks5h://u:hunter2%40x@127.0.0.1:1").unwrap(),
        );
        let debug = format!("{exit:?} {exit:#?}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(debug.contains("***"));
        assert_eq!(exit.credentials().unwrap().1.unwrap().expose(), "hunter2@x");
    }

    #[test]
    fn rotated_session_ids_are_never_reused() {
        let minter_url = ProxyUrl::parse("http://user-{session}:pw@127.0.0.1:1").unwrap();
        let mut minter = SessionMinter::new();
        let mut exit = Exit {
            name: "gw#1".into(),
            proxy: minter_url,
            tags: BTreeMap::new(),
            session: Some(Session {
                slot: 1,
                id: minter.mint(),
                sticky: None,
            }),
            proxy_ca: None,
            rotate: false,
            stateless_per_exit: None,
            country: None,
            asn: None,
        };
        let mut seen = HashSet::new();
        for _ in 0..50 {
            let id = exit.session.as_ref().unwrap().id.clone();
            assert!(seen.insert(id.clone()), "id {id} came back");
            let (user, _) = exit.credentials().unwrap();
            assert_eq!(user, format!("user-{id}"));
            minter.rotate(&mut exit);
            assert!(minter.is_retired(&id));
        }
    }
}
