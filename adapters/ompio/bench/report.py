#!/usr/bin/env python3
"""Report of the MPI-IO experiments of seed 004 (adapters/ompio/bench.sh).

Reads the JSON records of mpiio_bench (one per line, with backend/mode/round added by the
driver), takes the median over rounds of every measurement, and writes
  - one self-describing JSON file (--json): metadata, the medians, the ratios, the seed's
    published values and the targets, so `dafs bench seeds` can include it as it is;
  - the Markdown tables (--md): per figure our values, dafs/NFS and dafs/local ratios and the
    seed's figures beside them.
"""
import argparse
import json
import statistics
import sys
from collections import defaultdict

BACKENDS = ["local", "dafs-shm", "dafs-tcp", "nfs"]
DAFS = ["dafs-shm", "dafs-tcp"]
MODES = ["percall", "library", "cache"]

# The seed's published values (Figs. 6-8 and section 6; text figures only: the plots carry
# no numbers in the text). Latencies in microseconds.
SEED = {
    "fig6_read_latency_us": {
        "seq": {"local": 1.5, "nfs": 102.3, "dafs": 75.0},
        "random": {"local": 26.0, "nfs": 310.0, "dafs": 75.0},
    },
    "fig7_dafs_over_nfs": {
        "read": "1.6-2.2x at every block size",
        "write": "1.8-2.4x below 2 KiB, 4.4-5.6x above 2 KiB",
    },
    "fig8": "bandwidth at CPU fractions up to 0.5 equal to the blocking bandwidth (complete "
            "overlap) on DAFS; no overlap on NFS and the local file system (64 KiB blocks)",
    "fig5": "the registration cache adds 1.5 us per call when no buffer is reused, and wins "
            "more the higher the reuse ratio and the block size",
}
TARGETS = {
    "fig7_over_nfs": 3.0,           # >= 3x the NFS figure at every block size
    "fig7_over_local": 0.9,         # >= 0.9x local for blocks >= 64 KiB
    "fig7_local_min_block": 65536,
    "fig8_full_overlap_to": 0.9,    # full overlap up to CPU fraction 0.9
    "fig8_full_within": 1.10,       # "full": iteration time within 10 % of max(T, T_IO)
}


def key(r):
    return (r["backend"], r["mode"], r["test"], r["op"], r["pattern"], r["block_bytes"],
            r.get("cpu_fraction"), r.get("reuse_pct"))


def medians(records):
    groups = defaultdict(list)
    for r in records:
        if r.get("test") != "prepare":
            groups[key(r)].append(r)
    out = {}
    for k, rs in groups.items():
        m = dict(rs[0])
        for f in ("mean_us", "mb_s", "cpu_s_per_gb", "iter_us", "io_us", "compute_us",
                  "io_hidden", "overlap", "ideal_iter_us"):
            if f in m:
                m[f] = statistics.median(x[f] for x in rs)
        m["rounds"] = len(rs)
        m.pop("round", None)
        out[k] = m
    return out


def fmt(v, digits=3):
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def ratio(a, b):
    return a / b if a is not None and b else None


def size_name(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}"
    return f"{b} B"


