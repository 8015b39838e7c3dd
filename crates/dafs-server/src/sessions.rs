//! The server-wide session table: which sessions exist, which connection (if any) each
//! is bound to, the lease of sessions whose connection broke, and fenced clients.
//!
//! A session's state (slots, reply cache, open files) is owned by the connection it is
//! bound to and touched only by that connection's worker thread. When the connection
//! breaks, the state is *parked* here for the lease; a SESSION_BIND on a new connection
//! (any worker) takes it back. When the lease passes, the state is released (open files
//! closed, locks dropped) and a later bind answers BADSESSION.
//!
//! A session bound to a connection the client has given up on (half-open TCP) is
//! *revoked*: the table sets a flag and wakes the workers, the owning worker closes that
//! connection and parks the session, and the client's bind (answered DELAY meanwhile)
//! succeeds on its retry. Fencing revokes with "destroy" instead of "park".

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// What the owner of a bound session must do (set by another thread).
pub const REVOKE_NONE: u8 = 0;
/// Close the connection, park the session (another connection wants to bind it).
pub const REVOKE_DETACH: u8 = 1;
/// Close the connection and release the session (fenced or killed by the administrator).
pub const REVOKE_DESTROY: u8 = 2;

/// What every thread may read about a session (for `dafs admin sessions`, fencing and
/// revocation). Updated by the owning worker with relaxed atomics: a listing is a
/// snapshot, not a transaction.
#[derive(Debug)]
pub struct SessionInfo {
    pub id: u64,
    pub client_id: String,
    pub created: SystemTime,
    pub slots_granted: u32,
    pub slots_busy: AtomicU32,
    pub target_highest: AtomicU32,
    pub opens: AtomicU32,
    pub requests: AtomicU64,
    pub connected: AtomicBool,
    pub binds: AtomicU32,
    pub revoke: AtomicU8,
    pub peer: Mutex<String>,
    /// Reply cache bytes held now.
    pub cache_bytes: AtomicU64,
    /// The nonces a SESSION_BIND may prove over (rotated by every bind, under the table
    /// lock, so a bind message cannot be replayed).
    pub bind_nonce: Mutex<BindNonces>,
    /// The key of this session's SESSION_BIND proofs (`auth::bind_key` of the shared
    /// secret and the session token only its creator received).
    pub bind_key: [u8; 32],
    /// The worker whose connection holds the session now (set at every create and
    /// bind): where a trunking bind hands its connection over.
    pub(crate) owner: Mutex<Option<Arc<crate::WorkerLink>>>,
}

impl SessionInfo {
    pub fn new(
        id: u64,
        client_id: String,
        slots: u32,
        peer: String,
        bind_nonce: [u8; 32],
        bind_key: [u8; 32],
    ) -> Self {
        SessionInfo {
            id,
            client_id,
            created: SystemTime::now(),
            slots_granted: slots,
            slots_busy: AtomicU32::new(0),
            target_highest: AtomicU32::new(slots - 1),
            opens: AtomicU32::new(0),
            requests: AtomicU64::new(0),
            connected: AtomicBool::new(true),
            binds: AtomicU32::new(0),
            revoke: AtomicU8::new(REVOKE_NONE),
            peer: Mutex::new(peer),
            cache_bytes: AtomicU64::new(0),
            bind_nonce: Mutex::new(BindNonces::new(bind_nonce)),
            bind_key,
            owner: Mutex::new(None),
        }
    }
}

/// Bind nonces a session keeps (the newest handed out, and before it those a client
/// may still hold), and client nonces it remembers: how many bind replies in a row a
/// client may lose, or binds it gave up on may reach the server late.
pub const BIND_NONCES_MAX: usize = 16;

