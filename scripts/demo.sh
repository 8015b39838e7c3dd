#!/usr/bin/env bash
# The main job on an embedded default: build dafs, start dafsd on a temporary export on
# 127.0.0.1, copy data in and out with the CLI, verify it byte for byte, print what
# happened, stop the server.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh

echo "==> building (release)"
cargo build --release -q -p dafs-cli
BIN=target/release
work=$(mktemp -d /tmp/dafs-demo.XXXXXX)
export_dir="$work/export"; mkdir -p "$export_dir"
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

"$BIN/dafsd" "$export_dir" --listen 127.0.0.1:0 > "$work/dafsd.out" 2> "$work/dafsd.err" &
pid=$!
for _ in $(seq 100); do grep -q listening "$work/dafsd.out" 2>/dev/null && break; sleep 0.05; done
addr=$(awk '/listening on/ {print $4}' "$work/dafsd.out")
[ -n "$addr" ] || { echo "dafsd did not start:"; cat "$work/dafsd.err"; exit 1; }
U="dafs://$addr"
echo "==> dafsd (pid $pid) exports $export_dir on $addr"
"$BIN/dafs" ping "$U/"

echo "==> making 256 MiB of test data"
head -c $((256 * 1024 * 1024)) /dev/urandom > "$work/data.bin"

now() { date +%s.%N; }
rate() { awk -v b="$1" -v t0="$2" -v t1="$3" 'BEGIN { printf "%.0f MB/s (%.2f s)", b / (t1 - t0) / 1e6, t1 - t0 }'; }

"$BIN/dafs" mkdir "$U/demo"
t0=$(now); "$BIN/dafs" put -q "$work/data.bin" "$U/demo/data.bin"; t1=$(now)
echo "put  256 MiB -> $U/demo/data.bin: $(rate $((256*1024*1024)) "$t0" "$t1")"
t0=$(now); "$BIN/dafs" get -q "$U/demo/data.bin" "$work/back.bin"; t1=$(now)
echo "get  256 MiB <- $U/demo/data.bin: $(rate $((256*1024*1024)) "$t0" "$t1")"
cmp "$work/data.bin" "$work/back.bin" && echo "verify: the copy back is byte-for-byte identical"
cmp "$work/data.bin" "$export_dir/demo/data.bin" && echo "verify: the file in the export is byte-for-byte identical"

echo "hello from dafs" | "$BIN/dafs" put - "$U/demo/hello.txt"
echo "cat: $("$BIN/dafs" cat "$U/demo/hello.txt")"
"$BIN/dafs" mv "$U/demo/hello.txt" "$U/demo/greeting.txt"
echo "==> dafs ls -l $U/demo"
"$BIN/dafs" ls -l "$U/demo"
echo "==> an escape attempt is refused:"
"$BIN/dafs" stat "$U/../../etc/passwd" || echo "(exit code $?, as expected)"
"$BIN/dafs" rm "$U/demo/greeting.txt" "$U/demo/data.bin"
"$BIN/dafs" rmdir "$U/demo"
echo "==> done; the export is empty again: [$(ls -A "$export_dir")]"
