//! Series from the adapters' own JSON, for the scripts that write no `seed_points`:
//! recognised by the shape of their rows, not by file name, so a renamed file still
//! counts and an unrelated JSON file adds nothing.
//! - odmblast (adapters/odm): an array of {"setup", "test", "block_bytes", "mb_per_s"}
//!   -> `odm.bw.{test}.{setup}` over the block size;
//! - odmlat (adapters/odm): one object {"setup", "treq_us", "fit": {"inline"|"direct":
//!   {"read"|"write": [intercept_us, rate_mb_s]}}, "points": [...]} -> the seed's split
//!   `odmlat.treq.{setup}`, `odmlat.tdisk.{op}.{setup}` (inline intercept - Treq),
//!   `odmlat.trdma.{op}.{setup}` (direct - inline intercept), `odmlat.rate.{path}.{op}.
//!   {setup}` (0 = no positive slope: left out), `odmlat.lat.{op}.{setup}` over the size;
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

/// [intercept_us, rate_mb_s] of one path and operation of an odmlat fit.
fn odmlat_fit(doc: &Value, path: &str, op: &str) -> Option<(f64, f64)> {
    let v = doc.get("fit")?.get(path)?.get(op)?.as_array()?;
    Some((v.first()?.as_f64()?, v.get(1)?.as_f64()?))
}

fn odmlat(doc: &Value, m: &mut Measured) {
    let (Some(setup), Some(treq)) =
        (doc.get("setup").and_then(Value::as_str), doc.get("treq_us").and_then(Value::as_f64))
    else {
        return;
    };
    if setup == "local" {
        // No request and no transfer on local files: the split does not apply.
        return;
    }
    m.add(&format!("odmlat.treq.{setup}"), 0.0, treq);
    for op in ["read", "write"] {
        let inline = odmlat_fit(doc, "inline", op);
        let direct = odmlat_fit(doc, "direct", op);
        if let Some((a, _)) = inline {
            m.add(&format!("odmlat.tdisk.{op}.{setup}"), 0.0, a - treq);
        }
        if let (Some((a, _)), Some((b, _))) = (inline, direct) {
            m.add(&format!("odmlat.trdma.{op}.{setup}"), 0.0, b - a);
        }
        for (path, fit) in [("inline", inline), ("direct", direct)] {
            if let Some((_, r)) = fit.filter(|f| f.1 > 0.0) {
                m.add(&format!("odmlat.rate.{path}.{op}.{setup}"), 0.0, r);
            }
        }
    }
    for p in doc.get("points").and_then(Value::as_array).into_iter().flatten() {
        let Some(size) = p.get("size_bytes").and_then(Value::as_f64) else { continue };
        for op in ["read", "write"] {
            if let Some(us) = p.get(format!("{op}_us")).and_then(Value::as_f64) {
                m.add(&format!("odmlat.lat.{op}.{setup}"), size, us);
            }
        }
    }
}

/// The series of one adapter JSON document of a known shape (empty otherwise).
pub fn from_doc(doc: &Value) -> Measured {
    let mut m = Measured::default();
    odmblast(doc, &mut m);
    odmlat(doc, &mut m);
    bdb(doc, &mut m);
    m
}
