//! Property tests for the decoders: no byte string makes them panic, allocate beyond the
//! input, or accept something that does not re-encode to the same value; and encode ->
//! decode is the identity for valid messages.
//!
//! Everything here goes through the public API only.

mod fuzz_gen;

use dafs_proto::header::RawHeader;
use dafs_proto::types::DirEntries;
use dafs_proto::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

use fuzz_gen::*;

// ---------------------------------------------------------------------------------------
// Checks applied to every decode.
// ---------------------------------------------------------------------------------------

/// `s` lies entirely inside `buf`: the decoder borrowed it, it did not allocate it.
fn assert_within(buf: &[u8], s: &[u8], what: &str) {
    let (b, p) = (buf.as_ptr() as usize, s.as_ptr() as usize);
    assert!(
        s.len() <= buf.len(),
        "{what}: slice of {} bytes from a {}-byte message",
        s.len(),
        buf.len()
    );
    assert!(
        p >= b && p + s.len() <= b + buf.len(),
        "{what}: slice does not point into the message"
    );
}

fn request_slices<'a>(r: &Request<'a>) -> Vec<&'a [u8]> {
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

fn reply_slices<'a>(r: &Reply<'a>) -> Vec<&'a [u8]> {
    match *r {
        Reply::ReadInline { data, .. } => vec![data],
        Reply::ReadLink { target } => vec![target],
        Reply::ReadDir { entries, .. } => {
            let mut v = vec![entries];
            for e in DirEntries::new(entries) {
                v.push(e.expect("a decoded READDIR reply holds only valid entries").name);
            }
            v
        }
        _ => vec![],
    }
}

/// Decode `buf` as a request; on success check borrowing, and that the value re-encodes
/// to a canonical message that decodes to the same value (and re-encodes to itself).
fn check_request(buf: &[u8]) -> bool {
    let Ok((h, r)) = decode_request(buf, MAX) else { return false };
    assert!(!h.is_reply);
    assert_eq!(h.opcode, r.opcode());
    for s in request_slices(&r) {
        assert_within(buf, s, "request");
    }
    let mut out = Vec::new();
    encode_request(&h, &r, &mut out, REENCODE_MAX).expect("a decoded request re-encodes");
    let (h2, r2) = decode_request(&out, REENCODE_MAX).expect("a re-encoded request decodes");
    assert_eq!(h2, h);
    assert_eq!(r2, r);
    let mut out2 = Vec::new();
    encode_request(&h2, &r2, &mut out2, REENCODE_MAX).unwrap();
    assert_eq!(out2, out, "canonical encoding is stable");
    true
}

fn check_reply(buf: &[u8]) -> bool {
    let Ok((h, r)) = decode_reply(buf, MAX) else { return false };
    assert!(h.is_reply);
    assert_eq!(h.status, r.status());
    assert!(r.fits(h.opcode));
    for s in reply_slices(&r) {
        assert_within(buf, s, "reply");
    }
    let mut out = Vec::new();
    encode_reply(&h, &r, &mut out, REENCODE_MAX).expect("a decoded reply re-encodes");
    let (h2, r2) = decode_reply(&out, REENCODE_MAX).expect("a re-encoded reply decodes");
    assert_eq!(h2, h);
    assert_eq!(r2, r);
    let mut out2 = Vec::new();
    encode_reply(&h2, &r2, &mut out2, REENCODE_MAX).unwrap();
    assert_eq!(out2, out, "canonical encoding is stable");
    true
}

fn check_raw_header(buf: &[u8]) {
    if let Ok(raw) = RawHeader::parse(buf) {
        assert!(buf.len() >= HEADER_LEN);
        assert_eq!(raw.total_len(), HEADER_LEN as u64 + raw.fixed_len as u64 + raw.heap_len as u64);
        let _ = raw.validate();
    }
}

fn check_dir_entries(buf: &[u8]) {
    let mut n = 0usize;
    let mut failed = false;
    for e in DirEntries::new(buf) {
        assert!(!failed, "DirEntries yields nothing after an error");
        n += 1;
        assert!(n <= buf.len() / DirEntry::FIXED_LEN + 1, "DirEntries makes progress");
        match e {
            Ok(e) => {
                assert_within(buf, e.name, "dir entry name");
                assert!(!e.name.is_empty() && e.name.len() <= limits::NAME_BYTES_MAX);
            }
            Err(_) => failed = true,
        }
    }
}

