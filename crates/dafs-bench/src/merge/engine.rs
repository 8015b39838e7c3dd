//! The n-way merge itself, independent of where the blocks come from: the same loop
//! runs over local files, DAFS and NFS, each providing a [`Streams`] (read-ahead of
//! the input blocks, write-behind of the output blocks).

use super::records::key;

/// The merge step run over the current blocks (inputs, output).
pub type MergeFn<'a> = dyn FnMut(&[&[u8]], &mut [u8]) -> Stop + 'a;

/// Block streams of one merge: input blocks in file order, output blocks in turn.
pub trait Streams {
    /// Give input `i`'s current block back (its buffer is refilled ahead) and make its
    /// next block current. `Ok(false)`: input `i` has no more blocks.
    fn advance(&mut self, i: usize) -> Result<bool, String>;
    /// The current output block is full: write it behind and make a fresh one current.
    fn output_full(&mut self) -> Result<(), String>;
    /// The merge is over: write the first `fill` bytes of the current output block and
    /// wait until everything written is written.
    fn finish(&mut self, fill: usize) -> Result<(), String>;
    /// Run `f` over the current input blocks (an empty slice for an input with none) and
    /// the current output block.
    fn with_blocks(&mut self, f: &mut MergeFn) -> Result<Stop, String>;
}

/// Why [`merge_some`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Input i's current block is used up.
    Drained(usize),
    /// The output block is full.
    OutputFull,
    /// Every input is used up.
    Done,
}

/// Move records, smallest key first, from the inputs' current blocks (`pos[i]` bytes
/// of block i already taken) into `out` (`*fill` bytes already used), until a block
/// runs out or the output is full.
pub fn merge_some(
    rec: usize,
    ins: &[&[u8]],
    pos: &mut [usize],
    out: &mut [u8],
    fill: &mut usize,
) -> Stop {
    loop {
        if *fill == out.len() {
            return Stop::OutputFull;
        }
        // A linear scan: n is small (8 in the seed), and this is the application work
        // per record whose share of the CPU the experiment varies with the record size.
        let mut best: Option<(u64, usize)> = None;
        for (i, b) in ins.iter().enumerate() {
            if pos[i] < b.len() {
                let k = key(&b[pos[i]..]);
                if best.is_none_or(|(bk, _)| k < bk) {
                    best = Some((k, i));
                }
            }
        }
        let Some((_, i)) = best else { return Stop::Done };
        let p = pos[i];
        out[*fill..*fill + rec].copy_from_slice(&ins[i][p..p + rec]);
        *fill += rec;
        pos[i] = p + rec;
        if pos[i] == ins[i].len() {
            return Stop::Drained(i);
        }
    }
}

/// Merge `n` inputs of `rec`-byte records through `s`; returns the output bytes.
pub fn run(s: &mut dyn Streams, n: usize, rec: usize) -> Result<u64, String> {
    let mut pos = vec![0usize; n];
    for i in 0..n {
        s.advance(i)?;
    }
    let mut fill = 0usize;
    let mut written = 0u64;
    loop {
        let stop = s.with_blocks(&mut |ins, out| {
            debug_assert_eq!(out.len() % rec, 0, "records never straddle output blocks");
            merge_some(rec, ins, &mut pos, out, &mut fill)
        })?;
        match stop {
            Stop::Drained(i) => {
                s.advance(i)?;
                pos[i] = 0;
            }
            Stop::OutputFull => {
                written += fill as u64;
                s.output_full()?;
                fill = 0;
            }
            Stop::Done => {
                written += fill as u64;
                s.finish(fill)?;
                return Ok(written);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::records::{Generator, Verifier};

    /// Blocks in memory, handed over without read-ahead: the merge logic alone.
    struct Mem {
        ins: Vec<Vec<Vec<u8>>>,
        cur: Vec<Option<Vec<u8>>>,
        out_bs: usize,
        out: Vec<u8>,
        done: Vec<u8>,
    }

    impl Streams for Mem {
        fn advance(&mut self, i: usize) -> Result<bool, String> {
            self.cur[i] = if self.ins[i].is_empty() { None } else { Some(self.ins[i].remove(0)) };
            Ok(self.cur[i].is_some())
        }
        fn output_full(&mut self) -> Result<(), String> {
            self.done.extend_from_slice(&self.out);
            Ok(())
        }
        fn finish(&mut self, fill: usize) -> Result<(), String> {
            self.done.extend_from_slice(&self.out[..fill]);
            Ok(())
        }
        fn with_blocks(&mut self, f: &mut MergeFn) -> Result<Stop, String> {
            let ins: Vec<&[u8]> = self.cur.iter().map(|c| c.as_deref().unwrap_or(&[])).collect();
            if self.out.len() != self.out_bs {
                self.out = vec![0; self.out_bs];
            }
            Ok(f(&ins, &mut self.out))
        }
    }

    #[test]
    fn merges_uneven_inputs_sorted_with_every_record() {
        let (rec, bs) = (24, 240);
        let mut sum = Default::default();
        let blocks = [3usize, 0, 1, 5];
        let ins: Vec<Vec<Vec<u8>>> = blocks
            .iter()
            .enumerate()
            .map(|(i, &nb)| {
                let mut g = Generator::new(i, rec, 9);
                let v = (0..nb)
                    .map(|_| {
                        let mut b = vec![0u8; bs];
                        g.fill(&mut b);
                        b
                    })
                    .collect();
                crate::merge::records::Checksum::merge(&mut sum, &g.sum);
                v
            })
            .collect();
        let n = ins.len();
        // An output block of 4 records: output fills and input drains interleave.
        let mut m = Mem { ins, cur: vec![None; n], out_bs: 4 * rec, out: vec![], done: vec![] };
        let w = run(&mut m, n, rec).unwrap();
        assert_eq!(w as usize, 9 * bs);
        assert_eq!(m.done.len(), 9 * bs);
        let mut v = Verifier::new(rec);
        v.feed(&m.done).unwrap();
        v.finish(&sum).unwrap();
    }
}
