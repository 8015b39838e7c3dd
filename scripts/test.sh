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
# Lints and the build. `cargo clippy` checks every crate without generating code, so run
# before `cargo build` it costs a second pass over all dependencies. On an empty target
# directory (CI's clean checkout) the build itself runs clippy instead: clippy-driver, as
# the workspace members' compiler, lints them exactly as `cargo clippy -- -D warnings`
# does and also generates their code; dependencies are compiled once, by rustc. In a
# target directory that holds an ordinary build already, the two steps stay separate
# (else every workspace crate would be compiled again, once with and once without the
# wrapper, whenever one alternates with plain cargo commands). DAFS_LINT_IN_BUILD=1 or 0
# forces one way.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
lint_in_build=${DAFS_LINT_IN_BUILD:-}
if [ -z "$lint_in_build" ]; then
    if [ -d "$CARGO_TARGET_DIR/debug/deps" ]; then lint_in_build=0; else lint_in_build=1; fi
fi
clippy_driver=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver || true)
if [ "$lint_in_build" = 1 ] && [ -n "$clippy_driver" ]; then
    # Kept for every later cargo command here and in the adapter scripts: without it
    # they would find the workspace crates stale and compile them again.
    export RUSTC_WORKSPACE_WRAPPER=$clippy_driver CLIPPY_ARGS=-Dwarnings
    echo "==> cargo build (tests), linted by clippy-driver (-D warnings)"
else
    echo "==> cargo clippy (-D warnings)"
    cargo clippy --workspace --all-targets -q -- -D warnings
    echo "==> cargo build (tests)"
fi
cargo build --workspace --all-targets -q
# The adapter scripts build this same selection (scripts/lib-build.sh): fresh.
export DAFS_CARGO_SELECTION="--workspace --all-targets"
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