/// Everything that may be done with an untrusted message.
fn check_all(buf: &[u8]) {
    check_raw_header(buf);
    check_request(buf);
    check_reply(buf);
    check_dir_entries(buf);
    if buf.len() > HEADER_LEN {
        check_dir_entries(&buf[HEADER_LEN..]);
    }
}

// ---------------------------------------------------------------------------------------
// Mutations of valid messages.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Mutation {
    Flip(Index, u8),
    SetU32(Index, u32),
    Truncate(Index),
    Extend(Vec<u8>),
    FixedLen(u32),
    HeapLen(u32),
    /// Move the fixed/heap boundary, keeping the total consistent.
    Shift(i8),
    /// Overwrite one 8-byte word of the body with a plausible heap reference.
    HeapRef(Index, u16, u16),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<Index>(), 1u8..=255).prop_map(|(i, x)| Mutation::Flip(i, x)),
        2 => (any::<Index>(), any::<u32>()).prop_map(|(i, v)| Mutation::SetU32(i, v)),
        2 => any::<Index>().prop_map(Mutation::Truncate),
        1 => vec(any::<u8>(), 1..64).prop_map(Mutation::Extend),
        1 => any::<u32>().prop_map(Mutation::FixedLen),
        1 => any::<u32>().prop_map(Mutation::HeapLen),
        2 => any::<i8>().prop_map(Mutation::Shift),
        2 => (any::<Index>(), any::<u16>(), any::<u16>()).prop_map(|(i, o, l)| Mutation::HeapRef(i, o, l)),
    ]
}

fn get_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().unwrap())
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn apply(buf: &mut Vec<u8>, m: &Mutation) {
    match m {
        Mutation::Flip(i, x) if !buf.is_empty() => {
            let i = i.index(buf.len());
            buf[i] ^= x;
        }
        Mutation::SetU32(i, v) if buf.len() >= 4 => {
            let i = i.index(buf.len() - 3);
            put_u32(buf, i, *v);
        }
        Mutation::Truncate(i) if !buf.is_empty() => {
            let n = i.index(buf.len());
            buf.truncate(n);
        }
        Mutation::Extend(bytes) => buf.extend_from_slice(bytes),
        Mutation::FixedLen(v) if buf.len() >= HEADER_LEN => put_u32(buf, 36, *v),
        Mutation::HeapLen(v) if buf.len() >= HEADER_LEN => put_u32(buf, 40, *v),
        Mutation::Shift(d) if buf.len() >= HEADER_LEN => {
            let (f, h) = (get_u32(buf, 36) as i64, get_u32(buf, 40) as i64);
            let d = *d as i64;
            if f + d >= 0 && h - d >= 0 {
                put_u32(buf, 36, (f + d) as u32);
                put_u32(buf, 40, (h - d) as u32);
            }
        }
        Mutation::HeapRef(i, off, len) if buf.len() >= HEADER_LEN + 8 => {
            let at = HEADER_LEN + i.index(buf.len() - HEADER_LEN - 7);
            let heap_len = get_u32(buf, 40).max(1);
            put_u32(buf, at, *off as u32 % (heap_len + 8));
            put_u32(buf, at + 4, *len as u32 % (heap_len + 8));
        }
        _ => {}
    }
}

