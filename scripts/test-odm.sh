#!/usr/bin/env bash
# ODM library tests (adapters/odm), against a real dafsd:
#   - builds libdafs and dafsd (DAFS_PROFILE, debug by default), installs libdafs and
#     libdafs_odm (+ odmblast, odmlat) into a temporary prefix with the project's scripts;
#   - starts dafsd on 127.0.0.1:0 (TCP + shared memory);
#   - runs tests/c/test_open_ext.c (the C API's open modes the library is built on);
#   - runs adapters/odm/tests/test_odm.c on dafs-tcp, dafs-shm and the local backend:
#     commit/abort visibility across processes, crash before commit, keys and file
#     types, resize, odm_io submit/wait semantics, per-thread completions under
#     concurrent threads; files are checked in the export directory;
#   - runs odmblast --verify (every byte read checked) and odmlat at tiny sizes on each;
#   - runs the threaded tests on the local backend under ThreadSanitizer.
# Prints "odm: N passed, N failed" last.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
source scripts/ensure-deps.sh
if ! command -v python3 >/dev/null 2>&1; then # checks the benchmarks' JSON
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3 >/dev/null
fi

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
export DAFS_PROFILE=${DAFS_PROFILE:-debug}
echo "==> cargo build ($DAFS_PROFILE) -p dafs-capi -p dafs-cli"
source scripts/lib-build.sh
cargo_build -p dafs-capi -p dafs-cli
BUILD=$CARGO_TARGET_DIR/odm-tests
PREFIX=$BUILD/prefix
rm -rf "$PREFIX"
mkdir -p "$BUILD"
DAFS_NO_BUILD=1 scripts/install-capi.sh "$PREFIX" >/dev/null
scripts/install-odm.sh "$PREFIX" >/dev/null
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
CWARN="-std=c11 -Wall -Wextra -Werror -O2"
# shellcheck disable=SC2046
cc $CWARN tests/c/test_open_ext.c -o "$BUILD/test_open_ext" $(pkg-config --cflags --libs dafs) \
    -Wl,-rpath,"$PREFIX/lib"
# shellcheck disable=SC2046
cc $CWARN -pthread -Itests/c adapters/odm/tests/test_odm.c -o "$BUILD/test_odm" $(pkg-config --cflags --libs dafs_odm)
echo '#include <dafs_odm.h>
int main() { return odm_strerror(0) ? 0 : 1; }' > "$BUILD/cxx_header.cc"
if command -v c++ >/dev/null 2>&1; then
    # shellcheck disable=SC2046
    c++ -Wall -Werror "$BUILD/cxx_header.cc" -o "$BUILD/cxx_header" $(pkg-config --cflags --libs dafs_odm)
fi

WORK=$(mktemp -d /tmp/dafs-test-odm.XXXXXX)
pids=()
source scripts/lib-dafsd.sh
DAFSD=$CARGO_TARGET_DIR/$DAFS_PROFILE/dafsd
cleanup() { stop_pids; rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p "$WORK/export" "$WORK/local"
start_dafsd main "$WORK/export" --shm-socket "$WORK/dafsd.sock"
[ -n "$SHM" ] || { echo "error: dafsd did not offer shared memory" >&2; exit 1; }
echo "==> dafsd on $ADDR and $SHM (export $WORK/export)"

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; }

# run_c NAME CMD...: a C test program printing "N passed, N failed"; each counts.
run_c() {
    local name=$1 out="$WORK/$1.out" rc line
    shift
    set +e
    timeout 120 "$@" >"$out" 2>&1
    rc=$?
    set -e
    cat "$out"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -1 || true)
    if [ -z "$line" ]; then fail "$name (exit status $rc, no summary: crashed or hung?)"; return; fi
    passed=$((passed + $(echo "$line" | awk '{print $1}')))
    failed=$((failed + $(echo "$line" | awk '{print $3}')))
    [ "$rc" -eq 0 ] || [ "$(echo "$line" | awk '{print $3}')" -gt 0 ] || fail "$name exit status $rc"
}

# Every function of dafs_odm.h is exercised by the tests (like the C API's header check).
uncalled=""
for fn in $(grep -oE '^ODM_API [^(]*\bodm_[a-z_]+\(' adapters/odm/include/dafs_odm.h | grep -oE 'odm_[a-z_]+'); do
    grep -q "$fn(" adapters/odm/tests/test_odm.c || uncalled="$uncalled $fn"
done
if [ -z "$uncalled" ]; then pass "test_odm.c calls every function of dafs_odm.h"
else fail "test_odm.c never calls:$uncalled"; fi

echo "==> tests/c/test_open_ext.c"
DAFS_TARGET=$ADDR DAFS_EXPORT_DIR=$WORK/export run_c open_ext "$BUILD/test_open_ext"

