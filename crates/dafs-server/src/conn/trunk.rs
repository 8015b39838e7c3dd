//! Session trunking: one session's connections (a TCP session may be bound to up to
//! `SESSION_CONNECTIONS_MAX` of them, see docs/architecture.md, "Session trunking").
//!
//! A [`Trunk`] is what a [`super::Conn`] talks to: the connection the session was
//! created or bound on, plus the ones a trunking SESSION_BIND added (handed over to this
//! worker by the worker that accepted them, `lib.rs`). All of them are served by the
//! session's one worker, so the session's state keeps a single owner.
//!
//! **Which connection a reply takes**: the one that carried the request. Events are read
//! from every member in turn and the member an event came from becomes the *current*
//! channel, which every send, placement and pull goes to; a reply produced later (a job
//! of the I/O pool) first selects its request's channel again (`Conn::slot_chan`). A
//! READ_DIRECT's placement and its reply therefore share one stream, so the client
//! never sees the reply before the data. Replies answered from the reply cache go
//! where the retransmission came from.
//!
//! A member that breaks while others remain is dropped alone (`take_lost` tells the
//! connection, which gives back the slots of requests that were waiting there for
//! pulled data and the member's share of the connection limits); the session goes on
//! over the others. The last member breaking is the connection breaking.

use std::net::IpAddr;
use std::os::fd::RawFd;

use dafs_transport::{
    CountPatch, PlacementDst, PlacementLease, PlacementSrc, PutError, RemoteRegion, ServerConn,
    ServerEvent, TransportError,
};

struct Member {
    /// Never reused within the trunk: a request's channel names this member only.
    id: u32,
    t: Box<dyn ServerConn>,
    peer_ip: Option<IpAddr>,
}

/// A member that broke and was dropped: its channel id and admitted address.
pub(crate) struct Lost {
    pub(crate) id: u32,
    pub(crate) peer_ip: Option<IpAddr>,
}

pub struct Trunk {
    members: Vec<Member>,
    /// Index of the current member (sends go there).
    cur: usize,
    /// Where the next poll starts, so a member that streams requests cannot starve the
    /// others.
    next_poll: usize,
    next_id: u32,
    lost: Vec<Lost>,
}

impl Trunk {
    pub(crate) fn new(t: Box<dyn ServerConn>) -> Self {
        let peer_ip = crate::admission::peer_ip(&t.peer());
        Trunk {
            members: vec![Member { id: 0, t, peer_ip }],
            cur: 0,
            next_poll: 0,
            next_id: 1,
            lost: Vec::new(),
        }
    }

    /// The one connection of a trunk that has no others.
    pub(crate) fn into_single(mut self) -> Box<dyn ServerConn> {
        assert_eq!(self.members.len(), 1, "only an untrunked connection is handed over");
        self.members.pop().expect("one member").t
    }

    /// Connections the session is bound to now.
    pub(crate) fn len(&self) -> usize {
        self.members.len()
    }

    /// The channel of the current member (what a request being handled came on).
    pub(crate) fn channel(&self) -> u32 {
        self.members[self.cur].id
    }

    /// Make `id` the current channel; if that member is gone, the first one (a reply
    /// whose request's connection broke still goes out, on a connection the client
    /// reads).
    pub(crate) fn set_channel(&mut self, id: u32) {
        self.cur = self.members.iter().position(|m| m.id == id).unwrap_or(0);
    }

    /// True if channel `id` is a member.
    pub(crate) fn has_channel(&self, id: u32) -> bool {
        self.members.iter().any(|m| m.id == id)
    }

    /// Add a connection bound by a trunking SESSION_BIND; returns its channel.
    pub(crate) fn attach(&mut self, mut t: Box<dyn ServerConn>, peer_ip: Option<IpAddr>) -> u32 {
        t.set_msg_size_bytes_max(self.members[0].t.msg_size_bytes_max());
        let id = self.next_id;
        self.next_id += 1;
        self.members.push(Member { id, t, peer_ip });
        assert!(
            self.members.len() <= dafs_proto::limits::SESSION_CONNECTIONS_MAX as usize,
            "attach is called only below the limit"
        );
        id
    }

    /// Drop member `id` (its connection is given up: the client retransmitted one of
    /// its requests on another connection, or it broke). Never the last one.
    pub(crate) fn drop_channel(&mut self, id: u32) {
        if self.members.len() > 1 {
            if let Some(i) = self.members.iter().position(|m| m.id == id) {
                self.remove(i);
            }
        }
    }

    /// Members dropped since the last call.
    pub(crate) fn take_lost(&mut self) -> Vec<Lost> {
        std::mem::take(&mut self.lost)
    }

    /// Every member's descriptor (the worker watches them all under one token).
    pub(crate) fn fds(&self) -> Vec<RawFd> {
        self.members.iter().map(|m| m.t.raw_fd()).collect()
    }

    /// Every member's admitted address (their share of the connection limits).
    pub(crate) fn peer_ips(&self) -> Vec<Option<IpAddr>> {
        self.members.iter().map(|m| m.peer_ip).collect()
    }

