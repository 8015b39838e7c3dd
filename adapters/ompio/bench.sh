#!/usr/bin/env bash
# MPI-IO experiments of seed 004 ("MPI-IO on DAFS"): one plain MPI-IO program
# (adapters/ompio/bench/mpiio_bench.c) run with mpirun on every backend, side by side:
#
#   local     Open MPI's own OMPIO path (fs ufs + fbtl posix) on files in a local directory
#   dafs-shm  OMPIO through the fs_dafs/fbtl_dafs components (`dafs:` names), shared memory
#   dafs-tcp  the same components over TCP (provider tcp)
#   nfs       OMPIO's ufs/posix path on `nfs://` names, served by the NFS baseline
#             (NFS-Ganesha + libnfs, shared/peers/nfs) through a libnfs preload shim
#             (bench/nfs_preload.c); only when that baseline is running or --start-nfs
#
# Figs. 6 (4-byte read latency, sequential and random; append latency), 7 (read and write
# bandwidth vs block size 1 B .. 1 MiB), 8 (iread + compute overlap vs CPU fraction) and
# the memory-management alternatives (percall / library / cache, Figs. 4-5) on dafs.
# Every figure is at queue depth 1 on every backend (blocking calls, or one iread in flight).
#
# Usage: adapters/ompio/bench.sh [--quick] [--runs N] [--np N] [--secs S] [--size BYTES]
#                                [--backends LIST] [--start-nfs] [--out DIR]
#   --quick       16 MiB file, fewer block sizes and fractions, 0.1 s per measurement, 1 run
#   --runs N      rounds (backends interleaved in each); medians are reported (default 3)
#   --start-nfs   start the NFS baseline (sudo SERVE_ONLY=1 run_baseline.sh) and stop it after
#   --out DIR     where results go (default target/mpibench): mpiio.json (everything, one
#                 file), report.md (the Markdown tables, also printed on stdout), raw.jsonl,
#                 errors.txt (failed jobs: the run goes on, and exits 1 at the end)
# Environment: DAFS_PROFILE (release; debug for the dev build), NFS_PEER_DIR (the
# shared/peers/nfs directory, default ../shared/peers/nfs beside the repository),
# NFS_URL_BASE (nfs://127.0.0.1/export), NFS_URL_OPTS (?version=3&nfsport=2049&mountport=20048),
# NFS_EXPORT_DIR (the server's directory behind it, /tmp/nfsexport: read once before the NFS
# tests, as every backend's data file is, so all of them start from a warm page cache)
set -euo pipefail
CALLER_PWD=$PWD
cd "$(dirname "$0")/../.."
ROOT=$PWD