/// What a SESSION_BIND may prove over: a nonce a bind reply (or SESSION_CREATE) handed
/// out. Normally the newest. But a bind reply can be lost with the connection that
/// carried it (the server rotated, the client never learned the new nonce), and a bind
/// the client gave up on can be read after the client's next bind has succeeded (it
/// takes the session and hands out a nonce nobody reads). So every nonce handed out
/// since the last one a bind proved over is accepted, each bind with a client nonce
/// not seen before: a captured bind replayed carries a used client nonce, and is refused.
/// A client only moves forward (it keeps the nonce of the last reply it read), so the
/// nonces older than one a bind proved over are dropped.
#[derive(Debug)]
pub struct BindNonces {
    /// Nonces handed out, oldest first; the last is the newest. Never empty.
    pub recent: VecDeque<[u8; 32]>,
    /// Client nonces of accepted binds, oldest first.
    pub used: VecDeque<[u8; 32]>,
}

impl BindNonces {
    fn new(first: [u8; 32]) -> Self {
        BindNonces { recent: VecDeque::from([first]), used: VecDeque::new() }
    }

    /// The position in `recent` of the newest nonce `verify` accepts for a bind with
    /// `client_nonce`, or None (a used client nonce, or no nonce verifies).
    fn check(&self, client_nonce: &[u8; 32], verify: impl Fn(&[u8; 32]) -> bool) -> Option<usize> {
        if self.used.contains(client_nonce) {
            return None;
        }
        (0..self.recent.len()).rev().find(|&i| verify(&self.recent[i]))
    }

    /// A bind proved over `recent[at]` with `client_nonce`: forget the older nonces,
    /// hand out `next`.
    fn rotate(&mut self, at: usize, client_nonce: [u8; 32], next: [u8; 32]) {
        assert!(at < self.recent.len());
        self.recent.drain(..at);
        self.recent.push_back(next);
        if self.recent.len() > BIND_NONCES_MAX {
            self.recent.pop_front();
        }
        self.used.push_back(client_nonce);
        if self.used.len() > BIND_NONCES_MAX {
            self.used.pop_front();
        }
        assert!(!self.recent.is_empty() && self.recent.len() <= BIND_NONCES_MAX);
    }
}

struct Entry<S> {
    info: Arc<SessionInfo>,
    /// Some while no connection holds the session: the state and when its lease ends.
    parked: Option<(Box<S>, Instant)>,
}

/// A session's state removed from the table, with its shared information.
pub type Released<S> = (Box<S>, Arc<SessionInfo>);

/// Outcome of a trunking bind (one that adds its connection to the session).
pub(crate) enum Trunk {
    /// Bound to a connection of the worker `owner`: hand the new connection over to it.
    /// The bind nonce rotates only when it joins (`rotate_for_trunk`): a connection that
    /// joins nothing leaves the client's nonce valid.
    Add(Arc<SessionInfo>, Arc<crate::WorkerLink>, TrunkProof),
    /// The session has no connection (parked): bind it as an ordinary SESSION_BIND does.
    Parked,
    Unknown,
    WrongClient,
    AuthFailed,
}

/// Which bind nonce a trunking bind proved over, to rotate when it joins.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TrunkProof {
    pub(crate) nonce: [u8; 32],
    pub(crate) client_nonce: [u8; 32],
    pub(crate) next_nonce: [u8; 32],
}

/// Outcome of a bind attempt.
pub enum Take<S> {
    /// The session's state, now bound to the caller.
    Bound(Box<S>, Arc<SessionInfo>),
    /// No such session (never existed, destroyed, or its lease expired).
    Unknown,
    /// The session belongs to another client id.
    WrongClient,
    /// The bind's proof did not verify: nothing changed (no revocation either).
    AuthFailed,
    /// Still bound to another connection; that connection is being revoked: retry.
    Busy,
}

pub struct SessionTable<S> {
    inner: Mutex<HashMap<u64, Entry<S>>>,
    /// Client ids (exact, or a prefix ending in '*') refused by the administrator.
    fenced: Mutex<HashSet<String>>,
    /// Bumped whenever some session's `revoke` flag is set, so workers scan their
    /// connections only when something changed.
    pub revoke_epoch: AtomicU64,
}

impl<S> Default for SessionTable<S> {
    fn default() -> Self {
        SessionTable {
            inner: Mutex::new(HashMap::new()),
            fenced: Mutex::new(HashSet::new()),
            revoke_epoch: AtomicU64::new(0),
        }
    }
}