class Report:
    def __init__(self, med, meta, stats):
        self.med, self.meta, self.stats = med, meta, stats
        self.present = [b for b in BACKENDS if any(k[0] == b for k in med)]
        self.lines, self.ratios = [], {}

    def get(self, backend, test, op, pattern, bs, field, mode="cache", frac=None, reuse=None):
        m = self.med.get((backend, mode, test, op, pattern, bs, frac, reuse))
        return m.get(field) if m else None

    def out(self, s=""):
        self.lines.append(s)

    def table(self, header, rows):
        self.out("| " + " | ".join(header) + " |")
        self.out("|" + "---|" * len(header))
        for r in rows:
            self.out("| " + " | ".join(r) + " |")
        self.out()

    def header(self):
        m = self.meta
        self.out("### MPI-IO (seed 004): `adapters/ompio/bench.sh`")
        self.out()
        self.out(f"Commit {m.get('commit')}, {m.get('mpi')}, {m.get('np')} process(es), "
                 f"{m.get('size')} file, {m.get('secs')} s per measurement, medians of "
                 f"{m.get('runs')} round(s){' (--quick)' if m.get('quick') == '1' else ''}, "
                 f"libdafs/dafsd profile {m.get('profile')}. Queue depth 1 everywhere "
                 "(blocking calls; one MPI_File_iread_at in flight in Fig. 8). dafs rows use "
                 "the registration cache (`fbtl_dafs_mem=cache`), as the seed did after Fig. 5.")
        self.out()
        self.out(f"- NFS baseline: {m.get('nfs_status')}; route: {m.get('nfs_route')}")
        missing = [b for b in BACKENDS if b not in self.present]
        if missing:
            self.out(f"- not measured in this run: {', '.join(missing)}")
        self.out()

    def fig6(self):
        self.out("#### Fig. 6: 4-byte latency (us per call)")
        self.out()
        hdr = ["access"] + self.present
        extra = []
        for d in DAFS:
            if d in self.present and "nfs" in self.present:
                extra.append(("nfs", d, f"NFS/{d} (x faster)"))
            if d in self.present and "local" in self.present:
                extra.append((d, "local", f"{d}/local"))
        hdr += [e[2] for e in extra] + ["seed: LFS / NFS / DAFS"]
        rows = []
        for op, pat, label in (("read", "seq", "read, sequential"), ("read", "random", "read, random (0.5 MiB apart)"),
                               ("write", "seq", "write, sequential (append)")):
            vals = {b: self.get(b, "latency", op, pat, 4, "mean_us") for b in self.present}
            row = [label] + [fmt(vals[b]) for b in self.present]
            for a, b, name in extra:
                r = ratio(vals[a], vals[b])
                self.ratios[f"fig6/{op}-{pat}/{name}"] = r
                row.append(fmt(r))
            s = SEED["fig6_read_latency_us"].get(pat) if op == "read" else None
            row.append(f"{s['local']} / {s['nfs']} / {s['dafs']}" if s else "not in the text")
            rows.append(row)
        self.table(hdr, rows)

    def fig7(self):
        blocks = sorted({k[5] for k in self.med if k[2] == "bandwidth"})
        for op in ("read", "write"):
            self.out(f"#### Fig. 7: sequential {op} bandwidth (MB/s) vs block size")
            self.out()
            hdr = ["block"] + self.present
            pairs = [(d, o) for d in DAFS for o in ("nfs", "local") if d in self.present and o in self.present]
            hdr += [f"{d}/{o}" for d, o in pairs] + ["targets"]
            rows = []
            for bs in blocks:
                vals = {b: self.get(b, "bandwidth", op, "seq", bs, "mb_s") for b in self.present}
                row = [size_name(bs)] + [fmt(vals[b]) for b in self.present]
                verdicts = []
                for d, o in pairs:
                    r = ratio(vals[d], vals[o])
                    self.ratios[f"fig7/{op}/{size_name(bs)}/{d}/{o}"] = r
                    row.append(fmt(r))
                    if r is None:
                        continue
                    if o == "nfs":
                        verdicts.append(f"{d} >=3x NFS: {'met' if r >= TARGETS['fig7_over_nfs'] else 'MISSED'}")
                    elif bs >= TARGETS["fig7_local_min_block"]:
                        verdicts.append(f"{d} >=0.9x local: {'met' if r >= TARGETS['fig7_over_local'] else 'MISSED'}")
                row.append("; ".join(verdicts) or "-")
                rows.append(row)
            self.table(hdr, rows)
            self.out(f"Seed (DAFS/NFS): {SEED['fig7_dafs_over_nfs'][op]}.")
            self.out()
        self.out("Client CPU seconds per GB (getrusage of the MPI process; for dafs the server's CPU is not in it):")
        self.out()
        rows = []
        for bs in blocks:
            rows.append([size_name(bs)] + [
                f"{fmt(self.get(b, 'bandwidth', 'read', 'seq', bs, 'cpu_s_per_gb'))} / "
                f"{fmt(self.get(b, 'bandwidth', 'write', 'seq', bs, 'cpu_s_per_gb'))}" for b in self.present])
        self.table(["block"] + [f"{b} read / write" for b in self.present], rows)

    def fig8(self):
        fracs = sorted({k[6] for k in self.med if k[2] == "overlap"})
        if not fracs:
            return
        bs = next(k[5] for k in self.med if k[2] == "overlap")
        self.out(f"#### Fig. 8: MPI_File_iread_at + computation + MPI_Wait, {size_name(bs)} blocks")
        self.out()
        self.out("CPU fraction f = T/(T + T_IO), T_IO the blocking read time of a block measured on the "
                 "same backend just before. Each cell: MB/s, and the share of the I/O time hidden, "
                 "(T + T_IO - iteration) / T_IO, of the most computation can hide, min(T, T_IO) / T_IO "
                 "(negative: the non-blocking path costs more than it hides). "
                 f"\"full\" = iteration within {int((TARGETS['fig8_full_within'] - 1) * 100)} % of max(T, T_IO).")
        self.out()
        rows = [["blocking read"] + [
            "-" if t is None else f"{fmt(bs / t)} MB/s"
            for t in (self.get(b, "overlap", "iread", "seq", bs, "io_us", frac=fracs[0]) for b in self.present)]]
        for f in fracs:
            row = [f"{f:.1f}"]
            for b in self.present:
                mb = self.get(b, "overlap", "iread", "seq", bs, "mb_s", frac=f)
                hid = self.get(b, "overlap", "iread", "seq", bs, "io_hidden", frac=f)
                t_cpu = self.get(b, "overlap", "iread", "seq", bs, "compute_us", frac=f)
                t_io = self.get(b, "overlap", "iread", "seq", bs, "io_us", frac=f)
                it = self.get(b, "overlap", "iread", "seq", bs, "iter_us", frac=f)
                ideal = self.get(b, "overlap", "iread", "seq", bs, "ideal_iter_us", frac=f)
                full = it is not None and ideal and it <= ideal * TARGETS["fig8_full_within"]
                self.ratios[f"fig8/{b}/f={f:.1f}/full"] = bool(full) if it is not None else None
                if mb is None:
                    row.append("-")
                    continue
                # The most of the I/O time computation can hide: all of it once T >= T_IO.
                most = min(t_cpu, t_io) / t_io if t_io else 0.0
                row.append(f"{fmt(mb)} MB/s" + (f", {100 * hid:.0f} % of {100 * most:.0f} %"
                                                 f"{' full' if full else ''}" if f > 0 else ""))
            rows.append(row)
        self.table(["f"] + self.present, rows)
        for d in DAFS:
            if d not in self.present:
                continue
            ok = all(self.ratios.get(f"fig8/{d}/f={f:.1f}/full") for f in fracs
                     if 0 < f <= TARGETS["fig8_full_overlap_to"] + 1e-9)
            self.out(f"- target, full overlap up to f = 0.9 on {d}: {'met' if ok else 'MISSED'}")
        self.out(f"- seed: {SEED['fig8']}")
        self.out()

    def memreg(self):
        keys = [k for k in self.med if k[2] == "memreg"]
        if not keys:
            return
        self.out("#### Memory management (Figs. 4-5): read latency (us per call) by fbtl_dafs_mem")
        self.out()
        self.out("Buffer reuse R %: R of every 100 reads go into the same buffer, the others into a "
                 "freshly mapped buffer, unmapped after (Fig. 5's reuse ratio; only the MPI call is timed).")
        self.out()
        blocks = sorted({k[5] for k in keys})
        reuses = sorted({k[7] for k in keys}, reverse=True)
        hdr = ["backend", "block", "reuse"] + MODES + ["best"]
        rows = []
        for b in DAFS:
            for bs in blocks:
                for ru in reuses:
                    vals = {m: self.get(b, "memreg", "read", "seq", bs, "mean_us", mode=m, reuse=ru) for m in MODES}
                    if all(v is None for v in vals.values()):
                        continue
                    best = min((v, m) for m, v in vals.items() if v is not None)[1]
                    rows.append([b, size_name(bs), f"{ru} %"] + [fmt(vals[m]) for m in MODES] + [best])
        self.table(hdr, rows)
        self.out(f"Seed: {SEED['fig5']}; below the inline size the provider's own path (library) won.")
        self.out()
        if self.stats:
            # Only the last round's jobs: earlier rounds repeat them.
            last_round = max(l.split(" | ", 1)[0] for l in self.stats)
            self.out(f"Component counters (fbtl_dafs_verbose_stats, {last_round}; one line per process):")
            self.out()
            self.out("```")
            for line in self.stats:
                parts = line.split(" | ")
                if parts[0] == last_round and len(parts) == 3:
                    self.out(f"{parts[1]}: {parts[2].replace('dafs_ompio_stats ', '')}")
            self.out("```")
            self.out()