setups=(
    "dafs-tcp|dafs|tcp|$ADDR|$WORK/export|--backend dafs --provider tcp --target $ADDR"
    "dafs-shm|dafs|auto|$SHM|$WORK/export|--backend dafs --target $SHM"
    "local|local|auto|$WORK/local|$WORK/local|--backend local --target $WORK/local"
)
for s in "${setups[@]}"; do
    IFS='|' read -r label backend provider target expdir args <<<"$s"
    echo "==> test_odm on $label"
    ODM_BACKEND=$backend ODM_PROVIDER=$provider ODM_TARGET=$target ODM_EXPORT_DIR=$expdir \
        ODM_LABEL=$label run_c "test_odm-$label" "$BUILD/test_odm"
    echo "==> odmblast --verify on $label (tiny)"
    # shellcheck disable=SC2086
    if timeout 120 "$PREFIX/bin/odmblast" $args --label "$label" --file-bytes $((4 << 20)) \
        --bs 4096,65536,3145728 --verify --json "$WORK/blast.json" >"$WORK/blast.out" 2>&1 \
        && grep -q 'verified every read' "$WORK/blast.out" \
        && [ "$(grep -c "^| $label |" "$WORK/blast.out")" -eq 15 ] \
        && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d)==15 and all(r["mb_per_s"]>0 for r in d)' "$WORK/blast.json"; then
        pass "odmblast $label (5 tests x 3 block sizes, data verified)"
    else
        tail -20 "$WORK/blast.out" | sed 's/^/    | /'
        fail "odmblast $label"
    fi
    # No file is left behind: the benchmark's files are never committed.
    if [ -z "$(find "$expdir" -maxdepth 1 -name 'odmblast-*')" ]; then pass "odmblast $label leaves no files"
    else fail "odmblast $label leaves no files"; fi
    echo "==> odmlat on $label (tiny)"
    # shellcheck disable=SC2086
    if timeout 120 "$PREFIX/bin/odmlat" $args --label "$label" --iters 20 --json "$WORK/lat.json" \
        >"$WORK/lat.out" 2>&1 && grep -q '^| '"$label"' | Tdisk (us) |' "$WORK/lat.out" \
        && python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
pts = d["points"]
assert len(pts) == 8 and all(p["read_us"] > 0 and p["write_us"] > 0 for p in pts)
if d["backend"] == "dafs":
    # which path each size took, from the client counters: inline up to the threshold
    t = d["inline_threshold_bytes"]
    assert all((p["path"] == "inline") == (p["size_bytes"] <= t) for p in pts), pts
' "$WORK/lat.json"; then
        pass "odmlat $label (8 sizes, inline/direct split as the client counted it)"
    else
        tail -20 "$WORK/lat.out" | sed 's/^/    | /'
        fail "odmlat $label"
    fi
done

# The library's locking under ThreadSanitizer: the local backend completes requests on worker
# threads while their owners wait, the sharpest concurrency the library has (the DAFS backend's
# completions are reaped by the owner itself). Any report fails.
# shellcheck disable=SC2046
if cc -std=c11 -g -O1 -fsanitize=thread -fPIC -shared -pthread -Iadapters/odm/include \
        $(pkg-config --cflags dafs) adapters/odm/src/*.c -o "$BUILD/tsan-libdafs_odm.so" \
        $(pkg-config --libs dafs) -Wl,-rpath,"$PREFIX/lib" 2>"$WORK/tsan-build.err" \
    && cc -std=c11 -g -O1 -fsanitize=thread -pthread -Iadapters/odm/include -Itests/c adapters/odm/tests/test_odm.c \
        -o "$BUILD/tsan-test_odm" "$BUILD/tsan-libdafs_odm.so" -Wl,-rpath,"$BUILD" 2>>"$WORK/tsan-build.err"; then
    mkdir -p "$WORK/tsan"
    for t in per_thread_completions io_semantics; do
        if ODM_BACKEND=local ODM_TARGET=$WORK/tsan ODM_EXPORT_DIR=$WORK/tsan TSAN_OPTIONS=exitcode=66 \
            timeout 120 "$BUILD/tsan-test_odm" "$t" >"$WORK/tsan.out" 2>&1 \
            && ! grep -q 'ThreadSanitizer' "$WORK/tsan.out"; then
            pass "ThreadSanitizer: local $t"
        else
            grep -A12 'WARNING: ThreadSanitizer' "$WORK/tsan.out" | head -30 | sed 's/^/    | /'
            fail "ThreadSanitizer: local $t"
        fi
    done
else
    sed 's/^/    | /' "$WORK/tsan-build.err"
    fail "ThreadSanitizer build"
fi

if ! kill -0 "${pids[0]}" 2>/dev/null; then
    fail "dafsd died during the tests"
    cat "$WORK/main.err" >&2
fi
echo "odm: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