fn matches_pattern(pattern: &str, client_id: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => client_id.starts_with(prefix),
        None => pattern == client_id,
    }
}

impl<S> SessionTable<S> {
    /// Register a new session bound to a connection.
    pub fn insert(&self, info: Arc<SessionInfo>) {
        let prev = self.inner.lock().unwrap().insert(info.id, Entry { info, parked: None });
        assert!(prev.is_none(), "session ids are random 63-bit values; a collision is a bug");
    }

    /// The session ended for good (SESSION_DESTROY, fencing): forget it.
    pub fn remove(&self, id: u64) {
        self.inner.lock().unwrap().remove(&id);
    }

    /// The connection holding the session broke: keep its state for `lease`.
    pub fn park(&self, state: Box<S>, info: &Arc<SessionInfo>, lease: Duration) {
        info.connected.store(false, Relaxed);
        info.revoke.store(REVOKE_NONE, Relaxed);
        let mut m = self.inner.lock().unwrap();
        if let Some(e) = m.get_mut(&info.id) {
            e.parked = Some((state, Instant::now() + lease));
        }
    }

    /// A SESSION_BIND: take a parked session, or revoke the connection holding it — only
    /// after `verify` accepted the bind's proof (made with `client_nonce`) against a bind
    /// nonce the session accepts ([`BindNonces`]), so a client without the session's bind
    /// key can neither take nor disturb the session. On success the bind nonce becomes
    /// `next_nonce` atomically with the take.
    pub fn take(
        &self,
        id: u64,
        client_id: &[u8],
        client_nonce: &[u8; 32],
        verify: impl Fn(&[u8; 32], &[u8; 32]) -> bool,
        next_nonce: [u8; 32],
    ) -> Take<S> {
        let mut m = self.inner.lock().unwrap();
        let Some(e) = m.get_mut(&id) else { return Take::Unknown };
        if e.info.client_id.as_bytes() != client_id {
            return Take::WrongClient;
        }
        let mut nonce = e.info.bind_nonce.lock().unwrap();
        let key = e.info.bind_key;
        let Some(at) = nonce.check(client_nonce, |n| verify(n, &key)) else {
            return Take::AuthFailed;
        };
        match e.parked.take() {
            Some((state, _)) => {
                nonce.rotate(at, *client_nonce, next_nonce);
                e.info.connected.store(true, Relaxed);
                e.info.binds.fetch_add(1, Relaxed);
                drop(nonce);
                Take::Bound(state, e.info.clone())
            }
            None => {
                if e.info
                    .revoke
                    .compare_exchange(REVOKE_NONE, REVOKE_DETACH, Relaxed, Relaxed)
                    .is_ok()
                {
                    self.revoke_epoch.fetch_add(1, Relaxed);
                }
                Take::Busy
            }
        }
    }

    /// A trunking SESSION_BIND: after the same proof as [`Self::take`], name the worker
    /// holding the session so the new connection joins it there; nothing is revoked.
    pub(crate) fn trunk(
        &self,
        id: u64,
        client_id: &[u8],
        client_nonce: &[u8; 32],
        verify: impl Fn(&[u8; 32], &[u8; 32]) -> bool,
        next_nonce: [u8; 32],
    ) -> Trunk {
        let m = self.inner.lock().unwrap();
        let Some(e) = m.get(&id) else { return Trunk::Unknown };
        if e.info.client_id.as_bytes() != client_id {
            return Trunk::WrongClient;
        }
        if e.parked.is_some() {
            return Trunk::Parked;
        }
        let nonce = e.info.bind_nonce.lock().unwrap();
        let key = e.info.bind_key;
        let Some(at) = nonce.check(client_nonce, |n| verify(n, &key)) else {
            return Trunk::AuthFailed;
        };
        let Some(owner) = e.info.owner.lock().unwrap().clone() else {
            // Bound, but its connection's worker never registered (cannot happen: the
            // owner is set before the session enters the table's bound state).
            return Trunk::Parked;
        };
        let proof = TrunkProof { nonce: nonce.recent[at], client_nonce: *client_nonce, next_nonce };
        Trunk::Add(e.info.clone(), owner, proof)
    }

