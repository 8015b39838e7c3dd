//! `dafs get`, `put` and `cat`: pipelined copies between a local file (or a pipe) and
//! the server. `queue_depth` requests of `block_bytes` each stay in flight in registered
//! memory while the block before them is read from or written to the local side, so
//! neither side waits for the other (the server fills or drains one buffer while this
//! process writes or reads the next).
//!
//! Nothing is forced to disk unless asked (`--sync`), like cp: `get --sync` fsyncs the
//! local copy, `put --sync` COMMITs on the server.

use std::io::{Read, Write};

use dafs_client::{CgId, Client, Error, File, IoBuf, OpenOptions, RegionId};

use crate::Fail;

/// Requests in flight by default: enough to keep the server busy while one block is
/// copied locally (measured in `dafs bench copy`: more gains nothing over shm or TCP).
pub const QUEUE_DEPTH_DEFAULT: usize = 4;
/// Requests in flight at most: the client's default slot count (each in-flight request
/// holds a session slot).
pub const QUEUE_DEPTH_MAX: usize = 32;
/// Bytes per request by default: large enough that the transfer is direct placement,
/// small enough for `queue_depth` of them to stay in cache-friendly memory.
pub const BLOCK_BYTES_DEFAULT: usize = 1 << 20;
/// Largest block accepted on the command line (the server may lower it further to
/// its max I/O size).
pub const BLOCK_BYTES_MAX: usize = 64 << 20;

/// How a transfer runs (from the command line).
#[derive(Debug, Clone, Copy)]
pub struct Pipeline {
    pub queue_depth: usize,
    pub block_bytes: usize,
    pub sync: bool,
}

impl Pipeline {
    pub fn check(&self) -> Result<(), Fail> {
        if self.queue_depth == 0 || self.queue_depth > QUEUE_DEPTH_MAX {
            return Err(Fail(2, format!("--queue-depth must be 1..={QUEUE_DEPTH_MAX}")));
        }
        if self.block_bytes == 0 || self.block_bytes > BLOCK_BYTES_MAX {
            return Err(Fail(2, format!("--block-size must be 1..={BLOCK_BYTES_MAX} bytes")));
        }
        Ok(())
    }
}

/// Parse a size with an optional k/m/g suffix (powers of two).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mul) = match t.char_indices().last() {
        Some((i, 'k')) => (&t[..i], 1usize << 10),
        Some((i, 'm')) => (&t[..i], 1 << 20),
        Some((i, 'g')) => (&t[..i], 1 << 30),
        _ => (t.as_str(), 1),
    };
    let n: usize = num.parse().map_err(|_| format!("{s:?} is not a size (e.g. 4096, 256k, 1m)"))?;
    n.checked_mul(mul).ok_or_else(|| format!("{s} is too large"))
}

/// Registered buffers and a completion group, released on every path out.
struct Buffers {
    regions: Vec<RegionId>,
    cg: CgId,
    block_bytes: usize,
}

impl Buffers {
    fn new(c: &mut Client, p: &Pipeline) -> Result<Buffers, Error> {
        // The server's limit per request; a larger block is split into its size.
        let block_bytes = p.block_bytes.min(c.io_bytes_max());
        let cg = c.create_cg()?;
        let mut b = Buffers { regions: Vec::with_capacity(p.queue_depth), cg, block_bytes };
        for _ in 0..p.queue_depth {
            match c.alloc_registered(block_bytes) {
                Ok(r) => b.regions.push(r),
                Err(e) => {
                    b.release(c);
                    return Err(e);
                }
            }
        }
        Ok(b)
    }

    /// Drain what is still in flight (after an error) and give everything back.
    fn release(self, c: &mut Client) {
        while c.outstanding(self.cg) > 0 {
            if c.wait_one(self.cg, None).is_err() {
                break;
            }
        }
        let _ = c.destroy_cg(self.cg);
        for r in self.regions {
            let _ = c.unregister(r);
        }
    }
}

