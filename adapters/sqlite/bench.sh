#!/usr/bin/env bash
# SQLite transactions/s: the same speedtest-style workload (adapters/sqlite/speedtest.c:
# N insert, N indexed-select and N update transactions of R statements each, default
# rollback journal, synchronous=FULL) on one machine, against one fresh dafsd, through
#
#   local           the database in a local directory (unix VFS)
#   vfs-shm         libdafs_sqlite.so, server=dafs+shm:///... (shared-memory provider)
#   vfs-tcp         libdafs_sqlite.so, server=HOST:PORT&provider=tcp
#   preload         the unix VFS under LD_PRELOAD=libdafs_preload.so (DAFS_MOUNT prefix)
#   fuse            the unix VFS on a `dafs mount` of the export (needs root and /dev/fuse;
#                   otherwise the row says why it was skipped)
#
# The export and the local directory are both under one temporary directory (same file
# system, same fsync cost). Prints a Markdown table (transactions/s per phase and for
# the whole run, and the whole run's ratio to local), and writes the rows as JSON.
#
#   adapters/sqlite/bench.sh [--quick] [--txns N] [--rows R] [--journal MODE] [--runs N] [--json FILE]
#     --quick    50 transactions per phase (well under a minute); default 1000
#     --journal  rollback journal mode for every path (delete, the default, truncate, persist)
#     --runs     rounds over all paths (default 3, --quick 1); the table shows each path's
#                median round (by all-phase transactions/s), the JSON every round
#     --json     default $CARGO_TARGET_DIR/sqlite-bench/results.json
#   DAFS_PROFILE=release (default) builds dafsd, libdafs, the preload library and the
#   dafs CLI with cargo build --release; DAFS_PROFILE=debug uses the dev profile.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
TXNS=1000 ROWS=10 JOURNAL=delete RUNS=3
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
JSON=$CARGO_TARGET_DIR/sqlite-bench/results.json
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) TXNS=50 RUNS=1 ;;
        --runs) RUNS=$2; shift ;;
        --txns) TXNS=$2; shift ;;
        --rows) ROWS=$2; shift ;;
        --journal) JOURNAL=$2; shift ;;
        --json) JSON=$2; shift ;;
        *) echo "usage: adapters/sqlite/bench.sh [--quick] [--txns N] [--rows R] [--journal MODE] [--runs N] [--json FILE]" >&2; exit 2 ;;
    esac
    shift
done

export DAFS_PROFILE=${DAFS_PROFILE:-release}
echo "==> cargo build ($DAFS_PROFILE) -p dafs-capi -p dafs-cli -p dafs-preload" >&2
if [ "$DAFS_PROFILE" = release ]; then cargo build --release -q -p dafs-capi -p dafs-cli -p dafs-preload
else cargo build -q -p dafs-capi -p dafs-cli -p dafs-preload; fi
REL=$CARGO_TARGET_DIR/$DAFS_PROFILE
B=$CARGO_TARGET_DIR/sqlite-bench
PREFIX=$B/prefix
rm -rf "$PREFIX"
mkdir -p "$B" "$(dirname "$JSON")"
DAFS_NO_BUILD=1 scripts/install-capi.sh "$PREFIX" >/dev/null
adapters/sqlite/install.sh "$PREFIX" >&2
EXT=$PREFIX/lib/libdafs_sqlite.so
cc -std=gnu11 -Wall -Wextra -Werror -O2 adapters/sqlite/speedtest.c -lsqlite3 -o "$B/speedtest"

W=$(mktemp -d /tmp/dafs-sqlite-bench.XXXXXX)
chmod 755 "$W"
mkdir -p "$W/export" "$W/local" "$W/mnt"
pids=()
source scripts/lib-dafsd.sh
WORK=$W
DAFSD=$REL/dafsd
cleanup() {
    grep -q " $W/mnt " /proc/mounts && { "$REL/dafs" umount "$W/mnt" 2>/dev/null || "$REL/dafs" umount --lazy "$W/mnt" 2>/dev/null || true; }
    stop_pids
    rm -rf "$W"
}
trap cleanup EXIT
start_dafsd bench "$W/export" --shm-socket "$W/dafsd.sock"
echo "dafsd $W/export --listen 127.0.0.1:0 --shm-socket $W/dafsd.sock   # -> $ADDR, $SHM" >&2