/// A header that parses, with random opcode/flags/status and a random body whose
/// fixed part is often exactly the length the op defines.
fn headed_random() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![
            4 => prop::sample::select(Opcode::ALL).prop_map(|o| o.to_wire()),
            1 => any::<u16>(),
        ],
        any::<bool>(),
        prop_oneof![3 => Just(0u32), 1 => prop::sample::select(Status::ALL).prop_map(|s| s.to_wire()), 1 => any::<u32>()],
        (any::<u64>(), any::<u32>(), any::<u32>(), any::<u32>()),
        any::<bool>(),
        vec(any::<u8>(), 0..200),
        vec(any::<u8>(), 0..300),
    )
        .prop_map(|(op, is_reply, status, (sid, slot, seq, hs), exact, mut fixed, heap)| {
            if exact {
                let table = if is_reply { REPLY_FIXED_LEN } else { REQ_FIXED_LEN };
                if let Some(&(_, n)) = table.iter().find(|(o, _)| o.to_wire() == op) {
                    fixed.resize(n, 0);
                }
            }
            let mut buf = Vec::with_capacity(HEADER_LEN + fixed.len() + heap.len());
            buf.extend_from_slice(&MAGIC.to_le_bytes());
            buf.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
            buf.extend_from_slice(&op.to_le_bytes());
            buf.extend_from_slice(&(is_reply as u32).to_le_bytes());
            buf.extend_from_slice(&status.to_le_bytes());
            buf.extend_from_slice(&sid.to_le_bytes());
            buf.extend_from_slice(&slot.to_le_bytes());
            buf.extend_from_slice(&seq.to_le_bytes());
            buf.extend_from_slice(&hs.to_le_bytes());
            buf.extend_from_slice(&(fixed.len() as u32).to_le_bytes());
            buf.extend_from_slice(&(heap.len() as u32).to_le_bytes());
            buf.extend_from_slice(&0u32.to_le_bytes());
            buf.extend_from_slice(&fixed);
            buf.extend_from_slice(&heap);
            buf
        })
}

