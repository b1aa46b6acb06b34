//! Who may use which exit: exit `n` is the user name `exit-<n>`, with the one shared password.
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

    /// The exit number `user` with `password` opens, if the pair is valid.
    pub fn exit_of(&self, user: &[u8], password: &[u8]) -> Option<usize> {
        if password != self.password.as_bytes() {
            return None;
        }
        let number = std::str::from_utf8(user).ok()?.strip_prefix(USER_PREFIX)?;
        // `usize::from_str` accepts a leading `+`; one spelling per exit only.
        if !number.bytes().all(|b| b.is_ascii_digit())
            || number.len() > 1 && number.starts_with('0')
        {
            return None;
        }
        let index: usize = number.parse().ok()?;
        (index < self.exits).then_some(index)
    }
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
        assert_eq!(users.exit_of(b"exit-0", b"pw"), Some(0));
        assert_eq!(users.exit_of(b"exit-9", b"pw"), Some(9));
        for user in [
            &b"exit-10"[..],
            b"exit-+1",
            b"exit-01",
            b"exit-",
            b"exit-x",
            b"user-1",
            b"\xff",
        ] {
            assert_eq!(users.exit_of(user, b"pw"), None, "{user:?}");
        }
        assert_eq!(users.exit_of(b"exit-1", b"pw2"), None);
        assert_eq!(user_name(7), "exit-7");
        assert!(!format!("{users:?}").contains("pw\""));
    }
}
