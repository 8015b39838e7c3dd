//! A small blocking etcd v3 client over the JSON gateway (etcd 3.4, plain HTTP).
//!
//! Why not the `etcd-client` crate: it needs protoc at build time and tokio at run
//! time; the gateway (`POST /v3/kv/range`, `/v3/kv/txn`, `/v3/lease/grant`, …, keys
//! and values in base64, 64-bit integers as JSON strings) needs neither. Each call is
//! one HTTP request on its own connection, bounded by the client's timeout; with
//! several endpoints a call moves on to the next one when an endpoint cannot be
//! reached or times out (never after etcd answered, so a write is not sent twice to a
//! live cluster).

mod b64;
mod http;

use std::time::Duration;

use serde_json::{json, Value};

pub use http::REPLY_BYTES_MAX;

/// An etcd lease id.
pub type LeaseId = i64;

/// Every way an etcd call fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EtcdError {
    #[error("etcd at {endpoint} unreachable: {reason}")]
    Unreachable { endpoint: String, reason: String },
    #[error("etcd at {endpoint} did not answer within {timeout_ms} ms")]
    Timeout { endpoint: String, timeout_ms: u64 },
    #[error("etcd refused the request (HTTP {status}, code {code}): {message}")]
    Refused { status: u16, code: i64, message: String },
    #[error("etcd lease {0} has expired (or was revoked)")]
    LeaseExpired(LeaseId),
    #[error("unexpected reply from etcd: {0}")]
    BadReply(String),
}

impl EtcdError {
    /// Whether another endpoint may be tried: etcd was not reached at all.
    fn try_next(&self) -> bool {
        matches!(self, EtcdError::Unreachable { .. } | EtcdError::Timeout { .. })
    }
}

/// One key with its revisions, as a range returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    /// Revision of the last write of this key (what a compare-and-swap compares).
    pub mod_revision: i64,
    pub create_revision: i64,
    /// The lease the key is attached to (0: none).
    pub lease: LeaseId,
}

/// A blocking client for one etcd cluster.
#[derive(Debug, Clone)]
pub struct EtcdClient {
    endpoints: Vec<String>,
    timeout: Duration,
}

