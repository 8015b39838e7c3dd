//! Any byte string given to `decode_reply` must not panic; whatever decodes must borrow
//! only from the input and re-encode to a message that decodes to the same value.
#![no_main]

use dafs_proto::{decode_reply, encode_reply, limits, DirEntries, Reply};
use libfuzzer_sys::fuzz_target;

const MAX: usize = limits::MSG_SIZE_BYTES_MAX as usize;

fn within(buf: &[u8], s: &[u8]) -> bool {
    let (b, p) = (buf.as_ptr() as usize, s.as_ptr() as usize);
    p >= b && p + s.len() <= b + buf.len()
}

fuzz_target!(|data: &[u8]| {
    // The packed READDIR list iterator on its own, over arbitrary bytes.
    for e in DirEntries::new(data).flatten() {
        assert!(within(data, e.name));
    }

    let Ok((h, reply)) = decode_reply(data, MAX) else { return };
    assert_eq!(h.status, reply.status());
    assert!(reply.fits(h.opcode));
    match reply {
        Reply::ReadInline { data: d, .. } => assert!(within(data, d)),
        Reply::ReadLink { target } => assert!(within(data, target)),
        Reply::ReadDir { count, entries, .. } => {
            assert!(within(data, entries));
            let mut n = 0u32;
            for e in DirEntries::new(entries) {
                let e = e.expect("a decoded READDIR reply holds only valid entries");
                assert!(within(data, e.name));
                n += 1;
            }
            assert_eq!(n, count);
        }
        _ => {}
    }
    let mut out = Vec::new();
    encode_reply(&h, &reply, &mut out, MAX).expect("a decoded reply re-encodes");
    let (h2, reply2) = decode_reply(&out, MAX).expect("a re-encoded reply decodes");
    assert_eq!(h, h2);
    assert_eq!(reply, reply2);
});