    fn remove(&mut self, i: usize) {
        debug_assert!(self.members.len() > 1);
        let m = self.members.remove(i);
        self.lost.push(Lost { id: m.id, peer_ip: m.peer_ip });
        if self.cur == i {
            self.cur = 0;
        } else if self.cur > i {
            self.cur -= 1;
        }
        self.next_poll %= self.members.len();
    }

    /// `r` failed on member `i`: with other members left, drop it and go on (`Ok`);
    /// on the last one the whole connection has failed.
    fn member_failed<T>(
        &mut self,
        i: usize,
        r: Result<T, TransportError>,
    ) -> Result<(), TransportError> {
        match r {
            Ok(_) => Ok(()),
            Err(e) if self.members.len() > 1 && e.is_fatal() => {
                tracing::debug!(peer = %self.members[i].t.peer(), "trunked connection lost: {e}");
                self.remove(i);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn cur(&mut self) -> &mut dyn ServerConn {
        &mut *self.members[self.cur].t
    }
}

impl ServerConn for Trunk {
    fn raw_fd(&self) -> RawFd {
        self.members[0].t.raw_fd()
    }
    fn peer(&self) -> String {
        self.members[self.cur].t.peer()
    }
    fn msg_size_bytes_max(&self) -> usize {
        self.members[0].t.msg_size_bytes_max()
    }
    fn set_msg_size_bytes_max(&mut self, n: usize) {
        for m in &mut self.members {
            m.t.set_msg_size_bytes_max(n);
        }
    }
    fn poll_event(&mut self) -> Result<Option<ServerEvent>, TransportError> {
        let mut k = 0;
        while k < self.members.len() {
            let i = (self.next_poll + k) % self.members.len();
            match self.members[i].t.poll_event() {
                Ok(Some(ev)) => {
                    self.cur = i;
                    self.next_poll = (i + 1) % self.members.len();
                    return Ok(Some(ev));
                }
                Ok(None) => k += 1,
                r @ Err(_) => {
                    // Dropped (indices shift): look at the rest again from the start.
                    self.member_failed(i, r)?;
                    k = 0;
                }
            }
        }
        Ok(None)
    }
    fn recycle(&mut self, buf: Vec<u8>) {
        self.cur().recycle(buf)
    }
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        self.cur().send(msg)
    }
    fn put(
        &mut self,
        region: RemoteRegion,
        len: usize,
        fill: &mut dyn FnMut(&mut PlacementDst<'_>) -> std::io::Result<usize>,
    ) -> Result<usize, PutError> {
        self.cur().put(region, len, fill)
    }
    fn sends_files(&self, len: usize) -> bool {
        self.members[self.cur].t.sends_files(len)
    }
    fn put_file(
        &mut self,
        region: RemoteRegion,
        len: usize,
        file: &std::sync::Arc<std::os::fd::OwnedFd>,
        offset: u64,
    ) -> Result<usize, PutError> {
        self.cur().put_file(region, len, file, offset)
    }
    fn send_file_reply(&mut self, msg: &[u8], patch: CountPatch) -> Result<(), TransportError> {
        self.cur().send_file_reply(msg, patch)
    }
    fn pull(&mut self, region: RemoteRegion, len: usize, tag: u64) -> Result<(), TransportError> {
        self.cur().pull(region, len, tag)
    }
    fn pull_sync(
        &mut self,
        region: RemoteRegion,
        len: usize,
        consume: &mut dyn FnMut(PlacementSrc<'_>) -> std::io::Result<usize>,
    ) -> Result<Option<usize>, PutError> {
        self.cur().pull_sync(region, len, consume)
    }
    fn lease(
        &mut self,
        region: RemoteRegion,
        len: usize,
        write: bool,
    ) -> Result<Option<PlacementLease>, TransportError> {
        self.cur().lease(region, len, write)
    }
    fn is_shared_memory(&self) -> bool {
        self.members[0].t.is_shared_memory()
    }
    fn input_pending(&self) -> bool {
        self.members.iter().any(|m| m.t.input_pending())
    }
    fn more_input(&self) -> bool {
        self.members.iter().any(|m| m.t.more_input())
    }
    fn arm_sleep(&mut self) -> bool {
        let mut ok = true;
        for m in &mut self.members {
            ok &= m.t.arm_sleep();
        }
        ok
    }
    fn disarm_sleep(&mut self) {
        for m in &mut self.members {
            m.t.disarm_sleep();
        }
    }
    fn flush(&mut self) -> Result<bool, TransportError> {
        let mut done = true;
        let mut i = 0;
        while i < self.members.len() {
            let n = self.members.len();
            match self.members[i].t.flush() {
                Ok(d) => done &= d,
                r @ Err(_) => self.member_failed(i, r)?,
            }
            if self.members.len() == n {
                i += 1;
            }
        }
        Ok(done)
    }
    fn backlog_bytes(&self) -> usize {
        self.members.iter().map(|m| m.t.backlog_bytes()).sum()
    }
}
