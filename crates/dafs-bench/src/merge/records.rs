//! The merge's data: sorted record files, the order-independent checksum that ties the
//! output to the inputs, and the check of a merged output.
//!
//! A record is `rec_bytes` bytes; its key is the first 8 bytes, big-endian, so byte
//! order and key order agree. Records never straddle blocks (the record size divides
//! the block size), as with TPIE's fixed-size items in fixed-size blocks.

use crate::util::Rng;

pub const KEY_BYTES: usize = 8;

/// Largest gap between consecutive keys of one input: the n inputs' key ranges
/// overlap, so the merge interleaves them record by record.
const KEY_STEP_MAX: u64 = 1 << 20;

pub fn key(rec: &[u8]) -> u64 {
    u64::from_be_bytes(rec[..KEY_BYTES].try_into().expect("a record holds its key"))
}

/// Multiset checksum of records: the wrapping sum of a 64-bit hash of each record,
/// plus the count. Equal for the inputs and a correct output whatever the order;
/// a lost, duplicated or altered record changes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Checksum {
    pub records: u64,
    pub sum: u64,
}

impl Checksum {
    pub fn add(&mut self, rec: &[u8]) {
        self.records += 1;
        self.sum = self.sum.wrapping_add(hash(rec));
    }
    pub fn merge(&mut self, o: &Checksum) {
        self.records += o.records;
        self.sum = self.sum.wrapping_add(o.sum);
    }
}

/// A 64-bit hash of a record, 8 bytes at a time (records are multiples of 8 bytes).
fn hash(rec: &[u8]) -> u64 {
    let mut h = 0x9e37_79b9_7f4a_7c15u64 ^ rec.len() as u64;
    for w in rec.chunks_exact(8) {
        let v = u64::from_le_bytes(w.try_into().unwrap());
        h = (h ^ v).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 29;
    }
    h
}

/// Generates input `input`'s records in key order, one block at a time.
pub struct Generator {
    rng: Rng,
    key: u64,
    rec_bytes: usize,
    pub sum: Checksum,
}

impl Generator {
    pub fn new(input: usize, rec_bytes: usize, seed: u64) -> Generator {
        assert!(rec_bytes >= KEY_BYTES && rec_bytes % 8 == 0);
        let mut rng = Rng::new(seed.wrapping_mul(1_000_003).wrapping_add(input as u64));
        let key = rng.next() % KEY_STEP_MAX;
        Generator { rng, key, rec_bytes, sum: Checksum::default() }
    }

    /// Fill `block` (a whole number of records) with the next records.
    pub fn fill(&mut self, block: &mut [u8]) {
        assert_eq!(block.len() % self.rec_bytes, 0);
        for rec in block.chunks_exact_mut(self.rec_bytes) {
            rec[..KEY_BYTES].copy_from_slice(&self.key.to_be_bytes());
            // Payload: distinct per record, so a record copied with another's payload
            // changes the checksum.
            let mut p = self.key ^ self.rng.next();
            for w in rec[KEY_BYTES..].chunks_exact_mut(8) {
                w.copy_from_slice(&p.to_le_bytes());
                p = p.rotate_left(7).wrapping_add(0x2545_f491_4f6c_dd1d);
            }
            self.sum.add(rec);
            self.key += 1 + self.rng.next() % KEY_STEP_MAX;
        }
    }
}

/// Streaming check of a merged output: keys never decrease and the checksum of what
/// was seen matches the inputs'.
pub struct Verifier {
    rec_bytes: usize,
    last: Option<u64>,
    pub sum: Checksum,
}

impl Verifier {
    pub fn new(rec_bytes: usize) -> Verifier {
        Verifier { rec_bytes, last: None, sum: Checksum::default() }
    }

    /// Check the next part of the output (a whole number of records).
    pub fn feed(&mut self, data: &[u8]) -> Result<(), String> {
        if data.len() % self.rec_bytes != 0 {
            return Err(format!(
                "output part of {} bytes is not a whole number of {}-byte records",
                data.len(),
                self.rec_bytes
            ));
        }
        for rec in data.chunks_exact(self.rec_bytes) {
            let k = key(rec);
            if let Some(prev) = self.last {
                if k < prev {
                    return Err(format!(
                        "output not sorted: key {k:#x} after {prev:#x} at record {}",
                        self.sum.records
                    ));
                }
            }
            self.last = Some(k);
            self.sum.add(rec);
        }
        Ok(())
    }

    /// The end of the output: compare with the inputs' checksum.
    pub fn finish(&self, want: &Checksum) -> Result<(), String> {
        if self.sum != *want {
            return Err(format!(
                "output checksum {:#x} over {} records, inputs {:#x} over {} records",
                self.sum.sum, self.sum.records, want.sum, want.records
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(n: usize, rec: usize, blocks: usize, bs: usize) -> (Vec<Vec<u8>>, Checksum) {
        let mut sum = Checksum::default();
        let v = (0..n)
            .map(|i| {
                let mut g = Generator::new(i, rec, 1);
                let mut d = vec![0u8; blocks * bs];
                for b in d.chunks_exact_mut(bs) {
                    g.fill(b);
                }
                sum.merge(&g.sum);
                d
            })
            .collect();
        (v, sum)
    }

    fn sorted_concat(v: &[Vec<u8>], rec: usize) -> Vec<u8> {
        let mut recs: Vec<&[u8]> = v.iter().flat_map(|d| d.chunks_exact(rec)).collect();
        recs.sort_by_key(|r| key(r));
        recs.concat()
    }

    #[test]
    fn inputs_are_sorted_and_interleave() {
        let (v, _) = inputs(2, 16, 2, 256);
        let mut ver = Verifier::new(16);
        ver.feed(&v[0]).unwrap();
        // Each input on its own is sorted; one after the other is not (ranges overlap).
        let mut both = v[0].clone();
        both.extend_from_slice(&v[1]);
        assert!(Verifier::new(16).feed(&both).is_err());
    }

    #[test]
    fn verifier_accepts_a_correct_merge_and_catches_each_kind_of_damage() {
        let rec = 32;
        let (v, sum) = inputs(3, rec, 3, 512);
        let good = sorted_concat(&v, rec);
        let check = |d: &[u8]| -> Result<(), String> {
            let mut ver = Verifier::new(rec);
            ver.feed(d)?;
            ver.finish(&sum)
        };
        check(&good).unwrap();
        // Two records swapped: unsorted.
        let mut bad = good.clone();
        let (a, b) = bad.split_at_mut(rec);
        a.swap_with_slice(&mut b[..rec]);
        assert!(check(&bad).unwrap_err().contains("not sorted"));
        // A payload byte altered: checksum.
        let mut bad = good.clone();
        bad[rec * 5 + 20] ^= 1;
        assert!(check(&bad).unwrap_err().contains("checksum"));
        // A record lost, a record duplicated (order kept): checksum.
        assert!(check(&good[..good.len() - rec]).unwrap_err().contains("checksum"));
        let mut dup = good[..rec].to_vec();
        dup.extend_from_slice(&good[..good.len() - rec]);
        assert!(check(&dup).unwrap_err().contains("checksum"));
        // A partial record.
        assert!(check(&good[..good.len() - 3]).is_err());
    }
}