    /// A trunked connection is joining its session: the bind takes effect now, as a
    /// [`Self::take`] would have — if the nonce it proved over is still accepted (no
    /// bind over a newer one got in first) and its client nonce is still unused (no
    /// replay of it joined). False: refuse the join; nothing changed, so the client's
    /// nonce stays valid.
    pub(crate) fn rotate_for_trunk(&self, info: &SessionInfo, p: &TrunkProof) -> bool {
        let mut nonce = info.bind_nonce.lock().unwrap();
        if nonce.used.contains(&p.client_nonce) {
            return false;
        }
        let Some(at) = nonce.recent.iter().position(|n| *n == p.nonce) else { return false };
        nonce.rotate(at, p.client_nonce, p.next_nonce);
        info.binds.fetch_add(1, Relaxed);
        true
    }

    /// The parked session parked longest ago (its lease ends first), removed from the
    /// table: released to make room when `sessions_max` is reached.
    pub fn take_oldest_parked(&self) -> Option<Released<S>> {
        let mut m = self.inner.lock().unwrap();
        let id = m
            .iter()
            .filter_map(|(id, e)| e.parked.as_ref().map(|(_, d)| (*d, *id)))
            .min()
            .map(|(_, id)| id)?;
        let e = m.remove(&id).expect("found under the same lock");
        let (s, _) = e.parked.expect("chosen because it is parked");
        Some((s, e.info))
    }

    /// Parked sessions whose lease has passed, removed from the table.
    pub fn expired(&self, now: Instant) -> Vec<Released<S>> {
        let mut m = self.inner.lock().unwrap();
        let ids: Vec<u64> = m
            .iter()
            .filter(|(_, e)| e.parked.as_ref().is_some_and(|(_, d)| *d <= now))
            .map(|(id, _)| *id)
            .collect();
        ids.into_iter()
            .filter_map(|id| {
                let e = m.remove(&id)?;
                let (s, _) = e.parked?;
                Some((s, e.info))
            })
            .collect()
    }

    /// Fence `pattern`: refuse its future sessions and binds; returns the parked sessions
    /// (to release now) and flags the bound ones for destruction by their workers.
    pub fn fence(&self, pattern: &str) -> (Vec<Released<S>>, usize) {
        self.fenced.lock().unwrap().insert(pattern.to_string());
        let mut m = self.inner.lock().unwrap();
        let ids: Vec<u64> = m
            .iter()
            .filter(|(_, e)| matches_pattern(pattern, &e.info.client_id))
            .map(|(id, _)| *id)
            .collect();
        let mut parked = Vec::new();
        let mut bound = 0;
        for id in ids {
            let e = m.get_mut(&id).unwrap();
            if e.parked.is_some() {
                let e = m.remove(&id).unwrap();
                parked.push((e.parked.unwrap().0, e.info));
            } else {
                e.info.revoke.store(REVOKE_DESTROY, Relaxed);
                bound += 1;
            }
        }
        if bound > 0 {
            self.revoke_epoch.fetch_add(1, Relaxed);
        }
        (parked, bound)
    }

    /// Lift a fence; true if it existed.
    pub fn unfence(&self, pattern: &str) -> bool {
        self.fenced.lock().unwrap().remove(pattern)
    }

    pub fn is_fenced(&self, client_id: &str) -> bool {
        self.fenced.lock().unwrap().iter().any(|p| matches_pattern(p, client_id))
    }

    pub fn fenced_list(&self) -> Vec<String> {
        let mut v: Vec<String> = self.fenced.lock().unwrap().iter().cloned().collect();
        v.sort();
        v
    }

    /// Sessions of `client_id` bound to a connection now.
    pub fn bound_count(&self, client_id: &str) -> usize {
        self.inner
            .lock()
            .unwrap()
            .values()
            .filter(|e| e.parked.is_none() && e.info.client_id == client_id)
            .count()
    }

    /// Every session (for listings), with its lease end if parked.
    pub fn list(&self) -> Vec<(Arc<SessionInfo>, Option<Instant>)> {
        let m = self.inner.lock().unwrap();
        let mut v: Vec<_> =
            m.values().map(|e| (e.info.clone(), e.parked.as_ref().map(|(_, d)| *d))).collect();
        v.sort_by_key(|(i, _)| i.created);
        v
    }