QUICK=0 RUNS=3 NP=1 SECS="" SIZE="" BACKENDS="local,dafs-shm,dafs-tcp,nfs" START_NFS=0
OUT=${CARGO_TARGET_DIR:-$ROOT/target}/mpibench
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    --runs) RUNS=$2; shift ;;
    --np) NP=$2; shift ;;
    --secs) SECS=$2; shift ;;
    --size) SIZE=$2; shift ;;
    --backends) BACKENDS=$2; shift ;;
    --start-nfs) START_NFS=1 ;;
    --out) OUT=$2; case "$OUT" in /*) ;; *) OUT=$CALLER_PWD/$OUT ;; esac; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
if [ "$QUICK" = 1 ]; then
    SECS=${SECS:-0.1} SIZE=${SIZE:-16m} RUNS=1
    BLOCKS=1,64,4k,64k,1m FRACTIONS=0,0.5,0.9 MEM_BLOCKS=1k,16k,256k REUSES="100 0"
else
    SECS=${SECS:-1} SIZE=${SIZE:-256m}
    BLOCKS=1,4,16,64,256,1k,2k,4k,16k,64k,256k,1m
    FRACTIONS=0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9 MEM_BLOCKS=1k,2k,16k,64k,256k REUSES="100 50 0"
fi
case "$RUNS" in '' | *[!0-9]* | 0) echo "bench.sh: --runs needs a positive integer" >&2; exit 2 ;; esac

source adapters/ompio/bench/lib-mpibench.sh
mpibench_deps
export DAFS_PROFILE=${DAFS_PROFILE:-release}
mpibench_build "${CARGO_TARGET_DIR:-$ROOT/target}/mpibench-build"

WORK=$(mktemp -d /tmp/dafs-mpibench.XXXXXX)
pids=()
NFS_PID=""
cleanup() {
    stop_pids
    if [ -n "$NFS_PID" ]; then kill "$NFS_PID" 2>/dev/null || true; wait "$NFS_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$OUT" "$WORK/export" "$WORK/local"
: >"$OUT/raw.jsonl"
: >"$OUT/stats.txt"
: >"$OUT/errors.txt"

# ---------------------------------------------------------------- servers
source scripts/lib-dafsd.sh
DAFSD=$REL/dafsd
if [[ ",$BACKENDS," == *,dafs-* ]]; then
    start_dafsd bench "$WORK/export" --shm-socket "$WORK/dafsd.sock"
    DAFS_ADDR=$ADDR DAFS_SHM=$SHM
    echo "==> dafsd on $DAFS_ADDR and ${DAFS_SHM:-no shared memory} (export $WORK/export)" >&2
fi
NFS_STATUS="not requested (--backends)"
if [[ ",$BACKENDS," == *,nfs,* ]]; then
    mpibench_nfs_setup   # sets NFS_STATUS ("" = usable) and NFS_PID when it started the server
fi

# ---------------------------------------------------------------- runs
# run_bench BACKEND MODE TEST [args...]: one mpirun job; its JSON records go to raw.jsonl with
# backend/mode/round added, the component's counters (if printed) to stats.txt.
run_bench() {
    local backend=$1 mode=$2 test=$3; shift 3
    local file wfile
    file=$(mpibench_name "$backend" data) wfile=$(mpibench_name "$backend" wdata)
    local out="$WORK/job.out" err="$WORK/job.err"
    # A failed job is reported (stderr, errors.txt, the report) and the run goes on: one broken
    # backend must not lose the others' measurements. The script's exit status says so at the end.
    if ! mpibench_env "$backend" "$mode" timeout 600 "$MPIRUN" -np "$NP" "$BENCH" \
        --size "$SIZE" --secs "$SECS" --wfile "$wfile" --label "$backend" "$@" "$test" "$file" \
        >"$out" 2>"$err"; then
        echo "error: $backend ($mode) $test failed:" >&2
        tail -20 "$err" >&2
        local why
        why=$(grep -m1 '^mpiio_bench: ' "$err" || tail -1 "$err")
        echo "round $ROUND: $backend $mode $test $*: ${why:-exit status non-zero, no message}" >>"$OUT/errors.txt"
    fi
    python3 adapters/ompio/bench/report.py tag "$backend" "$mode" "$ROUND" <"$out" >>"$OUT/raw.jsonl"
    # The component's counters, one line per process: "round N | job | counters".
    grep '^dafs_ompio_stats' "$err" | sed "s~^~round $ROUND | $backend $mode $test $* | ~" >>"$OUT/stats.txt" || true
}

# warm BACKEND: read the data file's backing copy once, untimed, before a backend's tests. This
# machine class reclaims file pages idle for about a minute (shared/peers/nfs/README.md), so
# without it a backend measured late in a round would read partly from disk.
warm() {
    local f
    case "$1" in
    local) f=$WORK/local/mpiio.data ;;
    dafs-*) f=$WORK/export/mpiio.data ;;
    nfs) f=${NFS_EXPORT_DIR:-/tmp/nfsexport}/mpiio-$$.data ;;
    esac
    if [ -r "$f" ]; then cat "$f" >/dev/null; fi
}

active=()
for b in ${BACKENDS//,/ }; do
    case "$b" in
    local) active+=(local) ;;
    dafs-shm) [ -n "${DAFS_SHM:-}" ] && active+=(dafs-shm) ;;
    dafs-tcp) active+=(dafs-tcp) ;;
    nfs) [ -z "$NFS_STATUS" ] && active+=(nfs) ;;
    *) echo "bench.sh: unknown backend $b (local, dafs-shm, dafs-tcp, nfs)" >&2; exit 2 ;;
    esac
done
echo "==> backends: ${active[*]}; $RUNS round(s), np $NP, file $SIZE, ${SECS} s per measurement" >&2
for b in "${active[@]}"; do ROUND=0 run_bench "$b" cache prepare; done
t0=$(date +%s)
for ROUND in $(seq "$RUNS"); do
    # Rotate the backend order every round, so no backend always runs first or last.
    n=${#active[@]} k=$(((ROUND - 1) % ${#active[@]}))
    order=("${active[@]:k}" "${active[@]:0:k}")
    [ "$n" -gt 0 ] || break
    for b in "${order[@]}"; do
        echo "==> round $ROUND: $b" >&2
        warm "$b"
        run_bench "$b" cache latency --block 4
        run_bench "$b" cache bandwidth --blocks "$BLOCKS"
        run_bench "$b" cache overlap --block 64k --fractions "$FRACTIONS"
    done
    for b in "${order[@]}"; do
        [[ "$b" == dafs-* ]] || continue
        warm "$b"
        for mode in percall library cache; do
            for reuse in $REUSES; do
                run_bench "$b" "$mode" memreg --blocks "$MEM_BLOCKS" --reuse "$reuse"
            done
        done
    done
done
echo "==> measured in $(($(date +%s) - t0)) s" >&2
# MPI_File_delete through each backend (the NFS export outlives this script).
for b in "${active[@]}"; do ROUND=0 run_bench "$b" cache delete; done

python3 adapters/ompio/bench/report.py --raw "$OUT/raw.jsonl" --stats "$OUT/stats.txt" --errors "$OUT/errors.txt" \
    --json "$OUT/mpiio.json" --md "$OUT/report.md" \
    --meta "quick=$QUICK" "runs=$RUNS" "np=$NP" "size=$SIZE" "secs=$SECS" \
    "profile=$DAFS_PROFILE" "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "nfs_status=${NFS_STATUS:-running}" "nfs_route=$NFS_ROUTE" \
    "mpi=$("$MPIRUN" --version 2>/dev/null | head -1)"
cat "$OUT/report.md"
echo "==> $OUT/mpiio.json, $OUT/report.md" >&2
if [ -s "$OUT/errors.txt" ]; then
    echo "bench.sh: $(wc -l <"$OUT/errors.txt") job(s) failed (see \"Errors\" in the report)" >&2
    exit 1
fi
