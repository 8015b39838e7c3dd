//! Request chains: several requests executed by the server in one round trip, a current
//! file handle and open id flowing from one to the next.

use dafs_proto::{limits, FileHandle, Header, Opcode, Reply, Request, Status};

use crate::error::unexpected_reply;
use crate::namespace::{clean_path, split_parent};
use crate::{Client, Error, File, OpenOptions, ProtocolViolation, Result};
use dafs_proto::Attr;

/// The reply of one chain element, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainReply {
    Empty,
    Handle { fh: FileHandle, attr: Attr },
    Attr(Attr),
    Open { open_id: u64, fh: FileHandle, attr: Attr },
    Data { data: Vec<u8>, eof: bool },
    Written { count: u32, offset: u64 },
    Other,
}

/// The outcome of [`Client::run_chain`].
#[derive(Debug)]
pub struct ChainOutcome {
    /// Replies of the elements that succeeded, in order.
    pub replies: Vec<ChainReply>,
    /// The element that failed (its index) and why; later elements did not run.
    pub failed: Option<(usize, Error)>,
}

/// Builds a chain of requests executed by the server in one round trip. A current file
/// handle and open id flow from element to element: use [`Chain::CURRENT`] and
/// [`Chain::CURRENT_OPEN`] to refer to them.
///
/// ```no_run
/// # use dafs_client::*;
/// # let mut c = Client::connect("127.0.0.1:7420", ClientConfig::default())?;
/// let root = c.root_handle();
/// let chain = Chain::new()
///     .lookup(root, "dir/file.txt")
///     .open(Chain::CURRENT, OpenOptions::read())
///     .read_inline(Chain::CURRENT_OPEN, 0, 4096)
///     .close(Chain::CURRENT_OPEN);
/// let out = c.run_chain(&chain)?;
/// assert!(out.failed.is_none());
/// # Ok::<(), dafs_client::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Chain {
    elems: Vec<Vec<u8>>,
    /// An element could not be encoded (too large): the chain is refused when run.
    invalid: bool,
}

impl Chain {
    pub const CURRENT: FileHandle = dafs_proto::types::CURRENT_FH;
    pub const CURRENT_OPEN: u64 = dafs_proto::types::CURRENT_OPEN_ID;
    pub fn new() -> Self {
        Chain::default()
    }
    pub fn len(&self) -> usize {
        self.elems.len()
    }
    pub fn is_empty(&self) -> bool {
        self.elems.is_empty()
    }
    /// Append any request (the general builder).
    pub fn push(mut self, req: &Request) -> Self {
        let mut b = Vec::new();
        let h = Header::request(req.opcode(), 0, 0, 0, 0);
        // Element size errors surface when the chain is run.
        if dafs_proto::encode_request(&h, req, &mut b, limits::MSG_SIZE_BYTES_MAX as usize).is_err()
        {
            self.invalid = true;
        }
        self.elems.push(b);
        self
    }
    pub fn lookup(self, dir: FileHandle, path: &str) -> Self {
        let p = clean_path(path).unwrap_or_default();
        self.push(&Request::Lookup { dir, path: p.as_bytes(), follow: true })
    }
    /// Open the handle itself.
    pub fn open(self, fh: FileHandle, opts: OpenOptions) -> Self {
        self.push(&Request::Open {
            fh,
            flags: opts.flags,
            mode: opts.mode,
            name: b"",
            key: opts.key_bytes(),
        })
    }
    /// Open (or create) `name` in directory `dir`.
    pub fn open_in(self, dir: FileHandle, name: &str, opts: OpenOptions) -> Self {
        self.push(&Request::Open {
            fh: dir,
            flags: opts.flags,
            mode: opts.mode,
            name: name.as_bytes(),
            key: opts.key_bytes(),
        })
    }
    pub fn read_inline(self, open_id: u64, offset: u64, len: u32) -> Self {
        self.push(&Request::ReadInline { open_id, offset, len })
    }
    pub fn write_inline(self, open_id: u64, offset: u64, data: &[u8]) -> Self {
        self.push(&Request::WriteInline { open_id, offset, stable: false, data })
    }
    pub fn getattr(self, fh: FileHandle) -> Self {
        self.push(&Request::GetAttr { fh })
    }
    pub fn commit(self, open_id: u64) -> Self {
        self.push(&Request::Commit { open_id, offset: 0, len: 0 })
    }
    pub fn close(self, open_id: u64) -> Self {
        self.push(&Request::Close { open_id })
    }
}