// ---------------------------------------------------------------------------------------
// Properties.
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// (a) Arbitrary bytes never panic any decoder.
    #[test]
    fn random_bytes_never_panic(buf in vec(any::<u8>(), 0..4096)) {
        check_all(&buf);
    }

    /// (a) Same, behind a well-formed header so the body decoders are reached.
    #[test]
    fn random_bodies_never_panic(buf in headed_random()) {
        check_all(&buf);
    }

    /// (b) Mutated valid requests never panic; whatever still decodes is stable.
    #[test]
    fn mutated_requests(p in parts(), h in hdr(), muts in vec(mutation(), 1..5)) {
        let mut buf = encode_req(&h, &build_request(&p));
        prop_assert!(check_request(&buf), "the unmutated request decodes");
        for m in &muts {
            apply(&mut buf, m);
        }
        check_all(&buf);
    }

    /// (b) Mutated valid replies never panic; whatever still decodes is stable.
    #[test]
    fn mutated_replies(p in parts(), h in hdr(), muts in vec(mutation(), 1..5)) {
        let (op, reply) = build_reply(&p);
        let mut buf = encode_rep(&h, op, &reply);
        prop_assert!(check_reply(&buf), "the unmutated reply decodes");
        for m in &muts {
            apply(&mut buf, m);
        }
        check_all(&buf);
    }

    /// (c) encode -> decode is the identity, for every request kind, random header fields.
    #[test]
    fn any_request_roundtrips(p in parts(), h in hdr()) {
        let req = build_request(&p);
        let buf = encode_req(&h, &req);
        let (h2, r2) = decode_request(&buf, MAX).expect("decodes");
        prop_assert_eq!(h2, Header::request(req.opcode(), h.session_id, h.slot_id, h.sequence_id, h.highest_slot));
        prop_assert_eq!(r2, req);
        if !matches!(req, Request::Reserved(_)) {
            let fixed = REQ_FIXED_LEN.iter().find(|(o, _)| *o == req.opcode()).unwrap().1;
            prop_assert_eq!(RawHeader::parse(&buf).unwrap().fixed_len as usize, fixed);
        }
    }

    /// (c) encode -> decode is the identity for every reply shape.
    #[test]
    fn any_reply_roundtrips(p in parts(), h in hdr()) {
        let (op, reply) = build_reply(&p);
        let buf = encode_rep(&h, op, &reply);
        let (h2, r2) = decode_reply(&buf, MAX).expect("decodes");
        prop_assert_eq!(h2.opcode, op);
        prop_assert_eq!(h2.status, reply.status());
        prop_assert_eq!((h2.session_id, h2.slot_id, h2.sequence_id, h2.highest_slot), (h.session_id, h.slot_id, h.sequence_id, h.target_highest));
        prop_assert_eq!(r2, reply);
        let fixed = RawHeader::parse(&buf).unwrap().fixed_len as usize;
        if let Reply::Error(_) = reply {
            prop_assert_eq!(fixed, 0);
        } else if let Reply::WrongNode { .. } = reply {
            prop_assert_eq!(fixed, 8);
        } else {
            prop_assert_eq!(fixed, REPLY_FIXED_LEN.iter().find(|(o, _)| *o == op).unwrap().1);
        }
    }

    /// (c) LOOKUP with random valid paths.
    #[test]
    fn lookup_roundtrips(dir in fh_bytes(), path in valid_path(), follow in any::<bool>(), h in hdr()) {
        let path = if path.is_empty() { b"x".to_vec() } else { path };
        let req = Request::Lookup { dir: FileHandle(dir), path: &path, follow };
        let buf = encode_req(&h, &req);
        let (_, r2) = decode_request(&buf, MAX).unwrap();
        prop_assert_eq!(r2, req);
    }

    /// (c) WRITE_INLINE with random data.
    #[test]
    fn write_inline_roundtrips(open_id in any::<u64>(), offset in any::<u64>(), stable in any::<bool>(), data in vec(any::<u8>(), 0..4096), h in hdr()) {
        let req = Request::WriteInline { open_id, offset, stable, data: &data };
        let buf = encode_req(&h, &req);
        prop_assert_eq!(buf.len(), HEADER_LEN + 32 + data.len());
        let (_, r2) = decode_request(&buf, MAX).unwrap();
        prop_assert_eq!(r2, req);
    }

    /// (c) READ_DIRECT with random numbers.
    #[test]
    fn read_direct_roundtrips(open_id in any::<u64>(), offset in any::<u64>(), len in 0..=limits::DIRECT_BYTES_MAX, key in any::<u64>(), roff in any::<u64>(), h in hdr()) {
        let req = Request::ReadDirect { open_id, offset, len, region: RemoteRegion { key, offset: roff } };
        let buf = encode_req(&h, &req);
        let (_, r2) = decode_request(&buf, MAX).unwrap();
        prop_assert_eq!(r2, req);
    }

    /// (c) RENAME with random valid names.
    #[test]
    fn rename_roundtrips(a in fh_bytes(), b in fh_bytes(), from in valid_name(), to in valid_name(), flags in 0u32..3, h in hdr()) {
        let req = Request::Rename { from_dir: FileHandle(a), from_name: &from, to_dir: FileHandle(b), to_name: &to, flags };
        let buf = encode_req(&h, &req);
        prop_assert_eq!(buf.len(), HEADER_LEN + 104 + from.len() + to.len());
        // The flags word follows both name references, the pad word after it.
        prop_assert_eq!(&buf[HEADER_LEN + 96..HEADER_LEN + 104], &[flags.to_le_bytes(), [0; 4]].concat()[..]);
        let (_, r2) = decode_request(&buf, MAX).unwrap();
        prop_assert_eq!(r2, req);
    }

    /// (c) RENAME flags with an unknown bit, or NOREPLACE and EXCHANGE together, are
    /// refused as `BadValue::RenameFlags`; the pad word after them is ignored.
    #[test]
    fn rename_bad_flags_are_refused(flags in any::<u32>(), pad in any::<u32>(), h in hdr()) {
        let rename = |flags| Request::Rename { from_dir: FileHandle([1; FileHandle::LEN]), from_name: b"a", to_dir: FileHandle([2; FileHandle::LEN]), to_name: b"b", flags };
        let mut buf = encode_req(&h, &rename(0));
        buf[HEADER_LEN + 96..HEADER_LEN + 100].copy_from_slice(&flags.to_le_bytes());
        buf[HEADER_LEN + 100..HEADER_LEN + 104].copy_from_slice(&pad.to_le_bytes());
        let r = decode_request(&buf, MAX);
        if flags <= rename_flags::EXCHANGE {
            let (_, r2) = r.unwrap();
            prop_assert_eq!(r2, rename(flags));
        } else {
            prop_assert_eq!(r.unwrap_err().1, DecodeError::BadValue(BadValue::RenameFlags));
        }
    }

    /// (c) SETATTR with random valid masks; invalid masks are refused.
    #[test]
    fn setattr_roundtrips(p in parts(), h in hdr(), raw_mask in any::<u32>()) {
        let set = valid_setattrs(&p);
        let req = Request::SetAttr { fh: FileHandle(p.fh1), set };
        let buf = encode_req(&h, &req);
        let (_, r2) = decode_request(&buf, MAX).unwrap();
        prop_assert_eq!(r2, req);

        use setattr_mask::*;
        let bad = SetAttrs { mask: raw_mask, ..set };
        let valid = raw_mask & !ALL == 0
            && !(raw_mask & ATIME != 0 && raw_mask & ATIME_NOW != 0)
            && !(raw_mask & MTIME != 0 && raw_mask & MTIME_NOW != 0)
            && !(raw_mask & MODE != 0 && set.mode & !0o7777 != 0);
        let buf = encode_req(&h, &Request::SetAttr { fh: FileHandle(p.fh1), set: bad });
        prop_assert_eq!(decode_request(&buf, MAX).is_ok(), valid);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// (d) A READDIR reply whose packed list is damaged never decodes to a slice outside
    /// the message, and never decodes with a count that disagrees with its entries.
    #[test]
    fn damaged_readdir_lists(ents in dir_entries(), h in hdr(), muts in vec(mutation(), 1..4)) {
        let (mut packed, count) = ents;
        for m in &muts {
            apply(&mut packed, m);
        }
        check_dir_entries(&packed);
        let n = DirEntries::new(&packed).take_while(|e| e.is_ok()).count() as u32;
        let all_ok = DirEntries::new(&packed).all(|e| e.is_ok());
        for claimed in [count, n] {
            let reply = Reply::ReadDir { eof: false, count: claimed, entries: &packed };
            let buf = encode_rep(&h, Opcode::ReadDir, &reply);
            let ok = check_reply(&buf);
            prop_assert_eq!(ok, all_ok && claimed == n);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Deterministic checks of the spec tables.
// ---------------------------------------------------------------------------------------

fn fixed_parts() -> Parts {
    Parts {
        kind: 0,
        fh1: [1; FileHandle::LEN],
        fh2: [2; FileHandle::LEN],
        nonce1: [3; 32],
        nonce2: [4; 32],
        a: 5,
        b: 6,
        c: 7,
        x: 8,
        y: 9,
        flag: true,
        name1: b"n1".to_vec(),
        name2: b"n2".to_vec(),
        path: b"a/b".to_vec(),
        target: b"/t".to_vec(),
        data: b"data".to_vec(),
        entries: Vec::new(),
        entries_count: 0,
    }
}

#[test]
fn every_opcode_is_covered_with_its_documented_fixed_len() {
    let h = Hdr { session_id: 1, slot_id: 2, sequence_id: 3, highest_slot: 4, target_highest: 5 };
    let mut seen_req = Vec::new();
    for kind in 0..REQUEST_KINDS {
        let p = Parts { kind, ..fixed_parts() };
        let req = build_request(&p);
        let buf = encode_req(&h, &req);
        assert!(check_request(&buf), "{req:?}");
        seen_req.push(req.opcode());
        if let Some(&(_, n)) = REQ_FIXED_LEN.iter().find(|(o, _)| *o == req.opcode()) {
            assert_eq!(RawHeader::parse(&buf).unwrap().fixed_len as usize, n, "{:?}", req.opcode());
        }
    }
    for &(op, _) in REQ_FIXED_LEN {
        assert!(seen_req.contains(&op), "request kind for {op:?}");
    }
    // Every non-reserved opcode has a success reply of the documented length.
    for &(op, n) in REPLY_FIXED_LEN {
        let mut found = false;
        for kind in 0..REPLY_KINDS - 1 {
            for y in 0..16 {
                let p = Parts { kind, y, ..fixed_parts() };
                let (o, reply) = build_reply(&p);
                if o == op {
                    let buf = encode_rep(&h, o, &reply);
                    assert!(check_reply(&buf));
                    assert_eq!(RawHeader::parse(&buf).unwrap().fixed_len as usize, n, "{op:?}");
                    found = true;
                }
            }
        }
        assert!(found, "reply for {op:?}");
    }
    assert_eq!(Attr::WIRE_LEN, 88);
    assert_eq!(FileHandle::LEN, 40);
    assert_eq!(DirEntry::FIXED_LEN, 24);
}

#[test]
fn reserved_ops_ignore_their_body_and_cannot_succeed() {
    let h = Header::request(Opcode::Callback, 1, 0, 1, 0);
    let mut buf = Vec::new();
    encode_request(&h, &Request::Reserved(Opcode::Callback), &mut buf, MAX).unwrap();
    // Give it an arbitrary body: still decodes, as Reserved.
    buf.extend_from_slice(&[0xAB; 20]);
    buf[36..40].copy_from_slice(&12u32.to_le_bytes());
    buf[40..44].copy_from_slice(&8u32.to_le_bytes());
    let (_, r) = decode_request(&buf, MAX).unwrap();
    assert_eq!(r, Request::Reserved(Opcode::Callback));
    // A success reply to a reserved op does not decode; NOTSUPP does.
    let mut rep = Vec::new();
    encode_reply(
        &Header::reply_to(&h, Status::Ok, 0),
        &Reply::Error(Status::NotSupp),
        &mut rep,
        MAX,
    )
    .unwrap();
    assert_eq!(decode_reply(&rep, MAX).unwrap().1, Reply::Error(Status::NotSupp));
    rep[12..16].copy_from_slice(&0u32.to_le_bytes());
    assert!(decode_reply(&rep, MAX).is_err());
}

#[test]
fn overlapping_heap_fields_decode_and_reencode_longer() {
    // RENAME whose two names point at the same heap bytes: valid on the wire (the
    // decoder does not require disjoint fields); the canonical re-encoding is longer.
    let req = Request::Rename {
        from_dir: FileHandle([1; FileHandle::LEN]),
        from_name: b"same",
        to_dir: FileHandle([2; FileHandle::LEN]),
        to_name: b"same",
        flags: rename_flags::NOREPLACE,
    };
    let mut buf = Vec::new();
    encode_request(&Header::request(Opcode::Rename, 1, 0, 1, 0), &req, &mut buf, MAX).unwrap();
    // to_name ref at fixed offset 88 -> point at offset 0; drop the second copy.
    let at = HEADER_LEN + 88;
    buf[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
    buf.truncate(buf.len() - 4);
    buf[40..44].copy_from_slice(&4u32.to_le_bytes());
    let n = buf.len();
    let (_, r) = decode_request(&buf, n).unwrap();
    assert_eq!(r, req);
    let mut out = Vec::new();
    assert!(encode_request(&Header::request(Opcode::Rename, 1, 0, 1, 0), &r, &mut out, n).is_err());
    assert!(check_request(&buf));
}

/// Writes one valid message per request kind and per reply shape as a seed corpus for
/// the cargo-fuzz targets (see fuzz/README.md). Does nothing unless `DAFS_FUZZ_SEEDS`
/// names a directory: `DAFS_FUZZ_SEEDS=fuzz/corpus cargo test -p dafs-proto --test
/// decode_fuzz write_fuzz_seeds` fills `fuzz/corpus/decode_request` and `.../decode_reply`.
#[test]
fn write_fuzz_seeds() {
    let Some(dir) = std::env::var_os("DAFS_FUZZ_SEEDS") else { return };
    let dir = std::path::PathBuf::from(dir);
    let h = Hdr { session_id: 1, slot_id: 0, sequence_id: 1, highest_slot: 0, target_highest: 7 };
    let req_dir = dir.join("decode_request");
    std::fs::create_dir_all(&req_dir).unwrap();
    for kind in 0..REQUEST_KINDS {
        let p = Parts { kind, ..fixed_parts() };
        std::fs::write(req_dir.join(format!("seed-{kind:02}")), encode_req(&h, &build_request(&p)))
            .unwrap();
    }
    let rep_dir = dir.join("decode_reply");
    std::fs::create_dir_all(&rep_dir).unwrap();
    let (packed, count) = {
        let mut v = Vec::new();
        DirEntry { cookie: 1, fileid: 2, ftype: FileType::Regular, name: b"one" }.pack(&mut v);
        DirEntry { cookie: 2, fileid: 3, ftype: FileType::Directory, name: b"two-longer" }
            .pack(&mut v);
        (v, 2)
    };
    for kind in 0..REPLY_KINDS {
        let p = Parts { kind, entries: packed.clone(), entries_count: count, ..fixed_parts() };
        let (op, reply) = build_reply(&p);
        std::fs::write(rep_dir.join(format!("seed-{kind:02}")), encode_rep(&h, op, &reply))
            .unwrap();
    }
}