ST=("$B/speedtest" --txns "$TXNS" --rows "$ROWS" --journal "$JOURNAL")
: >"$W/rows.json"
run() { # label command...
    local label=$1; shift
    echo "$label: $*" >&2
    if out=$(timeout 1800 "$@" --label "$label" 2>"$W/err"); then
        echo "$out" >>"$W/rows.json"
    else
        echo "{\"label\":\"$label\",\"error\":\"$(tr -d '"\\' <"$W/err" | head -c 200 | tr '\n' ' ')\"}" >>"$W/rows.json"
    fi
}
# Rounds over all paths, so that a slow spell of the machine does not hit one path only.
for round in $(seq "$RUNS"); do
    run local "${ST[@]}" "$W/local/bench-$round.db"
    run vfs-shm "${ST[@]}" --ext "$EXT" "file:/vfs-shm-$round.db?vfs=dafs&server=$SHM"
    run vfs-tcp "${ST[@]}" --ext "$EXT" "file:/vfs-tcp-$round.db?vfs=dafs&server=$ADDR&provider=tcp"
    run preload env LD_PRELOAD="$REL/libdafs_preload.so" DAFS_MOUNT="/dafs-bench-$$=dafs://$ADDR/" \
        "${ST[@]}" "/dafs-bench-$$/preload-$round.db"
    if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ] && "$REL/dafs" mount "dafs://$ADDR/" "$W/mnt" -d >"$W/mount.out" 2>&1; then
        run fuse "${ST[@]}" "$W/mnt/fuse-$round.db"
        "$REL/dafs" umount "$W/mnt" >/dev/null 2>&1 || true
    else
        echo "{\"label\":\"fuse\",\"error\":\"skipped: needs root and /dev/fuse ($(head -c 120 "$W/mount.out" 2>/dev/null | tr -d '"\\\n'))\"}" >>"$W/rows.json"
    fi
done

python3 - "$W/rows.json" "$JSON" "$TXNS" "$ROWS" "$JOURNAL" "$RUNS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
labels = list(dict.fromkeys(r["label"] for r in rows))
def median(label):
    ok = sorted((r for r in rows if r["label"] == label and "error" not in r), key=lambda r: r["total_tps"])
    if not ok:
        return next(r for r in rows if r["label"] == label)
    return dict(ok[(len(ok) - 1) // 2], rounds=len(ok))
med = {l: median(l) for l in labels}
local = med.get("local")
for r in med.values():
    if local and "error" not in local and "error" not in r:
        r["total_vs_local"] = round(r["total_tps"] / local["total_tps"], 3)
json.dump({"txns_per_phase": int(sys.argv[3]), "rows_per_txn": int(sys.argv[4]),
           "journal_mode": sys.argv[5], "median": list(med.values()), "runs": rows},
          open(sys.argv[2], "w"), indent=2)
print(f"\nSQLite speedtest: {sys.argv[3]} transactions per phase, {sys.argv[4]} statements each, "
      f"journal_mode={sys.argv[5]}, synchronous=FULL; median of {sys.argv[6]} round(s)\n")
print("| path | insert tx/s | select tx/s | update tx/s | all tx/s | all vs local |")
print("|---|---:|---:|---:|---:|---:|")
for r in med.values():
    if "error" in r:
        print(f"| {r['label']} | - | - | - | - | {r['error']} |")
    else:
        ratio = f"{r['total_vs_local']:.2f}x" if "total_vs_local" in r else "-"
        print(f"| {r['label']} | {r['insert_tps']:.0f} | {r['select_tps']:.0f} | {r['update_tps']:.0f} | {r['total_tps']:.0f} | {ratio} |")
PY
echo "JSON: $JSON"