impl Client {
    /// Run a chain in one round trip.
    pub fn run_chain(&mut self, chain: &Chain) -> Result<ChainOutcome> {
        if chain.is_empty() {
            return Err(Error::InvalidArgument("empty chain"));
        }
        if chain.invalid {
            return Err(Error::InvalidArgument("a chain element does not fit in a message"));
        }
        if chain.len() > dafs_proto::types::CHAIN_LEN_MAX {
            return Err(Error::Status(Status::TooMany));
        }
        let mut packed = Vec::new();
        dafs_proto::types::pack_messages(chain.elems.iter().map(|e| e.as_slice()), &mut packed);
        let m = self.call(&Request::Chain { count: chain.len() as u32, elements: &packed })?;
        let (_, r) = self.decode(&m)?;
        let Reply::Chain { failed, replies, .. } = r else {
            return Err(unexpected_reply(Opcode::Chain));
        };
        let msgs = dafs_proto::types::unpack_messages(replies, dafs_proto::types::CHAIN_LEN_MAX)?;
        let mut out = ChainOutcome { replies: Vec::new(), failed: None };
        for (i, msg) in msgs.iter().enumerate() {
            let (_, r) = dafs_proto::decode_reply(msg, self.msg_size_bytes_max)?;
            let owned = match r {
                // WRONG_NODE carries the node's epoch, so it is a reply of its own; in a
                // chain it ends the chain as any other status does.
                Reply::Error(_) | Reply::WrongNode { .. } => {
                    let s = match r {
                        Reply::Error(s) => s,
                        _ => Status::WrongNode,
                    };
                    if failed as usize != i {
                        return Err(ProtocolViolation::ChainErrorIndex { at: i, failed }.into());
                    }
                    out.failed = Some((i, Error::Status(s)));
                    break;
                }
                Reply::Empty => ChainReply::Empty,
                Reply::Handle { fh, attr } => ChainReply::Handle { fh, attr },
                Reply::Attr { attr } => ChainReply::Attr(attr),
                Reply::Open { open_id, fh, attr } => ChainReply::Open { open_id, fh, attr },
                Reply::ReadInline { eof, data } => ChainReply::Data { data: data.to_vec(), eof },
                Reply::Write { count, offset, .. } => ChainReply::Written { count, offset },
                _ => ChainReply::Other,
            };
            out.replies.push(owned);
        }
        Ok(out)
    }

    /// LOOKUP `path` from the export's root, then `req` on what it found (`req` names
    /// it [`Chain::CURRENT`]), in one round trip: the looked-up handle and `req`'s reply.
    /// `None` when the path does not fit one LOOKUP (the caller walks it instead), the
    /// chain was cut by a server restart, or an element was answered GRACE (the caller
    /// sends the two requests). A root
    /// handle the server recycled is fetched again and the chain retried once, as
    /// `lookup_path` does.
    pub(crate) fn lookup_then(
        &mut self,
        path: &str,
        req: &Request<'_>,
    ) -> Result<Option<(FileHandle, ChainReply)>> {
        let p = clean_path(path)?;
        if p.is_empty() || p.len() > limits::PATH_BYTES_MAX {
            return Ok(None);
        }
        // A name longer than NAME_MAX is ENAMETOOLONG, as the path walk answers it,
        // whatever a chain element carrying it would be answered.
        if p.split('/').any(|c| c.len() > limits::NAME_BYTES_MAX) {
            return Err(Error::Status(Status::NameTooLong));
        }
        let mut retried = false;
        loop {
            let chain = Chain::new()
                .push(&Request::Lookup { dir: self.root, path: p.as_bytes(), follow: true })
                .push(req);
            let mut out = match self.run_chain(&chain) {
                // A chain in flight across a server restart is not resent (it could hold
                // anything); these two elements may be, as separate requests: the caller
                // does that, and gets what a resent LOOKUP and OPEN/REMOVE would.
                Err(Error::Disconnected) => return Ok(None),
                r => r?,
            };
            match out.failed.take() {
                Some((0, Error::Status(Status::Stale))) if !retried => {
                    retried = true;
                    let export = self.cfg.export.clone();
                    self.refresh_root(&export)?;
                }
                // The server's grace period after a restart: the caller sends the two
                // requests, which wait for it to end as every other request does.
                Some((_, Error::Status(Status::Grace))) => return Ok(None),
                Some((_, e)) => return Err(e),
                None => {
                    return match (out.replies.first(), out.replies.get(1)) {
                        (Some(ChainReply::Handle { fh, .. }), Some(r)) => {
                            Ok(Some((*fh, r.clone())))
                        }
                        _ => Err(unexpected_reply(Opcode::Chain)),
                    };
                }
            }
        }
    }

