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
# Lints and the build. On an empty target directory (CI's clean checkout: everything is
# compiled from scratch) the build is one pass:
#   - clippy runs inside it: clippy-driver, as the workspace members' compiler, lints them
#     exactly as `cargo clippy -- -D warnings` does and generates their code too, where a
#     separate `cargo clippy` first would check every dependency and member a second time;
#   - debug information is line tables only (CARGO_PROFILE_DEV_DEBUG): backtraces keep
#     their files and lines, and the ~60 test binaries are not each linked with the full
#     debug information of every dependency.
# Both stay exported for every later cargo command here and in the adapter scripts (else
# cargo would find the workspace stale and compile it again). In a target directory that
# already holds a build, the usual two steps run instead with the usual profile (switching
# would recompile every workspace crate whenever one alternates with plain cargo commands).
# DAFS_ONE_PASS_BUILD=1 or 0 forces one way.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
one_pass=${DAFS_ONE_PASS_BUILD:-}
if [ -z "$one_pass" ]; then
    if [ -d "$CARGO_TARGET_DIR/debug/deps" ]; then one_pass=0; else one_pass=1; fi
fi
clippy_driver=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver || true)
if [ "$one_pass" = 1 ] && [ -n "$clippy_driver" ]; then
    export RUSTC_WORKSPACE_WRAPPER=$clippy_driver CLIPPY_ARGS=-Dwarnings
    export CARGO_PROFILE_DEV_DEBUG=line-tables-only
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
