#!/usr/bin/env bash
# Correctness test of the MPI-IO benchmark (adapters/ompio/bench.sh), a few seconds: every
# test of mpiio_bench with --verify (each block read checked against the pattern, each block
# written read back) under `mpirun -np 2` on local files, on dafs over TCP and shared memory
# (fs_dafs/fbtl_dafs, every memory mode) and, when the NFS baseline is running, on NFS
# through nfs_preload.so; the file the benchmark wrote through dafs must equal, byte for byte,
# the one it wrote locally; a corrupted byte must make the benchmark fail; MPI_File_delete
# must remove the file from the export; report.py must turn the records into its tables and
# JSON. Prints "mpibench: N passed, N failed" last.
#   DAFS_PROFILE (debug by default, as the other adapter tests)
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROOT=$PWD
source adapters/ompio/bench/lib-mpibench.sh
mpibench_deps
export DAFS_PROFILE=${DAFS_PROFILE:-debug}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
mpibench_build "$CARGO_TARGET_DIR/mpibench-test"

WORK=$(mktemp -d /tmp/dafs-mpibench-test.XXXXXX)
pids=()
source scripts/lib-dafsd.sh
DAFSD=$REL/dafsd
cleanup() {
    stop_pids
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/export" "$WORK/local"
start_dafsd test "$WORK/export" --shm-socket "$WORK/dafsd.sock"
DAFS_ADDR=$ADDR DAFS_SHM=$SHM
[ -n "$DAFS_SHM" ] || { echo "error: dafsd did not offer shared memory" >&2; exit 1; }
mpibench_nfs_setup

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; }

SIZE=2m
# bench BACKEND MODE TEST [args]: runs one mpiio_bench job (np 2, --verify); output in $WORK/out.
bench() {
    local backend=$1 mode=$2 test=$3; shift 3
    mpibench_env "$backend" "$mode" timeout 120 "$MPIRUN" -np 2 "$BENCH" --size "$SIZE" --secs 0.05 \
        --verify --label "$backend" --wfile "$(mpibench_name "$backend" wdata)" "$@" "$test" \
        "$(mpibench_name "$backend" data)" >"$WORK/out" 2>"$WORK/err"
}
# check NAME BACKEND MODE TEST [args]: the job must succeed and print its JSON records.
check() {
    local name=$1 backend=$2 mode=$3 test=$4; shift 4
    if bench "$backend" "$mode" "$test" "$@" && grep -q "\"test\":\"$test\"" "$WORK/out"; then
        ROUND=1 python3 adapters/ompio/bench/report.py tag "$backend" "$mode" 1 <"$WORK/out" >>"$WORK/raw.jsonl"
        pass "$name"
    else
        tail -5 "$WORK/err" | sed 's/^/    | /'
        fail "$name"
    fi
}

backends=(local dafs-tcp dafs-shm)
[ -z "$NFS_STATUS" ] && backends+=(nfs) || echo "note: nfs skipped: $NFS_STATUS"
for b in "${backends[@]}"; do
    check "$b: prepare (np 2)" "$b" cache prepare
    check "$b: latency, every read verified" "$b" cache latency --block 4
    check "$b: bandwidth 1 B..1 MiB, reads verified, writes read back" "$b" cache bandwidth --blocks 1,3,1000,4k,64k,1m
    check "$b: iread + compute overlap, verified" "$b" cache overlap --block 64k --fractions 0,0.5
done
# Every memory mode over shared memory here; over TCP in the driver's run below.
for mode in percall library cache; do
    check "dafs-shm: memreg, fbtl_dafs_mem=$mode, half the reads into fresh mappings" dafs-shm "$mode" memreg \
        --blocks 1k,64k --reuse 50
    if grep -q "^dafs_ompio_stats .*mem=$mode .*bytes_read=[1-9]" "$WORK/err"; then
        pass "dafs-shm: $mode: the I/O went through fbtl_dafs (its counters)"
    else
        fail "dafs-shm: $mode: no dafs_ompio_stats line with bytes read"
    fi
done

# What the benchmark wrote through dafs is on the server, byte for byte.
if cmp -s "$WORK/local/mpiio.data" "$WORK/export/mpiio.data"; then
    pass "the data file written through fs_dafs equals the local one"
else
    fail "the data file written through fs_dafs differs from the local one"
