//! Requests and replies: one variant per op (replies grouped by body shape), with
//! encode/decode. The byte layout of every fixed part is listed in `docs/protocol.md`.

mod reply;
mod request;
#[cfg(test)]
mod tests;

pub use reply::Reply;
pub use request::Request;

use crate::codec::{BadValue, Dec, DecodeError, Enc, EncodeError, Frame};
use crate::header::Header;

use crate::status::Status;

/// Size of nonces and proofs in the authentication exchange.
pub const NONCE_LEN: usize = 32;
/// Size of one group id in SET_CRED's packed group list (a little-endian u32).
pub const GROUP_ID_LEN: usize = std::mem::size_of::<u32>();
/// Longest node id a CLUSTER_MAP reply carries (as `dafs_cluster::NODE_ID_BYTES_MAX`).
pub const CLUSTER_NODE_ID_BYTES_MAX: usize = 128;

/// Encode a request (appending to `buf`). `h.opcode` must match the request.
pub fn encode_request(
    h: &Header,
    req: &Request,
    buf: &mut Vec<u8>,
    max_len: usize,
) -> Result<usize, EncodeError> {
    assert_eq!(h.opcode, req.opcode(), "header opcode must match the request");
    assert!(!h.is_reply);
    let mut e = Enc::new(buf);
    req.enc(&mut e);
    e.finish(h, max_len)
}

/// Encode a reply (appending to `buf`). A `Reply::Error` forces the status into the header.
pub fn encode_reply(
    h: &Header,
    reply: &Reply,
    buf: &mut Vec<u8>,
    max_len: usize,
) -> Result<usize, EncodeError> {
    assert!(h.is_reply);
    assert!(
        !matches!(reply, Reply::Error(Status::WrongNode)),
        "WRONG_NODE carries the node's epoch: send Reply::WrongNode"
    );
    assert!(reply.fits(h.opcode), "reply body {reply:?} does not fit op {:?}", h.opcode);
    let mut h = *h;
    h.status = reply.status();
    let mut e = Enc::new(buf);
    reply.enc(&mut e);
    e.finish(&h, max_len)
}

/// Decode one complete request message.
///
/// On a decode error after the header was understood, the header is returned with the
/// error so the server can still answer that slot with `BADXDR`.
pub fn decode_request(
    buf: &[u8],
    max_len: usize,
) -> Result<(Header, Request<'_>), (Option<Header>, DecodeError)> {
    let frame = Frame::split(buf, max_len).map_err(|e| (None, e))?;
    let h = frame.raw.validate().map_err(|e| (None, e))?;
    if h.is_reply {
        return Err((None, DecodeError::NotARequest));
    }
    let mut d = Dec::new(frame.fixed, frame.heap);
    let req = Request::dec(h.opcode, &mut d).map_err(|e| (Some(h), e))?;
    if !matches!(req, Request::Reserved(_)) {
        d.end().map_err(|e| (Some(h), e))?;
    }
    Ok((h, req))
}

/// Decode one complete reply message.
pub fn decode_reply(buf: &[u8], max_len: usize) -> Result<(Header, Reply<'_>), DecodeError> {
    let frame = Frame::split(buf, max_len)?;
    let h = frame.raw.validate()?;
    if !h.is_reply {
        return Err(DecodeError::NotAReply);
    }
    if h.status == Status::WrongNode {
        let mut d = Dec::new(frame.fixed, frame.heap);
        let epoch = d.u64()?;
        d.end()?;
        return Ok((h, Reply::WrongNode { epoch }));
    }
    if h.status != Status::Ok {
        if !frame.fixed.is_empty() || !frame.heap.is_empty() {
            return Err(DecodeError::Trailing);
        }
        return Ok((h, Reply::Error(h.status)));
    }
    if h.opcode.is_reserved() {
        return Err(DecodeError::BadValue(BadValue::SuccessReplyToReservedOp));
    }
    let mut d = Dec::new(frame.fixed, frame.heap);
    let r = Reply::dec(h.opcode, &mut d)?;
    d.end()?;
    Ok((h, r))
}