    /// LOOKUP + OPEN + READ (+ nothing else) in one round trip: the open file and up
    /// to `min(len, inline_threshold_unregistered())` bytes from its start.
    pub fn open_and_read(&mut self, path: &str, len: usize) -> Result<(File, Vec<u8>, bool)> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.open_and_read(path, len);
        }
        let n = len.min(self.inline_threshold_unregistered()) as u32;
        let chain = Chain::new()
            .lookup(self.root, path)
            .open(Chain::CURRENT, OpenOptions::read())
            .read_inline(Chain::CURRENT_OPEN, 0, n);
        let out = self.run_chain(&chain)?;
        if let Some((_, e)) = out.failed {
            // An OPEN that succeeded before a failed READ is closed by the server when the
            // session ends; close it now so it does not linger.
            if let Some(ChainReply::Open { open_id, .. }) = out.replies.get(1) {
                let _ = self.call(&Request::Close { open_id: *open_id });
            }
            return Err(e);
        }
        match (out.replies.get(1), out.replies.get(2)) {
            (
                Some(ChainReply::Open { open_id, fh, attr }),
                Some(ChainReply::Data { data, eof }),
            ) => {
                let origin = Some((path.to_string(), OpenOptions::read()));
                let mut f = self.opened_file(*open_id, *fh, *attr, origin);
                f.pos = data.len() as u64;
                self.track_open(&f, None, &OpenOptions::read());
                Ok((f, data.clone(), *eof))
            }
            _ => Err(unexpected_reply(Opcode::Chain)),
        }
    }

    /// Create (or truncate) `path`, write `data` (at most `inline_threshold_unregistered()`), make it
    /// durable and close it — one round trip (LOOKUP parent + OPEN + WRITE + COMMIT + CLOSE).
    pub fn create_and_write(&mut self, path: &str, data: &[u8], mode: u32) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.create_and_write(path, data, mode);
        }
        if data.len() > self.inline_threshold_unregistered() {
            return Err(Error::InvalidArgument(
                "data larger than inline_threshold_unregistered(): use open + pwrite",
            ));
        }
        let (parent, name) = split_parent(path)?;
        let opts = OpenOptions::read_write().create(true).truncate(true).mode(mode);
        let mut chain = Chain::new();
        let dir = if parent.is_empty() {
            self.root
        } else {
            chain = chain.lookup(self.root, &parent);
            Chain::CURRENT
        };
        let chain = chain
            .open_in(dir, &name, opts)
            .write_inline(Chain::CURRENT_OPEN, 0, data)
            .commit(Chain::CURRENT_OPEN)
            .close(Chain::CURRENT_OPEN);
        let out = self.run_chain(&chain)?;
        if let Some((i, e)) = out.failed {
            let first_open = out.replies.iter().find_map(|r| {
                if let ChainReply::Open { open_id, .. } = r {
                    Some(*open_id)
                } else {
                    None
                }
            });
            if let Some(open_id) = first_open {
                if i + 1 < chain.len() {
                    let _ = self.call(&Request::Close { open_id });
                }
            }
            return Err(e);
        }
        Ok(())
    }
}