    /// Set the target highest slot of a session (server-directed flow control); the
    /// owning worker applies it on its next request.
    pub fn set_target(&self, id: u64, target: u32) -> Option<u32> {
        let m = self.inner.lock().unwrap();
        let e = m.get(&id)?;
        let t = target.min(e.info.slots_granted - 1);
        e.info.target_highest.store(t, Relaxed);
        Some(t)
    }

    /// Flag one session for destruction (admin "kill").
    pub fn kill(&self, id: u64) -> Option<Box<S>> {
        let mut m = self.inner.lock().unwrap();
        let e = m.get_mut(&id)?;
        if e.parked.is_some() {
            return m.remove(&id).and_then(|e| e.parked.map(|p| p.0));
        }
        e.info.revoke.store(REVOKE_DESTROY, Relaxed);
        self.revoke_epoch.fetch_add(1, Relaxed);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table holding session 5 of client "c1".
    fn one_session() -> (SessionTable<u32>, Arc<SessionInfo>) {
        let t: SessionTable<u32> = SessionTable::default();
        let i = info(5, "c1");
        t.insert(i.clone());
        (t, i)
    }

    /// A bind proof check that accepts exactly the bind nonce `want`.
    fn over(want: [u8; 32]) -> impl Fn(&[u8; 32], &[u8; 32]) -> bool {
        move |n, _| *n == want
    }

    fn info(id: u64, client: &str) -> Arc<SessionInfo> {
        Arc::new(SessionInfo::new(id, client.into(), 4, "peer".into(), [0; 32], [3; 32]))
    }

    #[test]
    fn park_take_expire() {
        let t: SessionTable<u32> = SessionTable::default();
        let i = info(5, "c1");
        t.insert(i.clone());
        assert!(
            matches!(t.take(5, b"c1", &[9; 32], |_, _| false, [1; 32]), Take::AuthFailed),
            "no proof: nothing happens"
        );
        assert_eq!(i.revoke.load(Relaxed), REVOKE_NONE);
        assert!(
            matches!(t.take(5, b"c1", &[9; 32], |_, _| true, [1; 32]), Take::Busy),
            "bound elsewhere: revoke and retry"
        );
        assert_eq!(i.revoke.load(Relaxed), REVOKE_DETACH);
        t.park(Box::new(42), &i, Duration::from_secs(60));
        assert!(matches!(t.take(5, b"other", &[9; 32], |_, _| true, [1; 32]), Take::WrongClient));
        match t.take(5, b"c1", &[9; 32], |n, k| *n == [0; 32] && *k == [3; 32], [1; 32]) {
            Take::Bound(s, _) => assert_eq!(*s, 42),
            _ => panic!("parked session binds"),
        }
        assert_eq!(
            i.bind_nonce.lock().unwrap().recent.back(),
            Some(&[1; 32]),
            "nonce rotated with the take"
        );
        assert!(matches!(t.take(6, b"c1", &[9; 32], |_, _| true, [1; 32]), Take::Unknown));
        t.park(Box::new(43), &i, Duration::ZERO);
        let gone = t.expired(Instant::now());
        assert_eq!(gone.len(), 1);
        assert!(
            matches!(t.take(5, b"c1", &[9; 32], |_, _| true, [2; 32]), Take::Unknown),
            "expired: BADSESSION"
        );
    }

    #[test]
    fn oldest_parked_is_taken_first_and_bound_never() {
        let t: SessionTable<u32> = SessionTable::default();
        let (a, b, c) = (info(1, "a"), info(2, "b"), info(3, "c"));
        for i in [&a, &b, &c] {
            t.insert(i.clone());
        }
        t.park(Box::new(20), &b, Duration::from_secs(60));
        t.park(Box::new(30), &c, Duration::from_secs(90));
        assert_eq!(*t.take_oldest_parked().unwrap().0, 20);
        assert_eq!(*t.take_oldest_parked().unwrap().0, 30);
        assert!(t.take_oldest_parked().is_none(), "a bound session is never taken");
        assert_eq!(t.list().len(), 1);
    }

    #[test]
    fn fencing_by_exact_id_and_prefix() {
        let t: SessionTable<u32> = SessionTable::default();
        let a = info(1, "host-a:1");
        let b = info(2, "host-a:2");
        let c = info(3, "host-b:1");
        for i in [&a, &b, &c] {
            t.insert(i.clone());
        }
        t.park(Box::new(2), &b, Duration::from_secs(60));
        let (parked, bound) = t.fence("host-a:*");
        assert_eq!((parked.len(), bound), (1, 1));
        assert_eq!(a.revoke.load(Relaxed), REVOKE_DESTROY);
        assert_eq!(c.revoke.load(Relaxed), REVOKE_NONE);
        assert!(t.is_fenced("host-a:9") && !t.is_fenced("host-b:1"));
        assert!(t.unfence("host-a:*"));
        assert!(!t.is_fenced("host-a:9"));
    }

    /// Trunking binds take effect only when their connection joins: verified binds that
    /// never join rotate nothing (however many), a join after a bind over a newer nonce
    /// or a second join of one bind (a replay) is refused, and joins whose replies reach
    /// the client in any order leave it a nonce the session accepts.
    #[test]
    fn trunk_binds_rotate_only_when_they_join() {
        let (t, i) = one_session();
        for k in 0..2 * BIND_NONCES_MAX as u8 {
            // No worker registered: verified, then answered as for a parked session.
            let r = t.trunk(5, b"c1", &[100 + k; 32], over([0; 32]), [200; 32]);
            assert!(matches!(r, Trunk::Parked));
        }
        assert!(matches!(t.trunk(5, b"c1", &[1; 32], over([9; 32]), [2; 32]), Trunk::AuthFailed));
        assert_eq!(i.bind_nonce.lock().unwrap().recent, [[0; 32]], "nothing rotated");
        let proof = |nonce: u8, client: u8, next: u8| TrunkProof {
            nonce: [nonce; 32],
            client_nonce: [client; 32],
            next_nonce: [next; 32],
        };
        assert!(t.rotate_for_trunk(&i, &proof(0, 1, 10)));
        assert!(!t.rotate_for_trunk(&i, &proof(0, 1, 10)), "a replayed join");
        // Two binds made over nonce 0 on two new connections, joined in turn: the
        // client keeps whichever reply it reads last; both nonces stay accepted.
        assert!(t.rotate_for_trunk(&i, &proof(0, 2, 11)));
        assert_eq!(i.bind_nonce.lock().unwrap().recent, [[0; 32], [10; 32], [11; 32]]);
        // A bind over 10 makes 0 stale: a join proven over 0 after it is refused.
        assert!(t.rotate_for_trunk(&i, &proof(10, 3, 12)));
        assert!(!t.rotate_for_trunk(&i, &proof(0, 4, 13)), "older than a nonce proven since");
        assert_eq!(i.bind_nonce.lock().unwrap().recent, [[10; 32], [11; 32], [12; 32]]);
        // The client's next bind, whichever of 11 and 12 it holds, gets in.
        t.park(Box::new(1), &i, Duration::from_secs(60));
        assert!(matches!(t.take(5, b"c1", &[5; 32], over([11; 32]), [14; 32]), Take::Bound(..)));
    }

    /// A bind whose reply was lost: the client proves over the nonce it knows (now the
    /// previous one) with a fresh client nonce and gets in; a replay of a bind already
    /// made is refused.
    #[test]
    fn lost_bind_reply_retries_but_no_replay() {
        let (t, i) = one_session();
        t.park(Box::new(1), &i, Duration::from_secs(60));
        assert!(matches!(t.take(5, b"c1", &[1; 32], over([0; 32]), [10; 32]), Take::Bound(..)));
        t.park(Box::new(1), &i, Duration::from_secs(60));
        // The reply (carrying nonce 10) was lost: the client still proves over nonce 0.
        assert!(
            matches!(t.take(5, b"c1", &[1; 32], over([0; 32]), [11; 32]), Take::AuthFailed),
            "the same client nonce again: a replay"
        );
        assert!(matches!(t.take(5, b"c1", &[2; 32], over([0; 32]), [11; 32]), Take::Bound(..)));
        t.park(Box::new(1), &i, Duration::from_secs(60));
        assert!(matches!(t.take(5, b"c1", &[1; 32], over([0; 32]), [12; 32]), Take::AuthFailed));
        assert!(matches!(t.take(5, b"c1", &[2; 32], over([0; 32]), [12; 32]), Take::AuthFailed));
        // The current nonce (11) works, and afterwards nonce 0 is no longer accepted.
        assert!(matches!(t.take(5, b"c1", &[3; 32], over([11; 32]), [12; 32]), Take::Bound(..)));
        t.park(Box::new(1), &i, Duration::from_secs(60));
        assert!(matches!(t.take(5, b"c1", &[4; 32], over([0; 32]), [13; 32]), Take::AuthFailed));
        assert!(matches!(t.take(5, b"c1", &[3; 32], over([11; 32]), [13; 32]), Take::AuthFailed));
        assert!(matches!(t.take(5, b"c1", &[4; 32], over([11; 32]), [13; 32]), Take::Bound(..)));
    }

    /// A bind the client gave up on (its reply did not come in time) reaches the server
    /// only after the client's next bind, on a new connection, has succeeded: the late
    /// one proves over the nonce both were made with and takes the parked session, and
    /// hands out a nonce nobody reads. The client's nonce (from the reply it did get)
    /// must still be accepted — under load it was refused with AUTH_FAILED, which ended
    /// the session (`exactly_once::tcp` failed so, 2 runs in 6).
    #[test]
    fn a_late_abandoned_bind_does_not_lock_the_client_out() {
        let (t, i) = one_session();
        t.park(Box::new(1), &i, Duration::from_secs(60));
        // Connection Y: bind over nonce 0, reply (nonce 10) received; then Y is cut.
        assert!(matches!(t.take(5, b"c1", &[1; 32], over([0; 32]), [10; 32]), Take::Bound(..)));
        t.park(Box::new(1), &i, Duration::from_secs(60));
        // Connection X's bind, sent before Y's over nonce 0, is read only now.
        assert!(matches!(t.take(5, b"c1", &[2; 32], over([0; 32]), [11; 32]), Take::Bound(..)));
        t.park(Box::new(1), &i, Duration::from_secs(60));
        // The client knows nonce 10.
        assert!(matches!(t.take(5, b"c1", &[3; 32], over([10; 32]), [12; 32]), Take::Bound(..)));
        t.park(Box::new(1), &i, Duration::from_secs(60));
        // Replays stay refused, and nonces older than the one just proven are gone.
        assert!(matches!(t.take(5, b"c1", &[3; 32], over([10; 32]), [13; 32]), Take::AuthFailed));
        assert!(matches!(t.take(5, b"c1", &[4; 32], over([0; 32]), [13; 32]), Take::AuthFailed));
        assert!(matches!(t.take(5, b"c1", &[4; 32], over([12; 32]), [13; 32]), Take::Bound(..)));
    }

    /// However many bind replies are lost in a row, the nonces kept stay bounded and the
    /// client's last known nonce works until BIND_NONCES_MAX binds have passed it.
    #[test]
    fn bind_nonces_are_bounded() {
        let (t, i) = one_session();
        for k in 1..=BIND_NONCES_MAX as u8 {
            t.park(Box::new(1), &i, Duration::from_secs(60));
            let got = t.take(5, b"c1", &[k; 32], over([0; 32]), [100 + k; 32]);
            assert!(matches!(got, Take::Bound(..)), "retry {k}");
        }
        t.park(Box::new(1), &i, Duration::from_secs(60));
        assert!(matches!(t.take(5, b"c1", &[99; 32], over([0; 32]), [1; 32]), Take::AuthFailed));
        let n = i.bind_nonce.lock().unwrap();
        assert!(n.recent.len() <= BIND_NONCES_MAX && n.used.len() <= BIND_NONCES_MAX);
    }
}
