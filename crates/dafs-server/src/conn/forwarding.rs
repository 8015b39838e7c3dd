//! Forwarded requests off the worker (round-robin placement; `crate::forward`).
//!
//! A request carried out at another node is handed to the node's forwarding threads
//! (`forward::pool`) as a job on this connection's strand; the worker goes on with
//! other requests and connections. The request's slot stays busy until the job's result
//! comes back through the connection's `DoneBox` and the worker answers it
//! (`reap_forwarded`, through `respond` like every reply): a retransmission meanwhile is
//! dropped as a duplicate and one afterwards finds the reply cache, as for the I/O
//! pool's jobs. What a result changes in the session (a proxied open made at the home)
//! is applied by the worker, the only thread that touches the session.
//!
//! A connection that closes with forwarded requests in flight is not torn down at once:
//! it *lingers* (no more input) until their results are in and stored in the reply
//! cache, then its session is parked or released as usual (`lib.rs`, `close_conn`).
//! Nothing on the worker waits for a home node, except SESSION_CREATE/BIND/DESTROY
//! arriving while this connection's forwards are in flight (a client that pipelines
//! them) and server shutdown, which wait at most the forwarding deadline.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dafs_proto::{Header, RemoteRegion, Reply, Status};
use dafs_transport::ServerConn as _;
use tracing::debug;

use super::ops::placement_status;
use super::reply::SlotUse;
use super::Conn;
use crate::cluster::ClusterNode;
use crate::forward::{Forwarder, ProxyFile, FORWARD_DEADLINE};
use crate::Shared;

/// How long a wait for forwarded results sleeps at most between looks.
const FORWARD_WAIT_SLICE: Duration = Duration::from_millis(5);

/// What a forwarded request's job produced.
pub(crate) enum FwdOk {
    /// The reply as it is (no data borrowed).
    Reply(Reply<'static>),
    /// Data read at the home: inline, or to be placed into `region` (READ_DIRECT).
    Read { data: Vec<u8>, eof: bool, region: Option<RemoteRegion> },
    /// An open made at the home for session `session`: becomes a proxied open.
    Open { session: u64, proxy: Box<ProxyFile> },
}

/// A forwarded request's result, for the worker.
pub(crate) struct FwdDone {
    tag: u64,
    result: Result<FwdOk, Status>,
}

/// A forwarded request in flight: its tag and the header it answers.
pub(super) struct FwdInFlight {
    tag: u64,
    pub(super) hdr: Header,
}

/// The forwarder of this node, and the node (kept alive by the jobs that use it).
pub(super) fn node_forwarder(sh: &Shared) -> Result<(Arc<ClusterNode>, &Forwarder), Status> {
    let node = sh.cfg.cluster.as_ref().ok_or(Status::ServerFault)?;
    let f = node.forwarder.as_ref().ok_or(Status::ServerFault)?;
    Ok((Arc::clone(node), f))
}

impl Conn {
    /// Forwarded requests of this connection in flight.
    pub(crate) fn forwards_inflight(&self) -> usize {
        self.forwards.len()
    }

    /// Run `work` on the forwarding threads after this connection's earlier forwarded
    /// requests; its result answers the request `h`. Refused beyond the node's or the
    /// connection's share of forwarded requests in flight: `DELAY`.
    pub(super) fn submit_forward(
        &mut self,
        sh: &Shared,
        h: &Header,
        work: impl FnOnce(&Forwarder) -> Result<FwdOk, Status> + Send + 'static,
    ) -> Result<(), Status> {
        let (node, f) = node_forwarder(sh)?;
        let tag = self.take_tag();
        let done = self.done.clone();
        let job = Box::new(move || {
            let f = node.forwarder.as_ref().expect("a job is submitted to a forwarder");
            let result = work(f);
            done.push_forwarded(FwdDone { tag, result });
        });
        match f.pool.submit(&self.strand, self.forwards.len(), job) {
            Ok(()) => {
                self.forwards.push(FwdInFlight { tag, hdr: *h });
                Ok(())
            }
            Err(why) => {
                f.counters.forward_refusals.fetch_add(1, Relaxed);
                debug!(?why, "forwarded request refused: limit reached");
                Err(Status::Delay)
            }
        }
    }

