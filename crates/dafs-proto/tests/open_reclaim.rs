//! OPEN with RECLAIM carries the open id the client asks back in `mode` (protocol.md
//! §6.12): any value decodes there, while without RECLAIM `mode` is permission bits.

use dafs_proto::types::open_flags;
use dafs_proto::*;

fn decode_open(flags: u32, mode: u32) -> Result<u32, DecodeError> {
    let h = Header::request(Opcode::Open, 7, 0, 1, 0);
    let fh = FileHandle([9; FileHandle::LEN]);
    let req = Request::Open { fh, flags, mode, name: b"", key: b"" };
    let mut buf = Vec::new();
    encode_request(&h, &req, &mut buf, 1 << 20).expect("encodes");
    match decode_request(&buf, 1 << 20).map_err(|(_, e)| e)?.1 {
        Request::Open { mode, .. } => Ok(mode),
        other => panic!("decoded as {other:?}"),
    }
}

#[test]
fn a_reclaim_asks_any_open_id_back_through_mode() {
    let rw = open_flags::READ | open_flags::WRITE;
    let big = 0x1234_5678;
    assert_eq!(decode_open(rw | open_flags::RECLAIM, big).unwrap(), big);
    assert_eq!(decode_open(rw | open_flags::RECLAIM, u32::MAX).unwrap(), u32::MAX);
    assert_eq!(decode_open(rw, 0o644).unwrap(), 0o644);
    assert!(matches!(decode_open(rw, big), Err(DecodeError::BadValue(BadValue::ModeBits))));
}
