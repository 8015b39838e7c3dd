#!/usr/bin/env bash
# The whole test suite: unit tests, property tests (decoder fuzzing), and integration
# tests that drive real dafsd processes over loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
export RUST_BACKTRACE=1
# Style gates first: they are cheap and a failure here needs no test run to explain.
echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> cargo clippy (-D warnings)"
cargo clippy --workspace --all-targets -q -- -D warnings
echo "==> cargo build (tests)"
cargo build --workspace --all-targets -q
echo "==> cargo test"
log=$(mktemp /tmp/dafs-test.XXXXXX.log)
set +e
cargo test --workspace 2>&1 | tee "$log" | grep -E '^(test result:|failures:|---- |thread .* panicked|error)' 
status=${PIPESTATUS[0]}
set -e
passed=$(grep -E '^test result:' "$log" | awk '{p+=$4} END {print p+0}')
failed=$(grep -E '^test result:' "$log" | awk '{f+=$6} END {print f+0}')
if [ "$status" -ne 0 ]; then
    echo "==> FAILED (cargo test exit $status); full log: $log"
    grep -A40 -E '^failures:' "$log" | head -200 || true
    exit "$status"
fi
# Adapter suites (C API + fio engine, Python package, preload library, FUSE mount, the
# POSIX conformance of the last two against ext4, the SQLite VFS, the ODM library, Berkeley
# DB, MPI-IO: Open MPI OMPIO components, MPICH through the preload library, and federation:
# several dafsd with etcd membership): each script
# installs what it needs, runs real programs against a real dafsd, and prints
# "N passed, N failed".
for extra in scripts/test-c.sh scripts/test-python.sh scripts/test-preload.sh scripts/test-fuse.sh \
    scripts/test-posix.sh scripts/test-sqlite.sh scripts/test-odm.sh scripts/test-bdb.sh \
    scripts/test-mpi.sh scripts/test-federation.sh; do
    if [ -x "$extra" ]; then
        echo "==> $extra"
        # On failure: every failing check with the lines around it first (a short tail can
        # miss a failure early in a long script), then the end of the output.
        out=$("$extra" 2>&1) || {
            echo "$out" | grep -n -B4 -A12 -E '^(FAIL|not ok)' | head -200 || true
            echo "----- last 40 lines of $extra"
            echo "$out" | tail -40
            echo "==> FAILED: $extra"
            exit 1
        }
        echo "$out" | tail -15
        line=$(echo "$out" | grep -E '[0-9]+ passed, [0-9]+ failed' | tail -1)
        ep=$(echo "$line" | sed -E 's/.*[^0-9]([0-9]+) passed.*/\1/; s/^([0-9]+) passed.*/\1/')
        ef=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
        passed=$((passed + ${ep:-0})); failed=$((failed + ${ef:-0}))
    fi
done
echo "dafs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
