//! A node's heartbeat thread: keep the lease alive, reconcile the epoch, rejoin after
//! the lease was lost.
//!
//! A `dafsd` with etcd membership needs its lease renewed well within the TTL whatever
//! its request threads are doing, so this is the one background thread of the crate.
//! It beats every third of the TTL (so two beats may fail before the lease expires),
//! publishes the map in force after each beat, and when etcd says the lease is gone
//! (the node was cut off longer than the TTL) joins again under a new lease, which
//! bumps the epoch as any join does. An etcd that cannot be reached is recorded and
//! retried at the next beat; the node keeps its last map meanwhile.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::etcd::{EtcdError, LeaseId};
use crate::membership::{Membership, MembershipError, Registration};
use crate::placement::{Member, PlacementMap};

/// Shortest interval between beats, whatever the TTL.
pub const BEAT_INTERVAL_MIN: Duration = Duration::from_millis(100);

/// What the thread publishes.
#[derive(Debug, Clone)]
struct State {
    /// Shared, so a server can check every request against it without copying it.
    map: Arc<PlacementMap>,
    lease: LeaseId,
    last_error: Option<MembershipError>,
    rejoins: u64,
}

struct Shared {
    state: Mutex<State>,
    stop: Mutex<bool>,
    wake: Condvar,
}

/// A running heartbeat (see the module documentation). Dropping it stops the thread
/// without leaving: the lease then expires as after a crash. [`leave`](Self::leave)
/// leaves cleanly.
pub struct Heartbeat {
    shared: Arc<Shared>,
    membership: Membership,
    member: Member,
    thread: Option<JoinHandle<()>>,
}

impl Heartbeat {
    /// Join as `member` with a lease of `ttl_s` (errors come back here), then beat in
    /// a background thread.
    pub fn start(
        membership: Membership,
        member: Member,
        ttl_s: u64,
    ) -> Result<Heartbeat, MembershipError> {
        let (reg, map) = membership.join(member.clone(), ttl_s)?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                map: Arc::new(map),
                lease: reg.lease,
                last_error: None,
                rejoins: 0,
            }),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let interval = Duration::from_millis(ttl_s * 1000 / 3).max(BEAT_INTERVAL_MIN);
        let thread = {
            let (shared, membership) = (shared.clone(), membership.clone());
            thread::Builder::new()
                .name("dafs-heartbeat".into())
                .spawn(move || beat_loop(&shared, &membership, reg, ttl_s, interval))
                .expect("spawn the heartbeat thread")
        };
        Ok(Heartbeat { shared, membership, member, thread: Some(thread) })
    }

    /// The placement map after the last successful beat.
    pub fn map(&self) -> PlacementMap {
        (*self.map_shared()).clone()
    }

    /// The placement map after the last successful beat, shared (no copy).
    pub fn map_shared(&self) -> Arc<PlacementMap> {
        self.shared.state.lock().expect("heartbeat state lock").map.clone()
    }

    /// The lease currently held.
    pub fn lease(&self) -> LeaseId {
        self.state().lease
    }

    /// The error of the last beat, if it failed (cleared by the next success).
    pub fn last_error(&self) -> Option<MembershipError> {
        self.state().last_error
    }

    /// How many times the node had to join again after losing its lease.
    pub fn rejoins(&self) -> u64 {
        self.state().rejoins
    }

    /// Stop beating and leave the cluster (revoke the lease, bump the epoch).
    pub fn leave(mut self) -> Result<Option<PlacementMap>, MembershipError> {
        self.stop_thread();
        let lease = self.lease();
        self.membership.leave(Registration { member: self.member.clone(), lease })
    }

    fn state(&self) -> State {
        self.shared.state.lock().expect("heartbeat state lock").clone()
    }

    fn stop_thread(&mut self) {
        *self.shared.stop.lock().expect("heartbeat stop lock") = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            // A panic in the thread has already been reported; nothing to add here.
            let _ = t.join();
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

fn beat_loop(
    shared: &Shared,
    m: &Membership,
    mut reg: Registration,
    ttl_s: u64,
    interval: Duration,
) {
    loop {
        {
            let stop = shared.stop.lock().expect("heartbeat stop lock");
            let (stop, _) = shared
                .wake
                .wait_timeout_while(stop, interval, |s| !*s)
                .expect("heartbeat stop lock");
            if *stop {
                return;
            }
        }
        let result = match m.heartbeat(&reg) {
            Err(MembershipError::Etcd(EtcdError::LeaseExpired(_))) => {
                rejoin(shared, m, &mut reg, ttl_s)
            }
            other => other,
        };
        let mut st = shared.state.lock().expect("heartbeat state lock");
        match result {
            Ok(map) => {
                if *st.map != map {
                    st.map = Arc::new(map);
                }
                st.last_error = None;
            }
            Err(e) => st.last_error = Some(e),
        }
        st.lease = reg.lease;
    }
}

fn rejoin(
    shared: &Shared,
    m: &Membership,
    reg: &mut Registration,
    ttl_s: u64,
) -> Result<PlacementMap, MembershipError> {
    let (new_reg, map) = m.join(reg.member.clone(), ttl_s)?;
    *reg = new_reg;
    shared.state.lock().expect("heartbeat state lock").rejoins += 1;
    Ok(map)
}
