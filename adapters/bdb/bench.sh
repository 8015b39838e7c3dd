#!/usr/bin/env bash
# Seed 000 Fig. 7 for Berkeley DB 5.3 on dafs: random single-record reads (16 KiB pages)
# through a fixed Berkeley DB cache while the database grows past it, for
#   local   the database file read directly (plain Berkeley DB, no hooks)
#   shm     the same file through dafsd, libdafs_bdb preloaded, shared-memory provider
#   tcp     the same, TCP provider over loopback
#   fuse    the same file through `dafs mount` (plain Berkeley DB on the mount)
# Every mode reads the SAME file in dafsd's export, so all four see the same bytes and
# the same warm page cache of this machine: the seed's "warm db and server cache". The
# local side's double caching (Berkeley DB cache + page cache) costs it nothing here
# because memory is plentiful; the seed's penalty (the two caches competing for 256 MB)
# is not reproduced, so this measures the access path once the database exceeds the db
# cache: a page-cache pread vs. a dafs request into the server's page cache. libdafs_bdb
# keeps the db cache in registered memory and dafsd runs with an inline threshold below
# the page size, so each miss is placed by the server directly into the cache buffer.
#
#   adapters/bdb/bench.sh [--quick]
#
# Prints a Markdown table (reads/s per database size, ratios vs local) and writes JSON
# (default target/bdb-bench/bdb-fig7.json). --quick: 4 MiB cache, 2-16 MiB databases,
# 1 s per point (a smoke test, not a measurement).
# Knobs: BDB_BENCH_CACHE_MIB (64), BDB_BENCH_SIZES_MIB ("16 32 64 128 256 512"),
#   BDB_BENCH_SECONDS (20, per point), BDB_BENCH_MODES ("local shm tcp fuse"),
#   BDB_BENCH_INLINE (dafsd --inline-threshold, 4096), BDB_BENCH_JSON (output file),
#   DAFS_PROFILE (debug = the optimized dev profile, as the tests; or release).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
if [ "$QUICK" = 1 ]; then
    CACHE_MIB=${BDB_BENCH_CACHE_MIB:-4}; SIZES=${BDB_BENCH_SIZES_MIB:-"2 8 16"}; SECONDS_PER=${BDB_BENCH_SECONDS:-1}
else
    CACHE_MIB=${BDB_BENCH_CACHE_MIB:-64}; SIZES=${BDB_BENCH_SIZES_MIB:-"16 32 64 128 256 512"}; SECONDS_PER=${BDB_BENCH_SECONDS:-20}
fi
MODES=${BDB_BENCH_MODES:-"local shm tcp fuse"}
INLINE=${BDB_BENCH_INLINE:-4096}
# Bytes per record in the loaded B-tree (8-byte key, 100-byte value, 16 KiB pages):
# measured, used only to pick a record count for a target size (the table shows the
# real file size).
RECORD_BYTES=122

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
export DAFS_PROFILE=${DAFS_PROFILE:-debug}
OUTDIR=$CARGO_TARGET_DIR/bdb-bench
JSON=${BDB_BENCH_JSON:-$OUTDIR/bdb-fig7.json}
mkdir -p "$OUTDIR"
echo "==> building ($DAFS_PROFILE): libdafs, dafsd, dafs, libdafs_bdb, bdb_bench" >&2
if [ "$DAFS_PROFILE" = release ]; then cargo build --release -q -p dafs-capi -p dafs-cli; else cargo build -q -p dafs-capi -p dafs-cli; fi
REL=$CARGO_TARGET_DIR/$DAFS_PROFILE
PREFIX=$OUTDIR/prefix
DAFS_NO_BUILD=1 scripts/install-capi.sh "$PREFIX" >/dev/null
adapters/bdb/install.sh "$PREFIX" >/dev/null
LIB=$PREFIX/lib/libdafs_bdb.so
BENCH=$OUTDIR/bdb_bench
cc -std=c11 -Wall -Wextra -Werror -O2 adapters/bdb/bdb_bench.c -o "$BENCH" -ldb-5.3

