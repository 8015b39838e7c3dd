#!/usr/bin/env bash
# Berkeley DB on dafs (libdafs_bdb), against a real dafsd:
#   - builds libdafs and dafsd, installs libdafs and libdafs_bdb into a temporary prefix
#     (scripts/install-capi.sh, adapters/bdb/install.sh) and compiles tests/bdb/test_bdb.c
#     twice against Debian's libdb5.3-dev: unmodified (libdafs_bdb preloaded, configured
#     by DAFS_BDB_SERVER/DAFS_BDB_PREFIX) and linked with -ldafs_bdb calling
#     dafs_bdb_setup();
#   - create/put/get/cursor scans/delete/rename over shm and tcp, db5.3_verify of the
#     server's copies in the export directory, placeholders empty;
#   - transactions with logging, kill -9 mid-transaction, DB_RECOVER: committed present,
#     uncommitted absent; a second process is refused while the first holds the env;
#   - cache pages placed directly into registered cache memory (the hooks' counters);
#   - a bad server and a missing file give clear errors and write nothing locally.
# Every program runs under `timeout -k 5` (Berkeley DB utilities catch SIGTERM and may not
# stop for it). Prints "bdb: N passed, N failed" last.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

source scripts/ensure-deps.sh
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need=()
[ -f /usr/include/db.h ] || need+=(libdb5.3-dev)
command -v db5.3_verify >/dev/null 2>&1 || need+=(db5.3-util)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v cc >/dev/null 2>&1 && command -v c++ >/dev/null 2>&1 || need+=(build-essential)
if [ ${#need[@]} -gt 0 ]; then
    echo "==> installing Debian packages: ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
export DAFS_PROFILE=${DAFS_PROFILE:-debug}
echo "==> cargo build ($DAFS_PROFILE) -p dafs-capi -p dafs-cli"
source scripts/lib-build.sh
cargo_build -p dafs-capi -p dafs-cli
REL=$CARGO_TARGET_DIR/$DAFS_PROFILE
BUILD=$CARGO_TARGET_DIR/bdb-tests
PREFIX=$BUILD/prefix
rm -rf "$PREFIX"
mkdir -p "$BUILD"
DAFS_NO_BUILD=1 scripts/install-capi.sh "$PREFIX" >/dev/null
adapters/bdb/install.sh "$PREFIX" >/dev/null
LIB=$PREFIX/lib/libdafs_bdb.so
CWARN="-std=c11 -Wall -Wextra -Werror -O2"
echo "==> compiling tests/bdb/test_bdb.c (plain, and with dafs_bdb_setup)"
cc $CWARN -I"$PREFIX/include" tests/bdb/test_bdb.c -o "$BUILD/test_bdb" -ldb-5.3 -ldl -pthread
cc $CWARN -DUSE_SETUP -I"$PREFIX/include" tests/bdb/test_bdb.c -o "$BUILD/test_bdb_setup" \
    -L"$PREFIX/lib" -ldafs_bdb -Wl,-rpath,"$PREFIX/lib" -ldb-5.3 -ldl -pthread
T=$BUILD/test_bdb TS=$BUILD/test_bdb_setup
# The header from C++, and the counters before any setup (-ENOTCONN).
printf '#include <dafs_bdb.h>\n#include <errno.h>\nint main() { dafs_bdb_stats_t s; return dafs_bdb_stats(&s) == -ENOTCONN ? 0 : 1; }\n' >"$BUILD/cxx_bdb.cc"
c++ -Wall -Wextra -Werror -I"$PREFIX/include" "$BUILD/cxx_bdb.cc" -o "$BUILD/cxx_bdb" \
    -L"$PREFIX/lib" -ldafs_bdb -Wl,-rpath,"$PREFIX/lib"

WORK=$(mktemp -d /tmp/dafs-test-bdb.XXXXXX)
pids=()
source scripts/lib-dafsd.sh
DAFSD=$REL/dafsd
cleanup() {
    [ -n "${CRASH_PID:-}" ] && kill -9 "$CRASH_PID" 2>/dev/null || true
    stop_pids
    rm -rf "$WORK"
}
trap cleanup EXIT
EXPORT=$WORK/export PFX=$WORK/pfx
mkdir -p "$EXPORT"/{env,tcp,setup,txn,cache,threads} "$PFX" "$WORK/local"
# Inline threshold below the 16 KiB pages of the cache test: those reads take the direct
# path, so the counters can show the server placing them into the registered cache.
start_dafsd main "$EXPORT" --shm-socket "$WORK/dafsd.sock" --inline-threshold 4096
ADDR_MAIN=$ADDR
[ -n "$SHM" ] || { echo "error: dafsd did not offer shared memory" >&2; exit 1; }
echo "==> dafsd on $ADDR_MAIN and $SHM (export $EXPORT)"

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; }
# run NAME OUTFILE CMD...: every "ok"/"FAIL" line of the program counts; a non-zero exit
# without a FAIL line counts as one failure.
run() {
    local name=$1 out=$2 rc; shift 2
    set +e; timeout -k 5 60 "$@" >"$out" 2>&1; rc=$?; set -e
    sed 's/^/    /' "$out"
    passed=$((passed + $(grep -c '^ok ' "$out" || true)))
    failed=$((failed + $(grep -c '^FAIL ' "$out" || true)))
    if [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' "$out"; then fail "$name (exit $rc)"; fi
    return 0
}
# The unmodified program with libdafs_bdb preloaded: "${PL[@]}" DAFS_BDB_SERVER=... PROG ARGS
PL=(env DAFS_BDB_PREFIX="$PFX" LD_PRELOAD="$LIB")
verify() { # verify FILE...: db5.3_verify on the server's copies
    local f
    for f in "$@"; do
        if out=$(db5.3_verify "$EXPORT/$f" 2>&1); then pass "db5.3_verify export/$f"; else echo "    $out"; fail "db5.3_verify export/$f"; fi
    done
}
placeholders_empty() { # the local names under the prefix hold no data
    local dir=$1 bad
    bad=$(find "$PFX/$dir" -type f -size +0 2>&1 | head -3)
    if [ -z "$bad" ] && [ -s "$EXPORT/$dir/data.db" ]; then pass "$dir: data on the server, local placeholders empty"
    else fail "$dir: data on the server, local placeholders empty ($bad)"; fi
}

if "$BUILD/cxx_bdb"; then pass "dafs_bdb.h from C++; dafs_bdb_stats before setup is -ENOTCONN"
else fail "dafs_bdb.h from C++; dafs_bdb_stats before setup is -ENOTCONN"; fi

echo "==> preloaded, unmodified program, shm (DAFS_BDB_SERVER=$SHM)"
run basic-shm "$WORK/basic.out" "${PL[@]}" DAFS_BDB_SERVER="$SHM" "$T" basic "$PFX/env"
verify env/data.db env/hash2.db
placeholders_empty env

echo "==> linked program calling dafs_bdb_setup, tcp"
run basic-tcp "$WORK/tcp.out" env DAFS_BDB_PROVIDER=tcp "$TS" "$ADDR_MAIN" "$PFX" basic "$PFX/tcp"
verify tcp/data.db
placeholders_empty tcp

echo "==> paths outside the prefix stay local (hooks installed)"
run basic-local "$WORK/local.out" "${PL[@]}" DAFS_BDB_SERVER="$SHM" "$T" basic "$WORK/local"
if [ -s "$WORK/local/data.db" ] && [ ! -e "$EXPORT/data.db" ]; then pass "local environment written locally"; else fail "local environment written locally"; fi

echo "==> threads sharing one environment (the library serializes its one client)"
run threads "$WORK/threads.out" "${PL[@]}" DAFS_BDB_SERVER="$SHM" "$T" threads "$PFX/threads"
verify threads/threads.db

echo "==> a database without an environment"
run noenv "$WORK/noenv.out" "${PL[@]}" DAFS_BDB_SERVER="$SHM" "$T" noenv "$PFX/env/noenv.db"
verify env/noenv.db

echo "==> prefix relative to the current directory; prefix / refused"
run rel-prefix "$WORK/rel.out" bash -c 'cd "$1" && exec "$2" "$3" relpfx noenv relpfx/rel.db' _ "$WORK" "$TS" "$SHM"
verify rel.db
set +e; out=$(timeout -k 5 30 "$TS" "$SHM" / noenv /x.db 2>&1); rc=$?; set -e
if [ "$rc" -eq 3 ] && echo "$out" | grep -q 'Invalid argument'; then pass "prefix / refused with -EINVAL"
else echo "$out" | sed 's/^/    /'; fail "prefix / refused with -EINVAL (exit $rc)"; fi

echo "==> transactions, kill -9 with a transaction open, DB_RECOVER"
"${PL[@]}" DAFS_BDB_SERVER="$SHM" "$T" crash "$PFX/txn" 50 >"$WORK/crash.out" 2>&1 &
CRASH_PID=$!
for _ in $(seq 300); do grep -q '^READY' "$WORK/crash.out" && break; kill -0 "$CRASH_PID" 2>/dev/null || break; sleep 0.1; done
if grep -q '^READY' "$WORK/crash.out"; then pass "crash: 50 transactions committed, one left open and flushed"
else sed 's/^/    /' "$WORK/crash.out"; fail "crash: program did not get ready"; fi
set +e; out=$(timeout -k 5 30 "${PL[@]}" DAFS_BDB_SERVER="$SHM" "$T" basic "$PFX/txn" 2>&1); rc=$?; set -e
if [ "$rc" -ne 0 ] && echo "$out" | grep -q 'open in another process'; then pass "second process refused while the environment is open (EBUSY)"
else echo "$out" | sed 's/^/    /'; fail "second process refused while the environment is open (exit $rc)"; fi
kill -9 "$CRASH_PID" 2>/dev/null || true; wait "$CRASH_PID" 2>/dev/null || true; CRASH_PID=
run recover "$WORK/recover.out" "${PL[@]}" DAFS_BDB_SERVER="$SHM" "$T" recover "$PFX/txn" 50
verify txn/txn.db
# Debian's own utilities, unmodified, preloaded like the application.
set +e; out=$(timeout -k 5 30 "${PL[@]}" DAFS_BDB_SERVER="$SHM" db5.3_recover -h "$PFX/txn" 2>&1); rc=$?; set -e
if [ "$rc" -eq 0 ]; then pass "db5.3_recover (Debian's binary) preloaded"; else echo "$out" | sed 's/^/    /'; fail "db5.3_recover preloaded (exit $rc)"; fi
set +e; out=$(timeout -k 5 30 "${PL[@]}" DAFS_BDB_SERVER="$SHM" db5.3_dump -p -h "$PFX/txn" txn.db 2>&1); rc=$?; set -e
if [ "$rc" -eq 0 ] && echo "$out" | grep -q '^ c000049' && ! echo "$out" | grep -q '^ u0000'; then
    pass "db5.3_dump (Debian's binary) preloaded: committed records, no uncommitted ones"
else echo "$out" | tail -5 | sed 's/^/    /'; fail "db5.3_dump preloaded (exit $rc)"; fi

echo "==> DB_REGISTER ends with a clear error instead of looping"
set +e; out=$(timeout -k 5 30 "${PL[@]}" DAFS_BDB_SERVER="$SHM" "$T" register "$PFX/txn" 2>&1); rc=$?; set -e
if [ "$rc" -eq 0 ] && echo "$out" | grep -q 'DB_REGISTER and hot backup are not supported'; then pass "DB_REGISTER refused with a message ($(echo "$out" | grep "^register:"))"
else echo "$out" | sed 's/^/    /'; fail "DB_REGISTER refused with a message (exit $rc)"; fi

echo "==> cache pages placed directly into registered memory"
run cache "$WORK/cache.out" env EXPECT_DIRECT=1 DAFS_BDB_SERVER="$SHM" DAFS_BDB_PREFIX="$PFX" LD_PRELOAD="$LIB" "$T" cache "$PFX/cache"

echo "==> errors: missing file, bad server"
set +e; out=$(timeout -k 5 30 "${PL[@]}" DAFS_BDB_SERVER="$SHM" "$T" open "$PFX/env" nosuch.db 2>&1); rc=$?; set -e
if [ "$rc" -eq 2 ] && echo "$out" | grep -q 'No such file or directory'; then pass "missing database: ENOENT"
else echo "$out" | sed 's/^/    /'; fail "missing database: ENOENT (exit $rc)"; fi
mkdir -p "$WORK/badpfx"
set +e; out=$(timeout -k 5 30 env DAFS_BDB_SERVER=127.0.0.1:1 DAFS_BDB_PREFIX="$WORK/badpfx" LD_PRELOAD="$LIB" "$T" basic "$WORK/badpfx/env" 2>&1); rc=$?; set -e
if [ "$rc" -ne 0 ] && echo "$out" | grep -q 'cannot connect to 127.0.0.1:1' && echo "$out" | grep -qi 'refused' \
    && [ -z "$(find "$WORK/badpfx" -type f 2>&1)" ]; then pass "preload with a bad server: clear error, nothing written locally"
else echo "$out" | sed 's/^/    /'; fail "preload with a bad server (exit $rc)"; fi
set +e; out=$(timeout -k 5 30 env DAFS_BDB_SERVER=127.0.0.1:1 DAFS_BDB_PREFIX="$WORK/badpfx" LD_PRELOAD="$LIB" "$T" noenv "$WORK/badpfx/x.db" 2>&1); rc=$?; set -e
if [ "$rc" -ne 0 ] && echo "$out" | grep -qi 'refused' && [ -z "$(find "$WORK/badpfx" -type f 2>&1)" ]; then
    pass "bad server, database without an environment: refused, nothing written locally"
else echo "$out" | sed 's/^/    /'; fail "bad server, database without an environment (exit $rc)"; fi
set +e; out=$(timeout -k 5 30 "$TS" 127.0.0.1:1 "$WORK/badpfx" basic "$WORK/badpfx/env" 2>&1); rc=$?; set -e
if [ "$rc" -eq 3 ] && echo "$out" | grep -qi 'refused'; then pass "dafs_bdb_setup with a bad server returns -ECONNREFUSED"
else echo "$out" | sed 's/^/    /'; fail "dafs_bdb_setup with a bad server (exit $rc)"; fi

if ! kill -0 "${pids[0]}" 2>/dev/null; then fail "dafsd died during the tests"; cat "$WORK/main.err" >&2; fi
echo "bdb: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
