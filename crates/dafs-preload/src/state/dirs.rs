//! Directory streams: the `DIR*` handed out for a dafs directory, and its listing.

use std::ffi::c_int;

use dafs_proto::FileType;

use super::{config, State};

/// Entries per READDIR page: 0 lets the server fill each reply as far as its limit.
const READDIR_PAGE_ENTRIES_SERVER_MAX: u32 = 0;

/// A dafs directory stream (the `DIR*` handed out points to one of these).
pub struct DirStream {
    pub fd: c_int,
    pub entries: Vec<(Vec<u8>, u64, u8)>,
    pub pos: usize,
    pub ent: libc::dirent64,
}

/// The `d_type` of a protocol file type.
pub fn dtype(t: FileType) -> u8 {
    match t {
        FileType::Regular => libc::DT_REG,
        FileType::Directory => libc::DT_DIR,
        FileType::Symlink => libc::DT_LNK,
        FileType::CharDevice => libc::DT_CHR,
        FileType::BlockDevice => libc::DT_BLK,
        FileType::Fifo => libc::DT_FIFO,
        FileType::Socket => libc::DT_SOCK,
    }
}

impl State {
    /// The entries of directory `id`: ".", "..", then the server's.
    pub fn list_dir(&mut self, id: u64) -> Result<Vec<(Vec<u8>, u64, u8)>, c_int> {
        self.ensure(id)?;
        let (fh, is_root) = {
            let o = &self.ofds[&id];
            (o.fh, o.rel == config().mounts[o.mount].base)
        };
        self.with_ofd_id(id, |c, _| {
            let me = c.getattr(fh)?.fileid;
            let parent =
                if is_root { me } else { c.lookup_parent(fh).map(|(_, a)| a.fileid).unwrap_or(me) };
            let mut v =
                vec![(b".".to_vec(), me, libc::DT_DIR), (b"..".to_vec(), parent, libc::DT_DIR)];
            let mut cookie = 0;
            loop {
                let (page, next, eof) =
                    c.readdir_page(fh, cookie, READDIR_PAGE_ENTRIES_SERVER_MAX)?;
                v.extend(page.into_iter().map(|e| (e.name, e.fileid, dtype(e.ftype))));
                if eof {
                    return Ok(v);
                }
                cookie = next;
            }
        })
    }
}
