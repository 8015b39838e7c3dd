#!/usr/bin/env bash
# C API and fio engine tests, against a real dafsd:
#   - builds libdafs (release) and dafsd, installs libdafs into a temporary prefix
#     (scripts/install-capi.sh) and compiles the C programs with pkg-config;
#   - fetches fio's Debian source package (same version as the installed fio) for the
#     engine headers, configures it once (cached), and builds adapters/fio/dafs_engine.c;
#   - starts dafsd on 127.0.0.1:0 (TCP + shared memory) and runs the C API tests (one
#     program: tests/c/test_capi.c with main() and the tests by area in tests/c/capi_*.c),
#     examples/c/dafs_copy.c (tcp, auto, shm) and the fio jobs of adapters/fio/jobs
#     (verify jobs over tcp and shm, on a three-node cluster URL, a corruption check, and
#     the benchmark files briefly).
# Prints "c: N passed, N failed" last (each C test, each example run, each fio job).
#
#   DAFS_FIO_SRC_CACHE   where fio's source is kept (default: $CARGO_TARGET_DIR/fio-src)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# ---------------------------------------------------------------- dependencies
source scripts/ensure-deps.sh
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need=()
command -v fio >/dev/null 2>&1 || need+=(fio)
command -v dpkg-source >/dev/null 2>&1 || need+=(dpkg-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v make >/dev/null 2>&1 || need+=(build-essential)
if [ ${#need[@]} -gt 0 ]; then
    echo "==> installing Debian packages: ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BUILD=$CARGO_TARGET_DIR/c-tests
mkdir -p "$BUILD"

# fio's engine headers: the source package of exactly the installed fio version.
FIO_PKG_VERSION=$(dpkg-query -W -f='${Version}' fio)
FIO_UPSTREAM=${FIO_PKG_VERSION%%-*}
FIO_UPSTREAM=${FIO_UPSTREAM#*:}
SRC_CACHE=${DAFS_FIO_SRC_CACHE:-$CARGO_TARGET_DIR/fio-src}
FIO_SRC=$SRC_CACHE/$FIO_PKG_VERSION/fio-$FIO_UPSTREAM
if [ ! -f "$FIO_SRC/config-host.h" ]; then
    echo "==> fetching fio $FIO_PKG_VERSION source package (engine headers)"
    if ! apt-cache showsrc fio 2>/dev/null | grep -q "^Version: $FIO_PKG_VERSION\$"; then
        # Enable deb-src next to the configured deb entries, then refresh the index.
        src=/etc/apt/sources.list.d/dafs-deb-src.sources
        if [ ! -f "$src" ]; then
            tmp=$(mktemp)
            # Debian's own archives only (third-party repositories rarely carry sources).
            for f in /etc/apt/sources.list.d/*.sources; do
                [ -f "$f" ] && [ "$f" != "$src" ] || continue
                awk 'BEGIN { RS = ""; ORS = "\n\n" } /debian\.org/ && /Types: deb/ {
                        sub(/Types: deb[^\n]*/, "Types: deb-src"); print }' "$f" >> "$tmp"
            done
            if grep -q '^Types: deb-src' "$tmp"; then
                $SUDO install -m 0644 "$tmp" "$src"
            fi
            rm -f "$tmp"
            if [ -f /etc/apt/sources.list ] && grep -qE '^deb .*debian\.org' /etc/apt/sources.list; then
                grep -E '^deb .*debian\.org' /etc/apt/sources.list | sed 's/^deb /deb-src /' \
                    | $SUDO tee /etc/apt/sources.list.d/dafs-deb-src.list >/dev/null
            fi
        fi
        $SUDO apt-get update -qq
    fi
    rm -rf "$SRC_CACHE/$FIO_PKG_VERSION"
    mkdir -p "$SRC_CACHE/$FIO_PKG_VERSION"
    if ! (cd "$SRC_CACHE/$FIO_PKG_VERSION" && apt-get source -qq "fio=$FIO_PKG_VERSION" >fetch.log 2>&1); then
        echo "error: could not fetch Debian's source package fio=$FIO_PKG_VERSION (needed for fio's engine" >&2
        echo "       headers): is a deb-src entry reachable? apt-get source said:" >&2
        tail -5 "$SRC_CACHE/$FIO_PKG_VERSION/fetch.log" >&2
        exit 1
    fi
    [ -d "$FIO_SRC" ] || { echo "error: $FIO_SRC missing after apt-get source" >&2; exit 1; }
    echo "==> configuring fio source (config-host.h)"
    (cd "$FIO_SRC" && ./configure --disable-native >configure.log 2>&1) || {
        echo "error: fio's ./configure failed; see $FIO_SRC/configure.log" >&2; exit 1; }
fi

# ---------------------------------------------------------------- build
# The dev profile by default: scripts/test.sh has just built it for the Rust tests, so this
# costs no second build (DAFS_PROFILE=release to test the release build).
export DAFS_PROFILE=${DAFS_PROFILE:-debug}
echo "==> cargo build ($DAFS_PROFILE) -p dafs-capi -p dafs-cli"
source scripts/lib-build.sh
cargo_build -p dafs-capi -p dafs-cli
REL=$CARGO_TARGET_DIR/$DAFS_PROFILE
PREFIX=$BUILD/prefix
rm -rf "$PREFIX"
DAFS_NO_BUILD=1 scripts/install-capi.sh "$PREFIX" >/dev/null
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
CWARN="-std=c11 -Wall -Wextra -Werror -O2"
echo "==> compiling C tests and example against the installed library (pkg-config dafs $(pkg-config --modversion dafs))"
# test_capi: shared library; dafs_copy: static library.
cc $CWARN tests/c/test_capi.c tests/c/capi_*.c -o "$BUILD/test_capi" $(pkg-config --cflags --libs dafs) \
    -Wl,-rpath,"$(pkg-config --variable=libdir dafs)" -pthread
cc $CWARN examples/c/dafs_copy.c -o "$BUILD/dafs_copy" $(pkg-config --cflags dafs) \
    "$(pkg-config --variable=libdir dafs)/libdafs.a" $(pkg-config --static --libs-only-l dafs | sed 's/-ldafs//')
# C++ compatibility of the header
if command -v c++ >/dev/null 2>&1; then
    echo '#include <dafs.h>
int main() { return dafs_version() ? 0 : 1; }' > "$BUILD/cxx_header.cc"
    c++ -Wall -Werror "$BUILD/cxx_header.cc" -o "$BUILD/cxx_header" $(pkg-config --cflags --libs dafs) \
        -Wl,-rpath,"$(pkg-config --variable=libdir dafs)"
fi
echo "==> building the fio engine against $FIO_SRC"
cc -shared -fPIC -O2 -Wall -Werror -Wno-unused-parameter \
    -D_GNU_SOURCE -D_LARGEFILE_SOURCE -D_FILE_OFFSET_BITS=64 -DFIO_INC_DEBUG -DBITS_PER_LONG=64 \
    -I "$FIO_SRC" -include "$FIO_SRC/config-host.h" $(pkg-config --cflags dafs) \
    adapters/fio/dafs_engine.c "$(pkg-config --variable=libdir dafs)/libdafs.a" \
    -Wl,--exclude-libs,ALL -lpthread -ldl -lm -o "$BUILD/libdafs_fio.so"

# ---------------------------------------------------------------- servers
WORK=$(mktemp -d /tmp/dafs-test-c.XXXXXX)
pids=()
source scripts/lib-dafsd.sh
DAFSD=$REL/dafsd
cleanup() {
    stop_pids
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/export" "$WORK/victim" "$WORK/local"

start_dafsd main "$WORK/export" --shm-socket "$WORK/dafsd.sock" --admin-socket "$WORK/admin.sock"
MAIN_ADDR=$ADDR MAIN_SHM=$SHM
[ -n "$MAIN_SHM" ] || { echo "error: dafsd did not offer shared memory" >&2; exit 1; }
start_dafsd victim "$WORK/victim" --no-shm
VICTIM_ADDR=$ADDR VICTIM_PID=$PID
echo "==> dafsd on $MAIN_ADDR and $MAIN_SHM (export $WORK/export)"

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; }

# ---------------------------------------------------------------- C tests
echo "==> tests/c/test_capi.c tests/c/capi_*.c"
set +e
DAFS_TARGET=$MAIN_ADDR DAFS_SHM_TARGET=$MAIN_SHM DAFS_VICTIM_TARGET=$VICTIM_ADDR DAFS_VICTIM_PID=$VICTIM_PID DAFS_ADMIN_SOCKET="$WORK/admin.sock" \
    timeout 120 "$BUILD/test_capi" >"$WORK/test_capi.out" 2>&1
rc=$?
set -e
cat "$WORK/test_capi.out"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$WORK/test_capi.out" | tail -1 || true)
if [ -n "$line" ]; then
    passed=$((passed + $(echo "$line" | awk '{print $1}')))
    failed=$((failed + $(echo "$line" | awk '{print $3}')))
    [ "$rc" -eq 0 ] || [ "$(echo "$line" | awk '{print $3}')" -gt 0 ] || fail "test_capi exit status $rc"
else
    fail "test_capi (exit status $rc, no summary: crashed?)"
fi

# ---------------------------------------------------------------- C example
echo "==> examples/c/dafs_copy.c"
head -c $((24 * 1024 * 1024 + 4321)) /dev/urandom > "$WORK/local/in.bin"
for mode in "-t $MAIN_ADDR" "$MAIN_ADDR" "$MAIN_SHM"; do
    name="dafs_copy ${mode}"
    # shellcheck disable=SC2086
    if out=$("$BUILD/dafs_copy" $mode "$WORK/local/in.bin" "copy-$passed.bin" "$WORK/local/out.bin" 2>&1) \
        && cmp -s "$WORK/local/in.bin" "$WORK/local/out.bin" \
        && cmp -s "$WORK/local/in.bin" "$WORK/export/copy-$passed.bin"; then
        echo "    $out"
        pass "$name"
    else
        echo "    $out"
        fail "$name"
    fi
    rm -f "$WORK/local/out.bin"
done

# ---------------------------------------------------------------- fio
export DAFS_FIO_ENGINE=$BUILD/libdafs_fio.so
# run_fio LABEL JOBFILE [fio args...]: every job of the file counts once (err= 0 or not).
run_fio() {
    local label=$1 jobfile=$2; shift 2
    local out="$WORK/fio-$label.out" rc expected got ok bad
    set +e
    (cd "$WORK" && timeout 150 fio "$@" "$ROOT/$jobfile") >"$out" 2>&1
    rc=$?
    set -e
    if [ $# -gt 0 ] && [[ "$*" == *--section=* ]]; then expected=1
    else expected=$(grep -cE '^\[' "$jobfile"); expected=$((expected - $(grep -cE '^\[global\]' "$jobfile"))); fi
    while IFS= read -r l; do
        job=${l%%:*}
        if [[ "$l" == *"err= 0:"* ]]; then pass "fio $label: $job"; else fail "fio $label: $job"; fi
    done < <(grep -E '^[^ ].*: \(groupid=[0-9]+, jobs=[0-9]+\): err=' "$out")
    got=$(grep -cE ': \(groupid=[0-9]+, jobs=[0-9]+\): err=' "$out" || true)
    if [ "$got" -lt "$expected" ]; then
        for _ in $(seq $((expected - got))); do fail "fio $label: a job did not report (exit $rc)"; done
    fi
    if grep -qE 'verify failed|bad magic|crc32c: verify' "$out"; then fail "fio $label: verify error"; fi
    if [ "$rc" -ne 0 ] || [ "$got" -lt "$expected" ] || grep -qE 'err=[1-9]' "$out"; then
        tail -25 "$out" | sed 's/^/    | /'
        [ "$rc" -eq 0 ] || fail "fio $label: exit status $rc"
    fi
    grep -E '^  (read|write): IOPS' "$out" | sed 's/^/    /' || true
}

echo "==> fio $(fio --version) verify jobs over tcp"
DAFS_TARGET=$MAIN_ADDR DAFS_PROVIDER=tcp DAFS_FIO_PREFIX=tcp run_fio verify-tcp adapters/fio/jobs/dafs-verify.fio
echo "==> fio verify jobs over shm"
DAFS_TARGET=$MAIN_SHM DAFS_PROVIDER=auto DAFS_FIO_PREFIX=shm run_fio verify-shm adapters/fio/jobs/dafs-verify.fio
echo "==> fio verify jobs, host:port with provider auto (switches to shm)"
DAFS_TARGET=$MAIN_ADDR DAFS_PROVIDER=auto DAFS_FIO_PREFIX=auto \
    run_fio verify-auto adapters/fio/jobs/dafs-verify.fio --section=write-verify-async-direct

echo "==> fio verify jobs on a cluster URL (three nodes; files spread by the path hash)"
CL_ADDRS=()
for i in 0 1 2; do
    CL_ADDRS+=("127.0.0.1:$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')")
done
printf '[cluster]\nmembers = ["%s", "%s", "%s"]\n' "${CL_ADDRS[@]}" >"$WORK/cluster.toml"
for i in 0 1 2; do
    mkdir -p "$WORK/node$i"
    "$DAFSD" "$WORK/node$i" --listen "${CL_ADDRS[$i]}" --cluster "$WORK/cluster.toml" --no-shm \
        >"$WORK/node$i.out" 2>"$WORK/node$i.err" &
    pids+=("$!")
    disown "$!"
    for _ in $(seq 100); do grep -q '^dafsd listening on' "$WORK/node$i.out" 2>/dev/null && break; sleep 0.1; done
done
CL_URL="dafs://$(IFS=,; echo "${CL_ADDRS[*]}")/"
DAFS_TARGET=$CL_URL run_fio verify-cluster adapters/fio/jobs/dafs-cluster.fio
# Every file on exactly one node, and the files of each job on more than one node.
for job in direct inline; do
    nodes=0 files=0
    for i in 0 1 2; do
        n=$(find "$WORK/node$i" -name "cl-$job.*" | wc -l)
        files=$((files + n))
        [ "$n" -gt 0 ] && nodes=$((nodes + 1))
    done
    if [ "$files" -eq 6 ] && [ "$nodes" -ge 2 ]; then
        pass "fio cluster: cl-$job files spread ($files files on $nodes nodes)"
    else
        fail "fio cluster: cl-$job files spread ($files files on $nodes nodes)"
    fi
done

echo "==> verify catches corruption (a read-verify job must fail on a damaged file)"
if [ -f "$WORK/export/tcp-seq.dat" ]; then
    printf 'corrupt!' | dd of="$WORK/export/tcp-seq.dat" bs=1 seek=3000000 conv=notrunc 2>/dev/null
    set +e
    DAFS_TARGET=$MAIN_ADDR DAFS_PROVIDER=tcp DAFS_FIO_PREFIX=tcp \
        bash -c 'cd "$1" && timeout 60 fio --section=read-verify-sync "$2"' _ "$WORK" "$ROOT/adapters/fio/jobs/dafs-verify.fio" \
        >"$WORK/fio-corrupt.out" 2>&1
    rc=$?
    set -e
    if [ "$rc" -ne 0 ] && grep -q 'verify failed' "$WORK/fio-corrupt.out"; then
        grep -m1 'verify failed' "$WORK/fio-corrupt.out" | sed 's/^/    /'
        pass "fio verify detects corruption"
    else
        tail -20 "$WORK/fio-corrupt.out" | sed 's/^/    | /'
        fail "fio verify detects corruption (exit $rc)"
    fi
else
    fail "fio verify detects corruption (tcp-seq.dat was not written)"
fi

echo "==> benchmark job files (1 s per job): local, dafs over tcp, dafs over shm"
FIO_RUNTIME=1 FIO_LOCAL_DIR=$WORK/local run_fio bench-local adapters/fio/jobs/local.fio
FIO_RUNTIME=1 DAFS_TARGET=$MAIN_ADDR run_fio bench-tcp adapters/fio/jobs/dafs-tcp.fio
FIO_RUNTIME=1 DAFS_SHM_TARGET=$MAIN_SHM run_fio bench-shm adapters/fio/jobs/dafs-shm.fio

if ! kill -0 "${pids[0]}" 2>/dev/null; then
    fail "dafsd died during the tests"
    cat "$WORK/main.err" >&2
fi
echo "c: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
