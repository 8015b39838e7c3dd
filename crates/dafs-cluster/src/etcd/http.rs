//! The smallest HTTP/1.1 client etcd's JSON gateway needs: one POST per connection
//! (`Connection: close`), a deadline on every step, a bounded reply.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::EtcdError;

/// Largest reply read, in bytes: a range over every member of the largest cluster
/// fits many times over; anything larger is not an etcd reply we asked for.
pub const REPLY_BYTES_MAX: usize = 4 << 20;

/// POST `body` (JSON) to `http://endpoint/path`; returns (status, body).
pub fn post(
    endpoint: &str,
    path: &str,
    body: &str,
    timeout: Duration,
) -> Result<(u16, Vec<u8>), EtcdError> {
    let deadline = Instant::now() + timeout;
    let mut stream = connect(endpoint, deadline)?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {endpoint}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let io = |e: std::io::Error| io_error(endpoint, e, timeout);
    stream.set_write_timeout(Some(remaining(endpoint, deadline, timeout)?)).map_err(io)?;
    stream.write_all(request.as_bytes()).map_err(io)?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        stream.set_read_timeout(Some(remaining(endpoint, deadline, timeout)?)).map_err(io)?;
        let n = stream.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        if raw.len() + n > REPLY_BYTES_MAX {
            return Err(EtcdError::BadReply(format!(
                "{endpoint}: reply larger than {REPLY_BYTES_MAX} bytes"
            )));
        }
        raw.extend_from_slice(&buf[..n]);
    }
    parse_response(&raw).map_err(|why| EtcdError::BadReply(format!("{endpoint}: {why}")))
}

fn connect(endpoint: &str, deadline: Instant) -> Result<TcpStream, EtcdError> {
    let addrs = endpoint.to_socket_addrs().map_err(|e| EtcdError::Unreachable {
        endpoint: endpoint.to_string(),
        reason: format!("cannot resolve: {e}"),
    })?;
    let mut last = format!("{endpoint} resolves to no address");
    for addr in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match TcpStream::connect_timeout(&addr, left) {
            Ok(s) => return Ok(s),
            Err(e) => last = e.to_string(),
        }
    }
    Err(EtcdError::Unreachable { endpoint: endpoint.to_string(), reason: last })
}

fn remaining(endpoint: &str, deadline: Instant, timeout: Duration) -> Result<Duration, EtcdError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(EtcdError::Timeout {
            endpoint: endpoint.to_string(),
            timeout_ms: timeout.as_millis() as u64,
        });
    }
    Ok(left)
}

fn io_error(endpoint: &str, e: std::io::Error, timeout: Duration) -> EtcdError {
    use std::io::ErrorKind::{TimedOut, WouldBlock};
    match e.kind() {
        TimedOut | WouldBlock => EtcdError::Timeout {
            endpoint: endpoint.to_string(),
            timeout_ms: timeout.as_millis() as u64,
        },
        _ => EtcdError::Unreachable { endpoint: endpoint.to_string(), reason: e.to_string() },
    }
}

/// Split a whole response into status and (de-chunked) body.
pub(crate) fn parse_response(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let head_end = find(raw, b"\r\n\r\n").ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..head_end]).map_err(|_| "headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| status_line.strip_prefix("HTTP/1.0 "))
        .and_then(|s| s.get(..3))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let chunked = lines.any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = &raw[head_end + 4..];
    let body = if chunked { dechunk(body)? } else { body.to_vec() };
    Ok((status, body))
}

/// Chunked transfer coding; trailers after the last chunk are ignored.
fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = find(body, b"\r\n").ok_or("chunk size line not terminated")?;
        let size_text = std::str::from_utf8(&body[..line_end]).map_err(|_| "bad chunk size")?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if body.len() < size + 2 {
            return Err("chunk cut short".into());
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_reply() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(parse_response(raw).unwrap(), (200, b"{}".to_vec()));
    }

    #[test]
    fn chunked_reply_with_trailers() {
        let raw = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4;x=y\r\n\":1}\r\n0\r\nGrpc-Trailer-Content-Type: application/grpc\r\n\r\n";
        assert_eq!(parse_response(raw).unwrap(), (404, b"{\"a\":1}".to_vec()));
    }

    #[test]
    fn broken_replies_are_errors() {
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
        assert!(parse_response(b"SPDY 200\r\n\r\n").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
        assert!(parse_response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nab\r\n"
        )
        .is_err());
    }
}
