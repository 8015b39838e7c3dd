#!/usr/bin/env bash
# Seed 002's raw I/O experiments with the ODM library, on dafs-shm, dafs-tcp and local
# files (the same API: the local backend runs pread/pwrite at the same queue depth):
#   odmblast  Figs. 2-4: MB/s vs block size; sequential/random reads and writes and a
#             50/50 random mix; 32 outstanding (16 submitted + 16 waited per odm_io)
#   odmlat    Fig. 5 and Table 1: latency per I/O size, split into Treq, Tdisk, Trdma,
#             Rinline, Rdirect
# Prints Markdown tables (shm/local ratios; the seed's values where it gives numbers)
# and writes JSON.
#
# Usage: adapters/odm/bench.sh [--quick] [--out DIR]
#   --quick     64 MiB files, blocks 16k,1m, 200 latency iterations: well under a minute
#   --out DIR   where odmblast-*.json, odmlat-*.json and odm-bench.json go
#               (default target/odm-bench/results)
#   ODM_BENCH_DIR   scratch directory for the export and the local files, on the same
#                   file system for both (default target/odm-bench)
#   DAFS_PROFILE    release (default) or debug build of libdafs and dafsd
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
QUICK=0
OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1 ;;
        --out) OUT=$2; shift ;;
        *) echo "usage: adapters/odm/bench.sh [--quick] [--out DIR]" >&2; exit 2 ;;
    esac
    shift
done
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
SCRATCH=${ODM_BENCH_DIR:-$CARGO_TARGET_DIR/odm-bench}
OUT=${OUT:-$SCRATCH/results}
if [ "$QUICK" = 1 ]; then
    FILE_BYTES=$((64 << 20)); BS=16384,1048576; ITERS=200
else
    FILE_BYTES=$((512 << 20)); BS=4096,16384,65536,262144,1048576; ITERS=2000
fi

source scripts/ensure-deps.sh
command -v python3 >/dev/null 2>&1 || {
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3 >/dev/null
}
export DAFS_PROFILE=${DAFS_PROFILE:-release}
echo "==> cargo build ($DAFS_PROFILE) -p dafs-capi -p dafs-cli"
if [ "$DAFS_PROFILE" = release ]; then cargo build --release -q -p dafs-capi -p dafs-cli; else cargo build -q -p dafs-capi -p dafs-cli; fi
mkdir -p "$SCRATCH" "$OUT"
WORK=$(mktemp -d "$SCRATCH/run.XXXXXX")
PREFIX=$WORK/prefix
DAFS_NO_BUILD=1 scripts/install-capi.sh "$PREFIX" >/dev/null
scripts/install-odm.sh "$PREFIX" >/dev/null
pids=()
source scripts/lib-dafsd.sh
DAFSD=$CARGO_TARGET_DIR/$DAFS_PROFILE/dafsd
cleanup() { stop_pids; rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p "$WORK/export" "$WORK/local"
start_dafsd bench "$WORK/export" --shm-socket "$WORK/dafsd.sock"
[ -n "$SHM" ] || { echo "error: dafsd did not offer shared memory" >&2; exit 1; }

setups=(
    "dafs-shm|--backend dafs --target $SHM"
    "dafs-tcp|--backend dafs --provider tcp --target $ADDR"
    "local|--backend local --target $WORK/local"
)
for s in "${setups[@]}"; do
    label=${s%%|*}; args=${s#*|}
    echo "==> odmblast on $label ($((FILE_BYTES >> 20)) MiB x 2 files, blocks $BS)"
    # shellcheck disable=SC2086
    "$PREFIX/bin/odmblast" $args --label "$label" --file-bytes "$FILE_BYTES" --bs "$BS" \
        --json "$OUT/odmblast-$label.json" >/dev/null
    echo "==> odmlat on $label ($ITERS iterations per size)"
    # shellcheck disable=SC2086
    "$PREFIX/bin/odmlat" $args --label "$label" --iters "$ITERS" \
        --json "$OUT/odmlat-$label.json" >"$OUT/odmlat-$label.md"
done
python3 adapters/odm/report.py "$OUT" "$QUICK"
