//! Who may use which exit: exit `n` is the user name `exit-<n>`, with the one shared password.
//! As a gateway, exit `n` also takes `exit-<n>-sessid-<id>` (1 to 64 letters and digits): a
//! sticky session of its own, counted apart ([`crate::tally`]).
//!
//! The password is never printed or logged; only the exits file the generator writes holds it.

/// What every user name starts with; the exit's number follows.
pub const USER_PREFIX: &str = "exit-";

/// The credentials the simulator accepts.
pub struct Users {
    exits: usize,
    password: String,
}

impl std::fmt::Debug for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Users")
            .field("exits", &self.exits)
            .field("password", &"***")
            .finish()
    }
}

impl Users {
    /// Exits `0..exits`, all with `password`.
    pub fn new(exits: usize, password: String) -> Self {
        Self { exits, password }
    }

    /// The exit (and session) `user` with `password` opens, if the pair is valid.
    pub fn exit_of(&self, user: &[u8], password: &[u8]) -> Option<Holder> {
        if password != self.password.as_bytes() {
            return None;
        }
        let user = std::str::from_utf8(user).ok()?.strip_prefix(USER_PREFIX)?;
        let (number, session) = match user.split_once(SESSION_INFIX) {
            Some((number, id)) => {
                let valid =
                    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric());
                (number, Some(id.to_owned()).filter(|_| valid)?.into())
            }
            None => (user, None),
        };
        // `usize::from_str` accepts a leading `+`; one spelling per exit only.
        if !number.bytes().all(|b| b.is_ascii_digit())
            || number.len() > 1 && number.starts_with('0')
        {
            return None;
        }
        let index: usize = number.parse().ok()?;
        (index < self.exits).then_some(Holder {
            exit: index,
            session,
        })
    }
}

/// What separates a gateway user name's exit from its session id.
pub const SESSION_INFIX: &str = "-sessid-";

/// Who opened a tunnel: an exit, and the gateway session it asked for, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The exit's number.
    pub exit: usize,
    /// The sticky session id.
    pub session: Option<String>,
}

/// The user name of exit `index`.
pub fn user_name(index: usize) -> String {
    format!("{USER_PREFIX}{index}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_spelling_per_exit_and_the_password_must_match() {
        let users = Users::new(10, "pw".into());
        let plain = |exit| {
            Some(Holder {
                exit,
                session: None,
            })
        };
        assert_eq!(users.exit_of(b"exit-0", b"pw"), plain(0));
        assert_eq!(users.exit_of(b"exit-9", b"pw"), plain(9));
        assert_eq!(
            users.exit_of(b"exit-3-sessid-ab12", b"pw"),
            Some(Holder {
                exit: 3,
                session: Some("ab12".into())
            })
        );
        for user in [
            &b"exit-10"[..],
            b"exit-+1",
            b"exit-01",
            b"exit-",
            b"exit-x",
            b"user-1",
            b"\xff",
            b"exit-3-sessid-",
            b"exit-3-sessid-a:b",
            b"exit-x-sessid-ab",
        ] {
            assert_eq!(users.exit_of(user, b"pw"), None, "{user:?}");
        }
        assert_eq!(users.exit_of(b"exit-1", b"pw2"), None);
        assert_eq!(user_name(7), "exit-7");
        assert!(!format!("{users:?}").contains("pw\""));
    }
}