fi

# The verification catches wrong data (on the server's copy and on the local one).
for b in dafs-tcp local; do
    f=$WORK/export/mpiio.data
    [ "$b" = local ] && f=$WORK/local/mpiio.data
    printf '\x5a' | dd of="$f" bs=1 seek=1500001 conv=notrunc 2>/dev/null
    if ! bench "$b" cache bandwidth --blocks 4k && grep -q 'wrong data at file offset 1500001' "$WORK/err"; then
        pass "$b: a corrupted byte fails the benchmark"
    else
        fail "$b: a corrupted byte went unnoticed"
    fi
done

# MPI_File_delete through fs_dafs removes the files from the export.
if bench dafs-tcp cache delete && [ ! -e "$WORK/export/mpiio.data" ] && [ ! -e "$WORK/export/mpiio.wdata" ]; then
    pass "dafs-tcp: MPI_File_delete removes the files"
else
    fail "dafs-tcp: MPI_File_delete"
fi
if [ -z "$NFS_STATUS" ]; then bench nfs cache delete || fail "nfs: MPI_File_delete"; fi

# The report: every figure's table and the JSON with the ratios.
if python3 adapters/ompio/bench/report.py --raw "$WORK/raw.jsonl" --json "$WORK/r.json" --md "$WORK/r.md" \
    --meta quick=1 runs=1 np=2 && python3 - "$WORK/r.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert set(d["backends"]) >= {"local", "dafs-tcp", "dafs-shm"}, d["backends"]
r = d["ratios"]
for k in ("fig6/read-seq/dafs-tcp/local", "fig7/read/1 MiB/dafs-shm/local", "fig7/write/1 B/dafs-tcp/local"):
    assert isinstance(r.get(k), float) and r[k] > 0, (k, r.get(k))
assert any(k.startswith("fig8/dafs-tcp/f=0.5") for k in r)
for t in ("Fig. 6", "Fig. 7: sequential read", "Fig. 7: sequential write", "Fig. 8", "Memory management"):
    assert t in d["markdown"], t
series = {p["series"] for p in d["seed_points"]}
for k in ("mpiio.bw.read.dafs", "mpiio.bw.write.local", "mpiio.lat.randread.dafs-shm", "mpiio.overlap.dafs",
          "mpiio.lat.regcache_reuse50.dafs-shm", "mpiio.lat.regpercall_reuse50.dafs-shm"):
    assert k in series, k
modes = {x["mode"] for x in d["results"] if x["test"] == "memreg"}
assert modes == {"percall", "library", "cache"}, modes
EOF
then
    pass "report.py: tables and JSON"
else
    fail "report.py: tables and JSON"
fi

# The driver end to end (tiny): its report and JSON; and a failing job is reported, the run
# goes on to its report, and the exit status says so.
if adapters/ompio/bench.sh --quick --secs 0.02 --backends dafs-tcp --out "$WORK/drv" \
    >"$WORK/drv.out" 2>"$WORK/drv.err" &&
    grep -q '^| 1 MiB | [0-9]' "$WORK/drv/report.md" && grep -q '^| dafs-tcp | 16 KiB | 0 % |' "$WORK/drv/report.md" &&
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["backends"]==["dafs-tcp"] and not d["errors"]; assert {r["mode"] for r in d["results"]}=={"percall","library","cache"}' \
        "$WORK/drv/mpiio.json"; then
    pass "bench.sh --quick: report and JSON for dafs-tcp, every memory mode"
else
    tail -5 "$WORK/drv.err" | sed 's/^/    | /'
    fail "bench.sh --quick"
fi
if ! adapters/ompio/bench.sh --quick --np 2 --size 1m --backends local --out "$WORK/drv-bad" \
    >"$WORK/drv-bad.out" 2>"$WORK/drv-bad.err" &&
    grep -q 'local cache latency --block 4: mpiio_bench: .*at least 1 MiB' "$WORK/drv-bad/report.md" &&
    grep -q 'job(s) failed' "$WORK/drv-bad.err"; then
    pass "bench.sh: failed jobs are in the report and the exit status"
else
    fail "bench.sh: failed jobs are not reported"
fi

if ! kill -0 "${pids[0]}" 2>/dev/null; then fail "dafsd died during the tests"; fi
echo "mpibench: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