/// Copy the remote file `path` to `out`; `on_progress` gets the bytes done so far.
/// Reads until the first short block, so a file that grows or shrinks meanwhile yields
/// the bytes up to the end of file as the server saw it at that block.
pub fn copy_out(
    c: &mut Client,
    path: &str,
    out: &mut dyn Write,
    p: &Pipeline,
    on_open: &mut dyn FnMut(u64),
    on_progress: &mut dyn FnMut(u64),
) -> Result<u64, Fail> {
    let f = c.open(path, OpenOptions::read()).map_err(|e| crate::op_err(path, e))?;
    on_open(f.attr.size);
    let r = match Buffers::new(c, p) {
        Ok(b) => {
            let r = read_blocks(c, &f, &b, out, on_progress);
            b.release(c);
            r.map_err(|e| e.fail(path, "write"))
        }
        Err(e) => Err(crate::op_err("register", e)),
    };
    let closed = c.close(f).map_err(|e| crate::op_err(path, e));
    let n = r?;
    closed?;
    Ok(n)
}

/// Which side of a copy failed.
enum Side {
    Remote(Error),
    Local(std::io::Error),
    /// The server wrote fewer bytes than asked (a full disk reports an error instead).
    ShortWrite {
        wrote: usize,
        asked: usize,
    },
}

impl Side {
    fn fail(self, path: &str, local: &str) -> Fail {
        match self {
            Side::Remote(e) => crate::op_err(path, e),
            Side::Local(e) => Fail(1, format!("{local}: {e}")),
            Side::ShortWrite { wrote, asked } => {
                Fail(1, format!("{path}: short write: {wrote} of {asked} bytes"))
            }
        }
    }
}

fn submit_read(c: &mut Client, f: &File, b: &Buffers, slot: usize, block: u64) -> Result<(), Side> {
    let len = b.block_bytes;
    let buf = IoBuf::Region { region: b.regions[slot], offset: 0, len };
    c.submit_read(f, block * len as u64, buf, b.cg, block).map_err(Side::Remote).map(|_| ())
}

fn read_blocks(
    c: &mut Client,
    f: &File,
    b: &Buffers,
    out: &mut dyn Write,
    on_progress: &mut dyn FnMut(u64),
) -> Result<u64, Side> {
    let qd = b.regions.len() as u64;
    // Block k lives in slot k % qd; blocks next_out..next_submit are in flight or done.
    let mut got: Vec<Option<(usize, bool)>> = vec![None; qd as usize];
    let mut next_submit = 0u64;
    while next_submit < qd {
        submit_read(c, f, b, (next_submit % qd) as usize, next_submit)?;
        next_submit += 1;
    }
    let mut next_out = 0u64;
    let mut done = 0u64;
    loop {
        let slot = (next_out % qd) as usize;
        while got[slot].is_none() {
            let d = c.wait_one(b.cg, None).map_err(Side::Remote)?.ok_or(Side::Remote(
                Error::InvalidArgument("completion group empty with reads outstanding"),
            ))?;
            let n = d.result.map_err(Side::Remote)?;
            got[(d.user_data % qd) as usize] = Some((n, d.eof));
        }
        let (n, eof) = got[slot].take().expect("waited for above");
        debug_assert!(n <= b.block_bytes);
        let data = c.region(b.regions[slot]).map_err(Side::Remote)?;
        out.write_all(&data[..n]).map_err(Side::Local)?;
        done += n as u64;
        next_out += 1;
        on_progress(done);
        if n < b.block_bytes || eof {
            // End of file: what is still in flight lies beyond it (drained by release).
            break;
        }
        submit_read(c, f, b, slot, next_submit)?;
        next_submit += 1;
    }
    out.flush().map_err(Side::Local)?;
    Ok(done)
}

