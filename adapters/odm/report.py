#!/usr/bin/env python3
"""Tables of adapters/odm/bench.sh from the JSON of odmblast and odmlat.

usage: report.py OUT_DIR QUICK   (reads OUT_DIR/odmblast-*.json, odmlat-*.json;
                                  writes OUT_DIR/odm-bench.json)"""
import json
import os
import sys

SETUPS = ["dafs-shm", "dafs-tcp", "local"]
# Seed 002 (DAFS/ODM over ServerNet II, 110 MB/s link, RAID disks): Table 1 and the
# fixed latency parts of section 5.2 (microseconds and MBytes/sec).
SEED_TABLE1 = {
    "Treq (us)": (90, 90),
    "Tdisk (us)": (519, 535),
    "Trdma (us)": (372, 446),
    "Rinline (MB/s)": (47.4, 44.4),
    "Rdirect (MB/s)": (48.8, 43.5),
}
SEED_FIGS = {
    "Fig. 2 (reads)": "DAFS reads level off at ~90 MB/s (link: 110 MB/s); local sequential "
    "reads run over twice as fast as DAFS.",
    "Fig. 3 (writes)": "large DAFS writes 25-35% below local; small random DAFS writes "
    "above local.",
    "Fig. 4 (50/50 random mix)": "DAFS mix bandwidth above both DAFS random reads and "
    "random writes; local in between its reads and writes.",
}


def load(out, prefix):
    res = {}
    for s in SETUPS:
        p = os.path.join(out, f"{prefix}-{s}.json")
        if os.path.exists(p):
            with open(p) as f:
                res[s] = json.load(f)
    return res


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"


def blast_table(blast, title, tests):
    print(f"\n#### odmblast, {title}: MB/s (10^6 bytes/s), 32 outstanding\n")
    print("| test | block bytes | dafs-shm | dafs-tcp | local | shm/local | tcp/local |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = {}
    for s, data in blast.items():
        for r in data:
            rows.setdefault((r["test"], r["block_bytes"]), {})[s] = r["mb_per_s"]
    for (test, bs), v in sorted(rows.items(), key=lambda x: (tests.index(x[0][0])
                                                              if x[0][0] in tests else 99, x[0][1])):
        if test not in tests:
            continue
        cells = [f"{v[s]:.1f}" if s in v else "-" for s in SETUPS]
        print(f"| {test} | {bs} | {' | '.join(cells)} | {ratio(v.get('dafs-shm'), v.get('local'))}"
              f" | {ratio(v.get('dafs-tcp'), v.get('local'))} |")
    print(f"\nSeed 002 {title}: {SEED_FIGS[title]}")


def components(lat):
    """Table 1 parts of one odmlat run: {name: (read, write)}."""
    f, treq = lat["fit"], lat["treq_us"]
    out = {"Treq (us)": (treq, treq)}
    if lat["backend"] == "local":
        out["Tdisk (us)"] = tuple(f["inline"][op][0] for op in ("read", "write"))
        out["Rinline (MB/s)"] = tuple(f["inline"][op][1] for op in ("read", "write"))
        return out
    out["Tdisk (us)"] = tuple(f["inline"][op][0] - treq for op in ("read", "write"))
    out["Trdma (us)"] = tuple(f["direct"][op][0] - f["inline"][op][0] for op in ("read", "write"))
    out["Rinline (MB/s)"] = tuple(f["inline"][op][1] for op in ("read", "write"))
    out["Rdirect (MB/s)"] = tuple(f["direct"][op][1] for op in ("read", "write"))
    return out


def lat_tables(lats):
    print("\n#### odmlat (Fig. 5): mean microseconds per I/O, one at a time\n")
    print("| size bytes | path (dafs) | " + " | ".join(f"{s} read | {s} write" for s in SETUPS) + " |")
    print("|---:|---|" + "---:|" * (2 * len(SETUPS)))
    sizes = sorted({p["size_bytes"] for l in lats.values() for p in l["points"]})
    for size in sizes:
        cells, path = [], "-"
        for s in SETUPS:
            pt = next((p for p in lats.get(s, {}).get("points", []) if p["size_bytes"] == size), None)
            cells += [f"{pt['read_us']:.1f}", f"{pt['write_us']:.1f}"] if pt else ["-", "-"]
            if pt and pt["path"] != "local":
                path = pt["path"]
        print(f"| {size} | {path} | {' | '.join(cells)} |")
    thr = {s: l["inline_threshold_bytes"] for s, l in lats.items() if l["backend"] == "dafs"}
    print(f"\nInline threshold: {thr}. Table 1 components from linear fits (inline sizes,"
          " direct sizes), Treq from NULL round trips:\n")
    print("| component | " + " | ".join(f"{s} read | {s} write" for s in SETUPS)
          + " | seed 002 read | seed 002 write |")
    print("|---|" + "---:|" * (2 * len(SETUPS) + 2))
    comps = {s: components(l) for s, l in lats.items()}
    for name, seed in SEED_TABLE1.items():
        cells = []
        for s in SETUPS:
            v = comps.get(s, {}).get(name)
            cells += [f"{v[0]:.1f}", f"{v[1]:.1f}"] if v else ["-", "-"]
        print(f"| {name} | {' | '.join(cells)} | {seed[0]} | {seed[1]} |")
    return comps


def main():
    out, quick = sys.argv[1], sys.argv[2] == "1"
    blast, lats = load(out, "odmblast"), load(out, "odmlat")
    print(f"\n### ODM (seed 002): odmblast and odmlat{' (--quick: tiny sizes)' if quick else ''}")
    blast_table(blast, "Fig. 2 (reads)", ["seqread", "randread"])
    blast_table(blast, "Fig. 3 (writes)", ["seqwrite", "randwrite"])
    blast_table(blast, "Fig. 4 (50/50 random mix)", ["mix"])
    comps = lat_tables(lats)
    target = None
    get = lambda s: next((r["mb_per_s"] for r in blast.get(s, [])
                          if r["test"] == "seqread" and r["block_bytes"] == 1048576), None)
    shm, loc = get("dafs-shm"), get("local")
    if shm and loc:
        target = shm / loc
        print(f"\nTarget: odmblast sequential 1 MiB reads, dafs-shm / local = {target:.2f} "
              f"(target >= 0.9: {'met' if target >= 0.9 else 'MISSED'})")
    with open(os.path.join(out, "odm-bench.json"), "w") as f:
        json.dump({"quick": quick, "odmblast": blast, "odmlat": lats,
                   "table1": {s: {k: list(v) for k, v in c.items()} for s, c in comps.items()},
                   "seq_1m_read_shm_over_local": target}, f, indent=1)
    print(f"\nJSON: {os.path.join(out, 'odm-bench.json')}")


if __name__ == "__main__":
    main()
