//! The merge's block I/O over libnfs (see `crate::libnfs`): whole blocks, or an error.

use super::threaded::BlockIo;
use crate::libnfs::NfsSession;

impl BlockIo for NfsSession {
    fn read_at(&mut self, file: usize, buf: &mut [u8], off: u64) -> Result<(), String> {
        let mut done = 0usize;
        while done < buf.len() {
            let at = off + done as u64;
            match self.read_some(file, &mut buf[done..], at)? {
                0 => return Err(format!("nfs_pread at {at}: end of file")),
                n => done += n,
            }
        }
        Ok(())
    }

    fn write_at(&mut self, file: usize, buf: &[u8], off: u64) -> Result<(), String> {
        let mut done = 0usize;
        while done < buf.len() {
            done += self.write_some(file, &buf[done..], off + done as u64)?;
        }
        Ok(())
    }
}