/// Copy `input` to the remote `path`, created if missing and truncated if it exists.
/// `--sync` COMMITs before the close.
pub fn copy_in(
    c: &mut Client,
    path: &str,
    input: &mut dyn Read,
    local: &str,
    p: &Pipeline,
    on_progress: &mut dyn FnMut(u64),
) -> Result<u64, Fail> {
    let f = create_for_put(c, path).map_err(|e| crate::op_err(path, e))?;
    let r = match Buffers::new(c, p) {
        Ok(b) => {
            let r = write_blocks(c, &f, &b, input, on_progress);
            b.release(c);
            r.map_err(|e| e.fail(path, local))
        }
        Err(e) => Err(crate::op_err("register", e)),
    };
    let synced = match (&r, p.sync) {
        (Ok(_), true) => c.fsync(&f).map_err(|e| crate::op_err(path, e)),
        _ => Ok(()),
    };
    let closed = c.close(f).map_err(|e| crate::op_err(path, e));
    let n = r?;
    synced?;
    closed?;
    Ok(n)
}

/// Open `path` for the copy. A new file is created exclusively and not truncated: an
/// O_TRUNC on a file just created costs nothing in bytes but makes some local file
/// systems (ext4's replace-via-truncate heuristic) flush the file at its close. An
/// existing file (or a symlink to one) is opened with truncation, as cp does.
fn create_for_put(c: &mut Client, path: &str) -> Result<File, Error> {
    let fresh = OpenOptions::write_only().create(true).exclusive(true);
    match c.open(path, fresh) {
        Err(Error::Status(dafs_client::dafs_proto::Status::Exist)) => {
            c.open(path, OpenOptions::write_only().create(true).truncate(true))
        }
        r => r,
    }
}

fn write_blocks(
    c: &mut Client,
    f: &File,
    b: &Buffers,
    input: &mut dyn Read,
    on_progress: &mut dyn FnMut(u64),
) -> Result<u64, Side> {
    let mut free: Vec<usize> = (0..b.regions.len()).rev().collect();
    // (slot, length) of each request by its user_data.
    let mut lens = vec![0usize; b.regions.len()];
    let mut off = 0u64;
    let mut written = 0u64;
    let mut eof = false;
    loop {
        while !eof {
            let Some(slot) = free.pop() else { break };
            let buf = c.region_mut(b.regions[slot]).map_err(Side::Remote)?;
            let n = read_full(input, buf).map_err(Side::Local)?;
            if n == 0 {
                free.push(slot);
                eof = true;
                break;
            }
            eof = n < b.block_bytes;
            lens[slot] = n;
            let io = IoBuf::Region { region: b.regions[slot], offset: 0, len: n };
            c.submit_write(f, off, io, b.cg, slot as u64).map_err(Side::Remote)?;
            off += n as u64;
        }
        if c.outstanding(b.cg) == 0 {
            return Ok(written);
        }
        let d = c.wait_one(b.cg, None).map_err(Side::Remote)?.ok_or(Side::Remote(
            Error::InvalidArgument("completion group empty with writes outstanding"),
        ))?;
        let slot = d.user_data as usize;
        let n = d.result.map_err(Side::Remote)?;
        if n != lens[slot] {
            return Err(Side::ShortWrite { wrote: n, asked: lens[slot] });
        }
        written += n as u64;
        on_progress(written);
        free.push(slot);
    }
}

fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> (tempfile::TempDir, dafs_server::ServerHandle, Client) {
        let export = tempfile::tempdir().unwrap();
        let mut cfg = dafs_server::ServerConfig::new(export.path());
        cfg.listen = "127.0.0.1:0".into();
        cfg.shm_socket = None;
        cfg.admin_socket = None;
        let srv = dafs_server::start(cfg).unwrap();
        let c = Client::connect(srv.local_addr(), Default::default()).unwrap();
        (export, srv, c)
    }

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
    }

    /// A sink that runs `f` once, after the first block arrived (while later requests
    /// are still to be submitted).
    struct AfterFirst<F: FnMut()> {
        got: Vec<u8>,
        f: Option<F>,
    }
    impl<F: FnMut()> Write for AfterFirst<F> {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.got.extend_from_slice(b);
            if let Some(mut f) = self.f.take() {
                f();
            }
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn get(c: &mut Client, name: &str, out: &mut dyn Write, qd: usize, bs: usize) -> u64 {
        let p = Pipeline { queue_depth: qd, block_bytes: bs, sync: false };
        copy_out(c, name, out, &p, &mut |_| {}, &mut |_| {}).map_err(|f| f.1).unwrap()
    }

    #[test]
    fn get_round_trips_every_size_and_depth() {
        let (dir, _srv, mut c) = server();
        for (i, &size) in [0usize, 1, 4095, 4096, 4097, 5 * 4096, 5 * 4096 + 17].iter().enumerate()
        {
            let data = bytes(size, i as u8);
            std::fs::write(dir.path().join("f"), &data).unwrap();
            for qd in [1, 2, 4, 7] {
                let mut out = Vec::new();
                assert_eq!(get(&mut c, "f", &mut out, qd, 4096), size as u64);
                assert!(out == data, "size {size} qd {qd}: differs");
            }
            let mut input = &data[..];
            let p = Pipeline { queue_depth: 3, block_bytes: 4096, sync: true };
            copy_in(&mut c, "g", &mut input, "mem", &p, &mut |_| {}).map_err(|f| f.1).unwrap();
            assert!(std::fs::read(dir.path().join("g")).unwrap() == data, "put of {size}");
        }
    }

    /// A file that shrinks or grows during a get: the copy ends at the end of file the
    /// server sees when it reads there, and holds exactly the file's bytes up to it.
    #[test]
    fn get_of_a_file_changing_size() {
        let (dir, _srv, mut c) = server();
        let path = dir.path().join("f");
        let data = bytes(16 * 4096, 9);
        for qd in [1, 3] {
            std::fs::write(&path, &data).unwrap();
            let shrink = || {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .set_len(10_000)
                    .unwrap()
            };
            let mut out = AfterFirst { got: Vec::new(), f: Some(shrink) };
            let n = get(&mut c, "f", &mut out, qd, 4096) as usize;
            // Reads submitted before the cut may have run before it (qd 3: blocks 1
            // and 2); the one submitted after it ends the copy at the new end of file.
            let ok = if qd == 1 { vec![10_000] } else { vec![10_000, 3 * 4096] };
            assert!(ok.contains(&n), "qd {qd}: {n} bytes");
            assert!(out.got == data[..n], "qd {qd}: shrunk copy differs");

            std::fs::write(&path, &data).unwrap();
            let extra = bytes(3 * 4096 + 5, 1);
            let grow = || {
                use std::io::Write as _;
                let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
                f.write_all(&extra).unwrap();
            };
            let mut out = AfterFirst { got: Vec::new(), f: Some(grow) };
            let n = get(&mut c, "f", &mut out, qd, 4096);
            let mut want = data.clone();
            want.extend_from_slice(&extra);
            assert_eq!(n, want.len() as u64, "qd {qd}");
            assert!(out.got == want, "qd {qd}: grown copy differs");
        }
    }

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("256k").unwrap(), 256 << 10);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
        assert!(parse_size("x").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999999999999g").is_err());
    }

    #[test]
    fn pipeline_limits() {
        let p = |queue_depth, block_bytes| Pipeline { queue_depth, block_bytes, sync: false };
        assert!(p(1, 1).check().is_ok());
        assert!(p(QUEUE_DEPTH_MAX, BLOCK_BYTES_MAX).check().is_ok());
        assert!(p(0, 4096).check().is_err());
        assert!(p(QUEUE_DEPTH_MAX + 1, 4096).check().is_err());
        assert!(p(4, 0).check().is_err());
        assert!(p(4, BLOCK_BYTES_MAX + 1).check().is_err());
    }
}
