//! An open file, and the options it is opened with (including the DAFS open modes).

use dafs_proto::types::{open_flags, OPEN_KEY_BYTES_MAX};
use dafs_proto::{Attr, FileHandle};

use crate::{Client, Error, Result};

/// The mode bits a client may set (permissions, setuid, setgid, sticky): the file type
/// is never the caller's to choose through a mode.
pub(crate) const MODE_BITS: u32 = 0o7777;

/// Mode of files created without [`OpenOptions::mode`]: rw-r--r--, the usual mode of
/// a new data file.
const MODE_DEFAULT: u32 = 0o644;

/// An open file.
#[derive(Debug)]
pub struct File {
    pub(crate) open_id: u64,
    /// The session the file was opened in: open ids are numbered per session, so in a
    /// later session (after [`Client::reestablish`](crate::Client::reestablish)) the
    /// same id may name another file.
    pub(crate) session_id: u64,
    pub fh: FileHandle,
    /// Attributes at open time.
    pub attr: Attr,
    /// Position for [`Client::read`](crate::Client::read) / [`Client::write`](crate::Client::write).
    pub pos: u64,
    /// Path and options it was opened with, for [`Client::reopen`] after a session loss.
    pub(crate) origin: Option<(String, OpenOptions)>,
    /// On a cluster client: the node (slot) the file was opened on.
    pub(crate) node: usize,
    /// On a cluster client: the node's handle of the file (`fh` is the front handle,
    /// which the handle-relative calls take).
    pub(crate) node_fh: Option<FileHandle>,
}

impl File {
    pub fn open_id(&self) -> u64 {
        self.open_id
    }

    /// The handle the session the file was opened in knows it by.
    pub(crate) fn wire_fh(&self) -> FileHandle {
        self.node_fh.unwrap_or(self.fh)
    }
}

impl Client {
    /// A file this session just opened: at position 0, on node 0 (a cluster client sets
    /// the node), with `origin` for [`Client::reopen`].
    pub(crate) fn opened_file(
        &self,
        open_id: u64,
        fh: FileHandle,
        attr: Attr,
        origin: Option<(String, OpenOptions)>,
    ) -> File {
        File {
            open_id,
            session_id: self.session_id,
            fh,
            attr,
            pos: 0,
            origin,
            node: 0,
            node_fh: None,
        }
    }

    /// The open id to send for `f`: refused for a file opened in an earlier session,
    /// since open ids are numbered per session and the same id may now name a file
    /// opened since (a write there would succeed — into the wrong file).
    /// A file of an earlier session is still usable if its open was reclaimed after a
    /// server restart (under the same id; `Held` says it is this file's open).
    pub(crate) fn open_id_of(&self, f: &File) -> Result<u64> {
        if f.session_id == self.session_id || self.held.is_open(f.session_id, f.open_id) {
            return Ok(f.open_id);
        }
        Err(Error::StaleOpen)
    }

    /// Record a granted open (for reclaim after a restart). `by_name`: directory and
    /// name it was opened by, kept for delete-on-close opens (which act on the name).
    pub(crate) fn track_open(
        &mut self,
        f: &File,
        by_name: Option<(FileHandle, &[u8])>,
        opts: &OpenOptions,
    ) {
        let by_name = by_name
            .filter(|_| opts.flags & open_flags::DELETE_ON_CLOSE != 0)
            .map(|(d, n)| (d, n.to_vec()));
        self.held.opened(crate::held::OpenRecord {
            open_id: f.open_id,
            opened_in: f.session_id,
            fh: f.wire_fh(),
            by_name,
            flags: opts.flags,
            key: opts.key_bytes().to_vec(),
        });
    }
}

/// OPEN options, like `std::fs::OpenOptions`.
#[derive(Debug, Clone, Copy)]
pub struct OpenOptions {
    pub(crate) flags: u32,
    pub(crate) mode: u32,
    key: [u8; OPEN_KEY_BYTES_MAX],
    key_len: u8,
}