WORK=$(mktemp -d /tmp/dafs-bdb-bench.XXXXXX)
pids=()
source scripts/lib-dafsd.sh
DAFSD=$REL/dafsd
MNT=$WORK/mnt
cleanup() {
    grep -q " $MNT " /proc/mounts 2>/dev/null && { "$REL/dafs" umount "$MNT" 2>/dev/null || "$REL/dafs" umount --lazy "$MNT" 2>/dev/null || true; }
    stop_pids
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/export/bench" "$WORK/pfx" "$MNT"
start_dafsd main "$WORK/export" --shm-socket "$WORK/dafsd.sock" --inline-threshold "$INLINE"
echo "==> dafsd $ADDR $SHM (inline threshold $INLINE), cache $CACHE_MIB MiB, sizes $SIZES MiB, $SECONDS_PER s per point" >&2
if [[ " $MODES " == *" fuse "* ]]; then
    if ! "$REL/dafs" mount "dafs://$ADDR/" "$MNT" -d -q >"$WORK/mount.out" 2>&1; then
        echo "warning: dafs mount failed, no fuse column:" >&2; sed 's/^/    /' "$WORK/mount.out" >&2
        MODES=${MODES//fuse/}
    fi
fi

# one MODE FILE_NAME RECORDS: one point, its JSON object on stdout
one() {
    local mode=$1 name=$2 recs=$3 home=$WORK/home-$1
    rm -rf "$home"; mkdir -p "$home"
    case $mode in
        local) "$BENCH" read "$home" "$WORK/export/bench/$name" "$recs" "$CACHE_MIB" "$SECONDS_PER" ;;
        shm) env DAFS_BDB_SERVER="$SHM" DAFS_BDB_PREFIX="$WORK/pfx" LD_PRELOAD="$LIB" \
                 "$BENCH" read "$home" "$WORK/pfx/bench/$name" "$recs" "$CACHE_MIB" "$SECONDS_PER" ;;
        tcp) env DAFS_BDB_SERVER="$ADDR" DAFS_BDB_PROVIDER=tcp DAFS_BDB_PREFIX="$WORK/pfx" LD_PRELOAD="$LIB" \
                 "$BENCH" read "$home" "$WORK/pfx/bench/$name" "$recs" "$CACHE_MIB" "$SECONDS_PER" ;;
        fuse) "$BENCH" read "$home" "$MNT/bench/$name" "$recs" "$CACHE_MIB" "$SECONDS_PER" ;;
        *) echo "unknown mode $mode" >&2; return 1 ;;
    esac
}

echo "[" >"$JSON"
first=1
declare -A RATE
ROWS=()
for size in $SIZES; do
    recs=$((size * 1024 * 1024 / RECORD_BYTES))
    name=db-$size.db
    "$BENCH" load "$WORK/export/bench/$name" "$recs"
    real_mib=$(awk -v b="$(stat -c %s "$WORK/export/bench/$name")" 'BEGIN { printf "%.1f", b / 1048576 }')
    for mode in $MODES; do
        echo "    $mode: $size MiB ($recs records)" >&2
        j=$(one "$mode" "$name" "$recs")
        RATE[$size,$mode]=$(echo "$j" | sed -E 's/.*"reads_per_s": ([0-9.]+).*/\1/')
        [ "$first" = 1 ] || echo "," >>"$JSON"
        first=0
        printf '  {"mode": "%s", "db_target_mib": %s, "db_file_mib": %s, %s' "$mode" "$size" "$real_mib" "${j#\{}" >>"$JSON"
    done
    ROWS+=("$size $real_mib $recs")
    rm -f "$WORK/export/bench/$name"
done
echo "]" >>"$JSON"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }'; }
echo
echo "Berkeley DB random single-record reads/s, 16 KiB pages, $CACHE_MIB MiB db cache ($SECONDS_PER s per point$([ "$QUICK" = 1 ] && echo ', --quick: smoke test only'))"
echo
header="| DB size (MiB) | records | DB/cache |"; sep="|---:|---:|---:|"
for mode in $MODES; do
    header+=" $mode |"; sep+="---:|"
    [ "$mode" = local ] || { header+=" $mode/local |"; sep+="---:|"; }
done
echo "$header"; echo "$sep"
for row in "${ROWS[@]}"; do
    read -r size real recs <<<"$row"
    line="| $real | $recs | $(awk -v a="$real" -v c="$CACHE_MIB" 'BEGIN { printf "%.2f", a / c }') |"
    for mode in $MODES; do
        line+=" ${RATE[$size,$mode]} |"
        [ "$mode" = local ] || line+=" $(ratio "${RATE[$size,$mode]}" "${RATE[$size,local]:-0}") |"
    done
    echo "$line"
done
echo
echo "JSON: $JSON"
