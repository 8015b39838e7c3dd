//! Any byte string given to `decode_request` must not panic; whatever decodes must
//! borrow only from the input and re-encode to a message that decodes to the same value.
#![no_main]

use dafs_proto::{decode_request, encode_request, limits, Request};
use libfuzzer_sys::fuzz_target;

const MAX: usize = limits::MSG_SIZE_BYTES_MAX as usize;
/// Heap fields may overlap on the wire; the canonical re-encoding writes each one out,
/// so it may be slightly longer than the input.
const REENCODE_MAX: usize = MAX + 2 * limits::PATH_BYTES_MAX;

fn within(buf: &[u8], s: &[u8]) -> bool {
    let (b, p) = (buf.as_ptr() as usize, s.as_ptr() as usize);
    p >= b && p + s.len() <= b + buf.len()
}

fn slices<'a>(r: &Request<'a>) -> Vec<&'a [u8]> {
    use Request::*;
    match *r {
        SessionCreate { client_id, .. } => vec![client_id],
        GetRootHandle { export } => vec![export],
        Lookup { path, .. } => vec![path],
        Create { name, .. }
        | Open { name, .. }
        | Remove { name, .. }
        | RmDir { name, .. }
        | Link { name, .. } => vec![name],
        WriteInline { data, .. } => vec![data],
        Rename { from_name, to_name, .. } => vec![from_name, to_name],
        Symlink { name, target, .. } => vec![name, target],
        _ => vec![],
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok((h, req)) = decode_request(data, MAX) else { return };
    assert_eq!(h.opcode, req.opcode());
    for s in slices(&req) {
        assert!(within(data, s), "decoded slice outside the message");
    }
    let mut out = Vec::new();
    encode_request(&h, &req, &mut out, REENCODE_MAX).expect("a decoded request re-encodes");
    let (h2, req2) = decode_request(&out, REENCODE_MAX).expect("a re-encoded request decodes");
    assert_eq!(h, h2);
    assert_eq!(req, req2);
});
