#!/usr/bin/env bash
# Run the benchmark job files against a fresh dafsd and print one markdown table:
# local psync (jobs/local.fio), dafs over TCP (jobs/dafs-tcp.fio), dafs over shared
# memory (jobs/dafs-shm.fio). The export and the local directory are both under one
# temporary directory (same file system, both served from the page cache).
#
#   scripts/test-c.sh                  # builds dafsd and target/c-tests/libdafs_fio.so
#   adapters/fio/bench.sh [SECONDS]    # per job, default 5
#
# Prints the fio commands it runs, then the table (bandwidth, IOPS, mean and p99
# completion latency per job). CARGO_TARGET_DIR is honoured.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
RUNTIME=${1:-5}
T=${CARGO_TARGET_DIR:-$ROOT/target}
ENGINE=$T/c-tests/libdafs_fio.so
DAFSD=$T/release/dafsd
for f in "$ENGINE" "$DAFSD"; do
    [ -x "$f" ] || [ -f "$f" ] || { echo "bench: $f missing: run scripts/test-c.sh first" >&2; exit 1; }
done

W=$(mktemp -d /tmp/dafs-fio-bench.XXXXXX)
mkdir -p "$W/export" "$W/local"
"$DAFSD" "$W/export" --listen 127.0.0.1:0 --shm-socket "$W/dafsd.sock" >"$W/dafsd.out" 2>"$W/dafsd.err" &
DPID=$!
trap 'kill $DPID 2>/dev/null || true; sleep 0.2; rm -rf "$W"' EXIT
for _ in $(seq 100); do grep -q '^dafsd listening on' "$W/dafsd.out" && break; sleep 0.1; done
ADDR=$(sed -n 's/^dafsd listening on //p' "$W/dafsd.out")
SHM=$(sed -n 's/^shared memory: //p' "$W/dafsd.out")
echo "dafsd $DAFSD $W/export --listen 127.0.0.1:0 --shm-socket $W/dafsd.sock   # -> $ADDR, $SHM"

run() { # label env... -- jobfile
    local label=$1; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    echo "${envs[*]} fio --output-format=terse $1" >&2
    (cd "$W" && env "${envs[@]}" fio --output-format=terse "$ROOT/$1") | awk -F';' -v label="$label" '
        $1 == 3 {
            # terse v3: read block starts at field 6, write block at field 47
            if ($8 > 0) { b = 6 } else { b = 47 }
            bw = $(b + 1) / 1024; iops = $(b + 2); clat = $(b + 10)
            split($(b + 18), p50, "="); split($(b + 24), p99, "=")
            err = ($5 != 0) ? " (err " $5 ")" : ""
            printf "| %s | %s | %.0f | %.0f | %.1f | %s |%s\n", $3, label, bw, iops, clat, p99[2], err
        }'
}

{
    run "local psync" FIO_RUNTIME="$RUNTIME" FIO_LOCAL_DIR="$W/local" -- adapters/fio/jobs/local.fio
    run "dafs tcp" FIO_RUNTIME="$RUNTIME" DAFS_FIO_ENGINE="$ENGINE" DAFS_TARGET="$ADDR" -- adapters/fio/jobs/dafs-tcp.fio
    run "dafs shm" FIO_RUNTIME="$RUNTIME" DAFS_FIO_ENGINE="$ENGINE" DAFS_SHM_TARGET="$SHM" -- adapters/fio/jobs/dafs-shm.fio
} >"$W/rows"
echo
echo "| job | path | MiB/s | IOPS | mean clat (us) | p99 clat (us) |"
echo "|---|---|---:|---:|---:|---:|"
sort -s -t'|' -k2,2 "$W/rows"