# `dafs bench seeds` reads "seed_points" (series keys of its paper.json). "dafs" there is
# dafs-tcp: the seed's comparison is network file system against network file system, and the
# NFS baseline runs over loopback TCP as well; dafs-shm has its own keys.
SEED_FS = {"local": ["local"], "nfs": ["nfs"], "dafs-shm": ["dafs-shm"], "dafs-tcp": ["dafs-tcp", "dafs"]}


def seed_points(med):
    pts = []

    def add(series, backend, x, value):
        if value is not None:
            for fs in SEED_FS[backend]:
                pts.append({"series": f"{series}.{fs}", "x": x, "value": value})

    for (backend, mode, test, op, pattern, bs, frac, reuse), m in sorted(med.items(), key=str):
        if test == "latency" and mode == "cache":
            kind = {"seq": "seq", "random": "rand"}[pattern] + op
            add(f"mpiio.lat.{kind}", backend, bs, m["mean_us"])
        elif test == "bandwidth" and mode == "cache":
            add(f"mpiio.bw.{op}", backend, bs, m["mb_s"])
        elif test == "overlap" and frac and frac > 0:
            # Share of the overlappable time hidden, %: at f = 0.5 (T = T_IO) that is the
            # share of the I/O time hidden, Fig. 8's measure.
            add("mpiio.overlap_by_fraction", backend, frac, 100.0 * m["overlap"])
            if abs(frac - 0.5) < 1e-9:
                add("mpiio.overlap", backend, bs, 100.0 * m["overlap"])
        elif test == "memreg":
            name = {"cache": "regcache", "percall": "regpercall", "library": "reglibrary"}[mode]
            add(f"mpiio.lat.{name}" + ("" if reuse == 100 else f"_reuse{reuse}"), backend, bs, m["mean_us"])
    return pts


