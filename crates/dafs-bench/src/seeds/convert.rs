//! Series from the adapters' own JSON, for the scripts that write no `seed_points`:
//! recognised by the shape of their rows, not by file name, so a renamed file still
//! counts and an unrelated JSON file adds nothing.
//! - odmblast (adapters/odm): an array of {"setup", "test", "block_bytes", "mb_per_s"}
//!   -> `odm.bw.{test}.{setup}` over the block size;
//! - adapters/bdb/bench.sh: an array of {"mode", "db_file_mib", "reads_per_s"}
//!   -> `bdb.tps.{mode}` over the database size in bytes.

use serde_json::Value;

use super::measure::Measured;

fn rows(doc: &Value) -> &[Value] {
    doc.as_array().map(|v| v.as_slice()).unwrap_or(&[])
}

fn odmblast(doc: &Value, m: &mut Measured) {
    for r in rows(doc) {
        let (Some(setup), Some(test), Some(bs), Some(mbs)) = (
            r.get("setup").and_then(Value::as_str),
            r.get("test").and_then(Value::as_str),
            r.get("block_bytes").and_then(Value::as_f64),
            r.get("mb_per_s").and_then(Value::as_f64),
        ) else {
            continue;
        };
        // odmblast prints a negative rate for a failed test.
        if mbs > 0.0 {
            m.add(&format!("odm.bw.{test}.{setup}"), bs, mbs);
        }
    }
}

fn bdb(doc: &Value, m: &mut Measured) {
    for r in rows(doc) {
        let (Some(mode), Some(mib), Some(rate)) = (
            r.get("mode").and_then(Value::as_str),
            r.get("db_file_mib").and_then(Value::as_f64),
            r.get("reads_per_s").and_then(Value::as_f64),
        ) else {
            continue;
        };
        m.add(&format!("bdb.tps.{mode}"), (mib * 1048576.0).round(), rate);
    }
}

/// The series of one adapter JSON document of a known shape (empty otherwise).
pub fn from_doc(doc: &Value) -> Measured {
    let mut m = Measured::default();
    odmblast(doc, &mut m);
    bdb(doc, &mut m);
    m
}