impl OpenOptions {
    const fn with(flags: u32) -> Self {
        OpenOptions { flags, mode: MODE_DEFAULT, key: [0; OPEN_KEY_BYTES_MAX], key_len: 0 }
    }
    pub fn read() -> Self {
        Self::with(open_flags::READ)
    }
    /// The options of an OPEN as it travels (flags, mode, key): what a server
    /// forwarding a client's OPEN to the file's home node sends on (a key longer than
    /// 64 bytes is refused at open, as with [`key`](Self::key)).
    pub fn from_wire(flags: u32, mode: u32, key: &[u8]) -> Self {
        OpenOptions { mode, ..Self::with(flags) }.key(key)
    }
    pub fn write_only() -> Self {
        Self::with(open_flags::WRITE)
    }
    pub fn read_write() -> Self {
        Self::with(open_flags::READ | open_flags::WRITE)
    }
    /// Every write appends atomically: the server picks the offset (see [`Client::append`](crate::Client::append)).
    pub fn append(mut self, on: bool) -> Self {
        self.set(open_flags::APPEND, on);
        self
    }
    /// Create-unlinked: the file gets its name only at [`Client::publish`](crate::Client::publish); closing
    /// without publishing (or the session ending) discards it. Implies create + write.
    pub fn unlinked(mut self, on: bool) -> Self {
        self.set(open_flags::UNLINKED, on);
        if on {
            self.flags |= open_flags::CREATE | open_flags::WRITE
        }
        self
    }
    /// Remove the file's name when the last open of it (by any client) closes.
    pub fn delete_on_close(mut self, on: bool) -> Self {
        self.set(open_flags::DELETE_ON_CLOSE, on);
        self
    }
    /// While this open lasts, no other open may read the file.
    pub fn deny_read(mut self, on: bool) -> Self {
        self.set(open_flags::DENY_READ, on);
        self
    }
    /// While this open lasts, no other open may write the file.
    pub fn deny_write(mut self, on: bool) -> Self {
        self.set(open_flags::DENY_WRITE, on);
        self
    }
    /// Open key (at most 64 bytes): the first opener of a file sets it, every later
    /// opener must present the same key (`BadKey` otherwise) while any open lasts.
    /// A key longer than 64 bytes makes the open fail with `InvalidArgument`.
    pub fn key(mut self, key: &[u8]) -> Self {
        if key.len() > OPEN_KEY_BYTES_MAX {
            self.key_len = u8::MAX; // refused at open()
            return self;
        }
        self.key[..key.len()].copy_from_slice(key);
        self.key_len = key.len() as u8;
        self
    }
    pub(crate) fn check(&self) -> Result<()> {
        if self.key_len as usize > OPEN_KEY_BYTES_MAX {
            return Err(Error::InvalidArgument("open key longer than 64 bytes"));
        }
        Ok(())
    }
    pub(crate) fn key_bytes(&self) -> &[u8] {
        &self.key[..(self.key_len as usize).min(OPEN_KEY_BYTES_MAX)]
    }
    pub fn create(mut self, on: bool) -> Self {
        self.set(open_flags::CREATE, on);
        self
    }
    /// Create, failing with `EXIST` if the file exists (implies `create`).
    pub fn exclusive(mut self, on: bool) -> Self {
        if on {
            self.flags |= open_flags::CREATE | open_flags::EXCLUSIVE
        } else {
            self.flags &= !open_flags::EXCLUSIVE
        }
        self
    }
    pub fn truncate(mut self, on: bool) -> Self {
        self.set(open_flags::TRUNCATE, on);
        self
    }
    pub fn mode(mut self, mode: u32) -> Self {
        self.mode = mode & MODE_BITS;
        self
    }
    fn set(&mut self, bit: u32, on: bool) {
        if on {
            self.flags |= bit
        } else {
            self.flags &= !bit
        }
    }
}