impl EtcdClient {
    /// `endpoints` as `host:port`; `timeout` bounds each call on each endpoint.
    pub fn new(endpoints: Vec<String>, timeout: Duration) -> Self {
        assert!(!endpoints.is_empty(), "an etcd client needs an endpoint");
        EtcdClient { endpoints, timeout }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Grant a lease of `ttl_s` seconds.
    pub fn grant(&self, ttl_s: u64) -> Result<LeaseId, EtcdError> {
        let r = self.call("/v3/lease/grant", json!({ "TTL": ttl_s }))?;
        match int(&r["ID"]) {
            0 => Err(bad("lease grant without an ID", &r)),
            id => Ok(id),
        }
    }

    /// Renew a lease; returns its TTL in seconds. [`EtcdError::LeaseExpired`] when etcd
    /// no longer knows it (the gateway then answers with no TTL).
    pub fn keep_alive(&self, lease: LeaseId) -> Result<u64, EtcdError> {
        let r = self.call("/v3/lease/keepalive", json!({ "ID": lease.to_string() }))?;
        match int(&r["result"]["TTL"]) {
            ttl if ttl > 0 => Ok(ttl as u64),
            _ => Err(EtcdError::LeaseExpired(lease)),
        }
    }

    /// Revoke a lease (its keys disappear at once). Revoking an unknown lease is
    /// not an error: the result is the same.
    pub fn revoke(&self, lease: LeaseId) -> Result<(), EtcdError> {
        match self.call("/v3/lease/revoke", json!({ "ID": lease.to_string() })) {
            Err(EtcdError::Refused { code: GRPC_NOT_FOUND, .. }) | Ok(_) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Write a key, attached to `lease` when given.
    pub fn put(&self, key: &[u8], value: &[u8], lease: Option<LeaseId>) -> Result<(), EtcdError> {
        let mut req = json!({ "key": b64::encode(key), "value": b64::encode(value) });
        if let Some(l) = lease {
            req["lease"] = json!(l.to_string());
        }
        self.call("/v3/kv/put", req).map(|_| ())
    }

    /// Write a key only if its last write is `mod_revision` (0: only if absent).
    /// Returns whether it was written.
    pub fn put_if_mod_revision(
        &self,
        key: &[u8],
        value: &[u8],
        mod_revision: i64,
        lease: Option<LeaseId>,
    ) -> Result<bool, EtcdError> {
        let mut put = json!({ "key": b64::encode(key), "value": b64::encode(value) });
        if let Some(l) = lease {
            put["lease"] = json!(l.to_string());
        }
        let req = json!({
            "compare": [{
                "target": "MOD", "key": b64::encode(key), "result": "EQUAL",
                "mod_revision": mod_revision.to_string(),
            }],
            "success": [{ "request_put": put }],
        });
        let r = self.call("/v3/kv/txn", req)?;
        Ok(r["succeeded"].as_bool().unwrap_or(false))
    }

    /// Read one key.
    pub fn get(&self, key: &[u8]) -> Result<Option<KeyValue>, EtcdError> {
        let r = self.call("/v3/kv/range", json!({ "key": b64::encode(key) }))?;
        Ok(kvs(&r)?.into_iter().next())
    }

    /// Read every key starting with `prefix`, in key order.
    pub fn get_prefix(&self, prefix: &[u8]) -> Result<Vec<KeyValue>, EtcdError> {
        assert!(!prefix.is_empty(), "an empty prefix would read the whole of etcd");
        let req =
            json!({ "key": b64::encode(prefix), "range_end": b64::encode(&prefix_end(prefix)) });
        kvs(&self.call("/v3/kv/range", req)?)
    }

    /// Delete one key.
    pub fn delete(&self, key: &[u8]) -> Result<(), EtcdError> {
        self.call("/v3/kv/deleterange", json!({ "key": b64::encode(key) })).map(|_| ())
    }

    /// POST to each endpoint in turn until one answers.
    fn call(&self, path: &str, body: Value) -> Result<Value, EtcdError> {
        let body = body.to_string();
        let mut last = None;
        for ep in &self.endpoints {
            match http::post(ep, path, &body, self.timeout) {
                Ok((status, reply)) => return decode(status, &reply),
                Err(e) if e.try_next() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.expect("at least one endpoint was tried"))
    }
}

/// gRPC's NOT_FOUND, as the gateway reports an unknown lease.
const GRPC_NOT_FOUND: i64 = 5;

fn decode(status: u16, reply: &[u8]) -> Result<Value, EtcdError> {
    let v: Value = serde_json::from_slice(reply).map_err(|e| {
        EtcdError::BadReply(format!(
            "HTTP {status}, body not JSON ({e}): {}",
            String::from_utf8_lossy(reply)
        ))
    })?;
    if status != 200 || v.get("error").is_some() {
        let message =
            v["message"].as_str().or(v["error"].as_str()).unwrap_or("no message").to_string();
        return Err(EtcdError::Refused { status, code: v["code"].as_i64().unwrap_or(0), message });
    }
    Ok(v)
}

/// An int64 of the gateway: a JSON string (or number); absent means 0.
fn int(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Number(n) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

fn bad(what: &str, reply: &Value) -> EtcdError {
    EtcdError::BadReply(format!("{what}: {reply}"))
}

fn kvs(reply: &Value) -> Result<Vec<KeyValue>, EtcdError> {
    let Some(list) = reply.get("kvs") else { return Ok(Vec::new()) };
    let list = list.as_array().ok_or_else(|| bad("kvs is not a list", reply))?;
    list.iter()
        .map(|kv| {
            let field = |name: &str| {
                let text = kv[name].as_str().unwrap_or("");
                b64::decode(text).ok_or_else(|| bad(&format!("{name} is not base64"), reply))
            };
            Ok(KeyValue {
                key: field("key")?,
                value: field("value")?,
                mod_revision: int(&kv["mod_revision"]),
                create_revision: int(&kv["create_revision"]),
                lease: int(&kv["lease"]),
            })
        })
        .collect()
}

/// The smallest key greater than every key starting with `prefix` (etcd's range_end).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0] // every byte was 0xff: "to the end of the key space"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end(b"/a/"), b"/a0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }

    #[test]
    fn gateway_integers_are_strings() {
        assert_eq!(int(&json!("42")), 42);
        assert_eq!(int(&json!(7)), 7);
        assert_eq!(int(&Value::Null), 0);
    }

    #[test]
    fn error_replies_become_refused() {
        let body = br#"{"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5}"#;
        assert_eq!(
            decode(404, body),
            Err(EtcdError::Refused {
                status: 404,
                code: 5,
                message: "etcdserver: requested lease not found".into()
            })
        );
        assert!(matches!(decode(200, b"<html>"), Err(EtcdError::BadReply(_))));
    }
}