def tag(backend, mode, rnd):
    """mpiio_bench's stdout -> its JSON records with backend, mode and round added."""
    for line in sys.stdin:
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            r.update(backend=backend, mode=mode, round=int(rnd))
            print(json.dumps(r))
    return 0


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "tag":
        return tag(*sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--raw", required=True)
    ap.add_argument("--stats")
    ap.add_argument("--errors")
    ap.add_argument("--json", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--meta", nargs="*", default=[])
    a = ap.parse_args()
    records = [json.loads(l) for l in open(a.raw) if l.strip()]
    meta = dict(kv.split("=", 1) for kv in a.meta)
    stats = [l.rstrip("\n") for l in open(a.stats)] if a.stats else []
    errors = [l.rstrip("\n") for l in open(a.errors) if l.strip()] if a.errors else []
    med = medians(records)
    rep = Report(med, meta, stats)
    rep.header()
    rep.fig6()
    rep.fig7()
    rep.fig8()
    rep.memreg()
    if errors:
        rep.out("#### Errors")
        rep.out()
        rep.out("Jobs that failed (their measurements are missing above):")
        rep.out()
        for e in errors:
            rep.out(f"- {e}")
        rep.out()
    doc = {
        "experiment": "seed 004: MPI-IO on DAFS (Figs. 4-8)",
        "command": "adapters/ompio/bench.sh" + (" --quick" if meta.get("quick") == "1" else ""),
        "meta": meta,
        "units": {"mean_us": "microseconds per call", "mb_s": "1e6 bytes per second",
                  "cpu_s_per_gb": "client CPU seconds (user+sys) per 1e9 bytes"},
        "backends": rep.present,
        "results": sorted(med.values(), key=lambda r: (r["test"], r["backend"], r["mode"], r["op"],
                                                        r["pattern"], r["block_bytes"],
                                                        r.get("cpu_fraction") or 0, r.get("reuse_pct") or 0)),
        "ratios": rep.ratios,
        "seed": SEED,
        "targets": TARGETS,
        "component_stats": stats,
        "errors": errors,
        "seed_points": seed_points(med),
        "markdown": "\n".join(rep.lines),
    }
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
    with open(a.md, "w") as f:
        f.write("\n".join(rep.lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