    /// Answer every finished forwarded request (the worker, between events).
    pub(crate) fn reap_forwarded(&mut self, sh: &Shared, out: &mut Vec<u8>) {
        if self.forwards.is_empty() {
            return;
        }
        let current = self.t.channel();
        for d in self.done.take_forwarded() {
            let i = self
                .forwards
                .iter()
                .position(|f| f.tag == d.tag)
                .expect("every forwarded result belongs to a request in flight");
            let hdr = self.forwards.swap_remove(i).hdr;
            self.select_slot_channel(hdr.slot_id);
            let mut data = Vec::new();
            let reply = match d.result {
                Ok(FwdOk::Reply(r)) => r,
                Ok(FwdOk::Open { session, proxy }) => self.opened_at_home(sh, session, *proxy),
                Ok(FwdOk::Read { data: d, eof, region: None }) => {
                    sh.stats.bytes_read.fetch_add(d.len() as u64, Relaxed);
                    data = d;
                    let r = Reply::ReadInline { eof, data: &data };
                    let _ = self.respond(sh, out, &hdr, &r, SlotUse::Complete);
                    continue;
                }
                Ok(FwdOk::Read { data, eof, region: Some(region) }) => {
                    let placed = self
                        .t
                        .put(region, data.len(), &mut |dst| Ok(dst.copy_from(&data)))
                        .map_err(placement_status);
                    match placed {
                        Ok(n) => {
                            sh.stats.bytes_read.fetch_add(n as u64, Relaxed);
                            Reply::ReadDirect { count: n as u32, eof: eof || n < data.len() }
                        }
                        Err(e) => Reply::Error(e),
                    }
                }
                Err(e) => crate::cluster::error_reply(sh, e),
            };
            drop(data);
            // The op has executed: a failed send shows at the connection's next read.
            let _ = self.respond(sh, out, &hdr, &reply, SlotUse::Complete);
        }
        self.t.set_channel(current);
    }

    /// An open made at the home becomes a proxied open of `session`, if that session is
    /// still this connection's; otherwise it is closed at the home again.
    fn opened_at_home(&mut self, sh: &Shared, session: u64, proxy: ProxyFile) -> Reply<'static> {
        let Some(s) = self.session.as_mut().filter(|s| s.id == session) else {
            close_detached(sh, Arc::new(proxy));
            return Reply::Error(Status::BadSession);
        };
        let (fh, attr) = (proxy.fh(), proxy.attr());
        let open_id = s.next_open_id;
        s.next_open_id += 1;
        s.proxied.insert(open_id, Arc::new(proxy));
        Reply::Open { open_id, fh, attr }
    }

    /// Wait (on the worker) until this connection's forwarded requests are answered, at
    /// most a little over the forwarding deadline (each job ends by then). For the rare
    /// session ops that must follow them, and shutdown.
    pub(super) fn wait_forwarded(&mut self, sh: &Shared, out: &mut Vec<u8>) {
        let deadline = Instant::now() + FORWARD_DEADLINE * 2;
        while !self.forwards.is_empty() {
            self.reap_forwarded(sh, out);
            if self.forwards.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                // A long queue on this connection's strand: the rest are answered when
                // they finish (`reap_forwarded`), or dropped with the connection.
                tracing::warn!(n = self.forwards.len(), "forwarded requests still unanswered");
                break;
            }
            self.done.wait_forwarded(FORWARD_WAIT_SLICE);
        }
    }
}

/// Close a proxied open at its home from no connection (its session ended), on the
/// forwarding threads: never waits here.
pub(crate) fn close_detached(sh: &Shared, p: Arc<ProxyFile>) {
    let Ok((node, f)) = node_forwarder(sh) else { return };
    f.pool.submit_detached(Box::new(move || {
        let f = node.forwarder.as_ref().expect("a forwarder");
        if let Err(e) = f.close(p) {
            debug!("closing a proxied open at its home: {e:?}");
        }
    }));
}

/// End client session `owner`'s lock sessions at the homes (releasing its locks there),
/// on the forwarding threads.
pub(crate) fn release_locks_detached(sh: &Shared, owner: u64) {
    let Ok((node, f)) = node_forwarder(sh) else { return };
    if !f.has_locks(owner) {
        return;
    }
    f.pool.submit_detached(Box::new(move || {
        node.forwarder.as_ref().expect("a forwarder").release_locks(owner);
    }));
}
