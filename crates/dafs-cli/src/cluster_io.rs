//! `dafs cat/get/put` on a cluster URL. A cluster client routes each call to the
//! node holding the file, which the asynchronous path (registered memory, completion
//! groups: one node's session each) cannot follow: these copy with blocking
//! reads and writes, which the library stages itself.

use std::io::{Read, Write};

use dafs_client::{Client, OpenOptions};

use crate::{op_err, Fail};

/// Copy size of one blocking call.
const CHUNK_BYTES: usize = 1 << 20;

pub fn copy_out(c: &mut Client, path: &str, out: &mut dyn Write) -> Result<(), Fail> {
    let f = c.open(path, OpenOptions::read()).map_err(|e| op_err(path, e))?;
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut off = 0u64;
    loop {
        let n = c.pread(&f, &mut buf, off).map_err(|e| op_err(path, e))?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n]).map_err(|e| Fail(1, format!("output: {e}")))?;
        off += n as u64;
    }
    out.flush().map_err(|e| Fail(1, format!("output: {e}")))?;
    c.close(f).map_err(|e| op_err(path, e))
}

pub fn copy_in(c: &mut Client, path: &str, input: &mut dyn Read) -> Result<(), Fail> {
    let f = c.create(path).map_err(|e| op_err(path, e))?;
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut off = 0u64;
    loop {
        let n = input.read(&mut buf).map_err(|e| Fail(1, format!("input: {e}")))?;
        if n == 0 {
            break;
        }
        let mut done = 0;
        while done < n {
            let w = c.pwrite(&f, &buf[done..n], off).map_err(|e| op_err(path, e))?;
            done += w;
            off += w as u64;
        }
    }
    c.fsync(&f).map_err(|e| op_err(path, e))?;
    c.close(f).map_err(|e| op_err(path, e))
}
