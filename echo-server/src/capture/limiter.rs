//! The limits on open connections, `--max-connections` in total and `--per-ip-connections` per
//! address: an admitted connection holds a [`Permit`], and gives its place back when it drops.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Counts open connections, in total and per IP address.
#[derive(Debug)]
pub(crate) struct Limiter {
    max_total: usize,
    max_per_ip: usize,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// Why a connection was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// `--max-connections` reached.
    Total,
    /// `--per-ip-connections` reached for this address.
    PerIp,
}

/// One admitted connection's place in the [`Limiter`]; released on drop.
#[derive(Debug)]
pub(crate) struct Permit {
    limiter: Arc<Limiter>,
    ip: IpAddr,
}

impl Limiter {
    pub(crate) fn new(max_total: usize, max_per_ip: usize) -> Self {
        Self {
            max_total,
            max_per_ip,
            open: Mutex::new(Open::default()),
        }
    }

    /// Admits a connection from `ip`, or says which limit refuses it.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Permit, Refused> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.total >= self.max_total {
            return Err(Refused::Total);
        }
        let from_ip = open.per_ip.entry(ip).or_insert(0);
        if *from_ip >= self.max_per_ip {
            return Err(Refused::PerIp);
        }
        *from_ip += 1;
        open.total += 1;
        Ok(Permit {
            limiter: Arc::clone(self),
            ip,
        })
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut open = self
            .limiter
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        open.total = open.total.saturating_sub(1);
        if let Some(from_ip) = open.per_ip.get_mut(&self.ip) {
            *from_ip = from_ip.saturating_sub(1);
            if *from_ip == 0 {
                open.per_ip.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_enforces_total_and_per_ip_and_releases_on_drop() {
        let limiter = Arc::new(Limiter::new(3, 2));
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        let first = limiter.admit(a).expect("first");
        let _second = limiter.admit(a).expect("second");
        assert_eq!(limiter.admit(a).err(), Some(Refused::PerIp));
        let _third = limiter.admit(b).expect("other ip");
        assert_eq!(limiter.admit(b).err(), Some(Refused::Total));
        drop(first);
        assert!(limiter.admit(a).is_ok());
    }
}
