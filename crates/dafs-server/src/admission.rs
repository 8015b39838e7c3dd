//! Connection admission: who may hold a connection before proving anything.
//!
//! Every connection counts against `connections_max` (as before) and against its
//! source address's `connections_per_addr_max` (both refused at accept). Until its
//! session is authenticated (SESSION_AUTH with a shared secret; SESSION_CREATE or
//! SESSION_BIND without one) it is also *unauthenticated*, and the workers' sweep (every
//! 100 ms) keeps those within `connections_unauth_max` by closing the oldest first, and
//! closes any that passed `handshake_timeout_ms`. A new client is never refused because
//! idle sockets hold the unauthenticated share — they are evicted for it — and the rest
//! of `connections_max` stays free for authenticated clients.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use crate::live::LiveCount;

/// A new connection refused at accept: `connections_per_addr_max` connections from its
/// address are open.
#[derive(Debug, PartialEq, Eq)]
pub struct PerAddrRefusal;

pub struct Admission {
    /// Connections open now per source address (TCP only; shared-memory peers run on
    /// this host and have no address). Entries vanish at zero, so the map holds at most
    /// `connections_max` entries.
    per_addr: Mutex<HashMap<IpAddr, usize>>,
    /// Connections whose session has not authenticated yet.
    pub unauth: LiveCount,
}

impl Default for Admission {
    fn default() -> Self {
        Admission {
            per_addr: Mutex::new(HashMap::new()),
            unauth: LiveCount::new("unauthenticated connections"),
        }
    }
}

impl Admission {
    /// Admit a new (unauthenticated) connection from `addr` unless its address is at
    /// `per_addr_max`. On success the caller must later call
    /// [`Admission::authenticated`] (at most once) and [`Admission::closed`] with the
    /// same address.
    pub fn admit(&self, addr: Option<IpAddr>, per_addr_max: usize) -> Result<(), PerAddrRefusal> {
        if let Some(a) = addr {
            let mut m = self.per_addr.lock().unwrap();
            let n = m.entry(a).or_insert(0);
            if *n >= per_addr_max {
                assert!(*n > 0, "per_addr_max is at least 1 (validated)");
                return Err(PerAddrRefusal);
            }
            *n += 1;
        }
        // Bounded by `connections_max`, which the caller checked first.
        let counted = self.unauth.try_acquire(usize::MAX);
        assert!(counted, "fewer than usize::MAX connections exist");
        Ok(())
    }

    /// The connection's session authenticated: it no longer counts as unauthenticated.
    pub fn authenticated(&self) {
        self.unauth.release();
    }

    /// The connection closed (`authenticated`: whether [`Admission::authenticated`] ran).
    pub fn closed(&self, addr: Option<IpAddr>, authenticated: bool) {
        if !authenticated {
            self.unauth.release();
        }
        if let Some(a) = addr {
            let mut m = self.per_addr.lock().unwrap();
            let n = m.get_mut(&a).expect("a closing connection from this address was admitted");
            *n -= 1;
            if *n == 0 {
                m.remove(&a);
            }
        }
    }

    /// Connections open now from `addr`.
    pub fn from_addr(&self, addr: IpAddr) -> usize {
        self.per_addr.lock().unwrap().get(&addr).copied().unwrap_or(0)
    }
}

/// The source address of a peer as the transports print it ("1.2.3.4:5", "[::1]:5");
/// None for peers without one (shared memory).
pub fn peer_ip(peer: &str) -> Option<IpAddr> {
    peer.parse::<std::net::SocketAddr>().ok().map(|a| a.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_per_address_and_counts_unauthenticated() {
        let a = Admission::default();
        let x: IpAddr = "127.0.0.2".parse().unwrap();
        let y: IpAddr = "127.0.0.3".parse().unwrap();
        assert_eq!(a.admit(Some(x), 2), Ok(()));
        assert_eq!(a.admit(Some(x), 2), Ok(()));
        assert_eq!(a.admit(Some(x), 2), Err(PerAddrRefusal));
        assert_eq!(a.unauth.get(), 2, "a refusal takes nothing");
        assert_eq!(a.admit(Some(y), 2), Ok(()));
        a.authenticated();
        assert_eq!(a.unauth.get(), 2);
        assert_eq!(a.admit(None, 2), Ok(()), "no address: no cap");
        a.closed(Some(x), true);
        a.closed(Some(x), false);
        assert_eq!(a.from_addr(x), 0);
        assert_eq!(a.from_addr(y), 1);
        assert_eq!(a.unauth.get(), 2);
        assert_eq!(peer_ip("127.0.0.9:77"), Some("127.0.0.9".parse().unwrap()));
        assert_eq!(peer_ip("shm:pid 5"), None);
    }
}
