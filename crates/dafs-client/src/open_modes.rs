//! Calls on files opened with the DAFS open modes: atomic append, publishing a
//! create-unlinked file, and cache hints.

use dafs_proto::{Attr, Opcode, RemoteRegion, Reply, Request};

use crate::error::{check_write_count, unexpected_reply};
use crate::{Client, Error, File, Result};

impl Client {
    /// Advise the server about the access pattern of a file range
    /// ([`dafs_proto::types::cache_hint`]; `len == 0`: to the end of the file).
    pub fn cache_hint(&mut self, f: &File, offset: u64, len: u64, hint: u32) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.with_file(f, |n| n.cache_hint(f, offset, len, hint));
        }
        let m =
            self.call(&Request::CacheHint { open_id: self.open_id_of(f)?, offset, len, hint })?;
        self.decode(&m).map(|_| ())
    }

    /// Append `data` atomically to a file opened with [`OpenOptions::append`](crate::OpenOptions::append): the
    /// server writes it at the end of file as of that moment (across all clients) and
    /// returns the offset it chose.
    pub fn append(&mut self, f: &File, data: &[u8]) -> Result<u64> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.with_file(f, |n| n.append(f, data));
        }
        if data.len() <= self.inline_threshold_unregistered() {
            let m = self.call(&Request::WriteInline {
                open_id: self.open_id_of(f)?,
                offset: 0,
                stable: false,
                data,
            })?;
            return match self.decode(&m)?.1 {
                Reply::Write { count, offset, .. } => {
                    check_write_count(Opcode::WriteInline, count, data.len()).map(|()| offset)
                }
                _ => Err(unexpected_reply(Opcode::WriteInline)),
            };
        }
        if data.len() > self.direct_bytes_max {
            return Err(Error::InvalidArgument(
                "append larger than io_bytes_max() would not be atomic",
            ));
        }
        self.stats.off_direct_path += 1;
        // SAFETY: registered only for this synchronous call, which holds the borrow.
        let key = unsafe {
            self.register_recovering(
                data.as_ptr() as *mut u8,
                data.len(),
                dafs_transport::Access { remote_write: false, remote_read: true },
            )?
        };
        let r = self.call(&Request::WriteDirect {
            open_id: self.open_id_of(f)?,
            offset: 0,
            len: data.len() as u32,
            stable: false,
            region: RemoteRegion { key, offset: 0 },
        });
        let _ = self.t.deregister(key);
        let m = r?;
        match self.decode(&m)?.1 {
            Reply::Write { count, offset, .. } => {
                check_write_count(Opcode::WriteDirect, count, data.len()).map(|()| offset)
            }
            _ => Err(unexpected_reply(Opcode::WriteDirect)),
        }
    }

    /// Give a create-unlinked file ([`OpenOptions::unlinked`](crate::OpenOptions::unlinked)) its name: the commit of
    /// the create/commit/abort pattern. (Abort: close it without publishing.)
    pub fn publish(&mut self, f: &File) -> Result<Attr> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.with_file(f, |n| n.publish(f));
        }
        let m = self.call(&Request::Publish { open_id: self.open_id_of(f)? })?;
        match self.decode(&m)?.1 {
            Reply::Handle { attr, .. } => Ok(attr),
            _ => Err(unexpected_reply(Opcode::Publish)),
        }
    }
}
