//! The native PostMark engine over the NFS baseline (NFS-Ganesha through libnfs, the
//! user-space client the peer's nfsbench uses): the same program as on local files and
//! on dafs, so `native-shm` / `native-nfs` compares the file systems, not the programs.
//! Every call is one or more NFSv3 RPCs (libnfs has no client cache); closing a written
//! file sends its COMMIT, as a kernel client does at close.

use std::sync::Arc;

use super::engine::PmFs;
use crate::libnfs::{LibNfs, NfsSession};

/// One mounted libnfs context; paths are relative to the export root.
pub struct NfsFs {
    s: NfsSession,
    buf: Vec<u8>,
}

impl NfsFs {
    pub fn mount(lib: &Arc<LibNfs>, url: &str) -> Result<NfsFs, String> {
        Ok(NfsFs { s: NfsSession::mount(lib, url)?, buf: Vec::new() })
    }

    fn write_all(
        &mut self,
        f: usize,
        data: &[u8],
        mut off: u64,
        block: usize,
    ) -> Result<(), String> {
        for chunk in data.chunks(block.max(1)) {
            let mut done = 0;
            while done < chunk.len() {
                done += self.s.write_some(f, &chunk[done..], off + done as u64)?;
            }
            off += chunk.len() as u64;
        }
        Ok(())
    }

    /// Run `body` on an open file and close it whatever happened (the first error wins).
    fn with_file<T>(
        &mut self,
        f: usize,
        body: impl FnOnce(&mut Self) -> Result<T, String>,
    ) -> Result<T, String> {
        let r = body(self);
        let c = self.s.close(f);
        let v = r?;
        c?;
        Ok(v)
    }
}

impl PmFs for NfsFs {
    fn mkdir(&mut self, dir: &str) -> Result<(), String> {
        // As on local files (create_dir_all): an existing directory is fine.
        self.s.mkdir(dir, true)
    }
    fn rmdir(&mut self, dir: &str) -> Result<(), String> {
        self.s.rmdir(dir)
    }
    fn create(&mut self, path: &str, data: &[u8], block: usize) -> Result<(), String> {
        let f = self.s.create_new(path, 0o644)?;
        self.with_file(f, |me| me.write_all(f, data, 0, block))
    }
    fn append(&mut self, path: &str, data: &[u8], block: usize) -> Result<(), String> {
        let f = self.s.open_existing(path, libc::O_WRONLY)?;
        self.with_file(f, |me| {
            let end = me.s.size(f)?;
            me.write_all(f, data, end, block)
        })
    }
    fn read_all(&mut self, path: &str, block: usize, out: &mut Vec<u8>) -> Result<(), String> {
        let f = self.s.open_existing(path, libc::O_RDONLY)?;
        self.with_file(f, |me| {
            me.buf.resize(block.max(1), 0);
            let mut off = 0u64;
            loop {
                let n = me.s.read_some(f, &mut me.buf, off)?;
                if n == 0 {
                    return Ok(());
                }
                out.extend_from_slice(&me.buf[..n]);
                off += n as u64;
            }
        })
    }
    fn delete(&mut self, path: &str) -> Result<(), String> {
        self.s.unlink(path)
    }
}
