#!/usr/bin/env bash
# SQLite VFS tests (adapters/sqlite, libdafs_sqlite.so) against a real dafsd:
#   - builds libdafs and dafsd, installs libdafs into a temporary prefix and builds the
#     extension into it (adapters/sqlite/install.sh), and the C test client
#     tests/sqlite/sqlite_client.c (loads the extension with sqlite3_load_extension);
#   - starts dafsd on 127.0.0.1:0 (TCP + shared memory) with a 1 s session lease, so
#     that the locks of a killed client are released quickly;
#   - in the sqlite3 shell: .load, create/insert/select/update, the TRUNCATE and PERSIST
#     journals, the result read back with the stock sqlite3 from the export directory;
#     lock states across two processes (RESERVED excludes a second writer, not a
#     reader); the WAL decision (refused with a message unless locking_mode=EXCLUSIVE);
#     clear errors for a missing server; DAFS_MOUNT prefixes;
#   - two processes on two sessions (one over TCP, one over shared memory) doing
#     read-modify-write transactions on one counter: no lost update, SQLITE_BUSY handled;
#     the same with two threads of one process, and two connections of one process
#     excluding each other;
#   - kill -9 of a writer mid-transaction (its pages already in the database file): the
#     next opener rolls the hot journal back, PRAGMA integrity_check is ok, also with
#     the stock sqlite3 on the export directory.
# Prints "sqlite: N passed, N failed" last.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

source scripts/ensure-deps.sh
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need=()
command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3)
[ -f /usr/include/sqlite3ext.h ] || need+=(libsqlite3-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v cc >/dev/null 2>&1 || need+=(build-essential)
if [ ${#need[@]} -gt 0 ]; then
    echo "==> installing Debian packages: ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
# The dev profile by default, as scripts/test-c.sh (no second build in scripts/test.sh).
export DAFS_PROFILE=${DAFS_PROFILE:-debug}
echo "==> cargo build ($DAFS_PROFILE) -p dafs-capi -p dafs-cli"
source scripts/lib-build.sh
cargo_build -p dafs-capi -p dafs-cli
REL=$CARGO_TARGET_DIR/$DAFS_PROFILE
BUILD=$CARGO_TARGET_DIR/sqlite-tests
PREFIX=$BUILD/prefix
rm -rf "$PREFIX"
mkdir -p "$BUILD"
DAFS_NO_BUILD=1 scripts/install-capi.sh "$PREFIX" >/dev/null
adapters/sqlite/install.sh "$PREFIX"
EXT=$PREFIX/lib/libdafs_sqlite.so
cc -std=gnu11 -Wall -Wextra -Werror -O2 tests/sqlite/sqlite_client.c -lsqlite3 -pthread -o "$BUILD/sqlite_client"
CLIENT=$BUILD/sqlite_client

WORK=$(mktemp -d /tmp/dafs-test-sqlite.XXXXXX)
pids=()
source scripts/lib-dafsd.sh
DAFSD=$REL/dafsd
cleanup() {
    stop_pids
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/export/sub" "$WORK/local"
start_dafsd main "$WORK/export" --shm-socket "$WORK/dafsd.sock" --lease-secs 1
A=$ADDR
EXP=$WORK/export
echo "==> dafsd on $A and $SHM (export $EXP)"

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; }
# expect NAME EXPECTED ACTUAL
expect() {
    if [ "$2" = "$3" ]; then pass "$1"; else
        fail "$1"; echo "     expected: $(echo "$2" | head -c 400)"; echo "     got:      $(echo "$3" | head -c 400)"
    fi
}
# shell URI SQL...: run the stock sqlite3 shell with the extension loaded.
shell() {
    local uri=$1; shift
    # the exit status is not looked at: the tests compare the output (errors included)
    printf '.load %s\n.open %s\n%s\n' "$EXT" "$uri" "$*" | timeout 60 sqlite3 -batch 2>&1 || true
}
uri() { echo "file:/$1?vfs=dafs&server=$A${2:-}"; }

# ---------------------------------------------------------------- sqlite3 shell
out=$(shell "$(uri shell.db)" "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);
INSERT INTO t(b) VALUES ('one'), ('two'), ('three');
UPDATE t SET b = upper(b) WHERE a = 2;
DELETE FROM t WHERE a = 3;
SELECT a, b FROM t ORDER BY a;
PRAGMA integrity_check;")
expect "shell: create/insert/update/delete/select" "1|one
2|TWO
ok" "$out"
expect "stock sqlite3 reads the export's copy" "1|one
2|TWO" "$(sqlite3 "$EXP/shell.db" 'SELECT a, b FROM t ORDER BY a' 2>&1)"
out=$(shell "$(uri shell.db)" "SELECT count(*) FROM t; PRAGMA journal_mode;")
expect "shell: reopen sees the rows, rollback journal (delete)" "2
delete" "$out"
for jm in truncate persist; do
    out=$(shell "$(uri "jm-$jm.db")" "PRAGMA journal_mode=$jm;
CREATE TABLE t(x); BEGIN; INSERT INTO t VALUES (1), (2); COMMIT;
BEGIN; INSERT INTO t VALUES (3); ROLLBACK;
SELECT sum(x) FROM t; PRAGMA integrity_check;")
    expect "journal_mode=$jm: commit and rollback" "$jm
3
ok" "$out"
    [ -f "$EXP/jm-$jm.db-journal" ] && pass "journal_mode=$jm: journal kept on the server" \
        || fail "journal_mode=$jm: journal kept on the server"
done
[ ! -e "$EXP/shell.db-journal" ] && pass "journal_mode=delete: journal deleted on the server" \
    || fail "journal_mode=delete: journal deleted on the server"

# ---------------------------------------------------------------- locks across processes
shell "$(uri locks.db)" "CREATE TABLE t(x); INSERT INTO t VALUES (1);" >/dev/null
# Process 1 holds RESERVED (BEGIN IMMEDIATE + a write) for 3 s; meanwhile process 2 may
# read but not start a second write transaction.
shell "$(uri locks.db)" "BEGIN IMMEDIATE; INSERT INTO t VALUES (2);
.shell touch $WORK/holding; sleep 3
COMMIT;" >"$WORK/holder.out" &
HOLDER=$!
for _ in $(seq 100); do [ -f "$WORK/holding" ] && break; sleep 0.05; done
out=$(shell "$(uri locks.db)" "SELECT count(*) FROM t;")
expect "a reader reads while another process holds RESERVED" "1" "$out"
out=$(shell "$(uri locks.db)" ".timeout 0
BEGIN IMMEDIATE;")
expect "a second writer gets SQLITE_BUSY" "Runtime error near line 4: database is locked (5)" "$out"
out=$(shell "$(uri locks.db)" "PRAGMA busy_timeout=10000; BEGIN IMMEDIATE; SELECT count(*) FROM t; COMMIT;")
expect "with a busy timeout it waits for the commit" "10000
2" "$out"
wait "$HOLDER" || true
expect "the holder committed" "" "$(cat "$WORK/holder.out")"

# ---------------------------------------------------------------- contention (C program)
echo "==> two processes, two sessions (tcp and shm), 150 read-modify-write transactions each"
U="file:/counter.db?vfs=dafs&server=$A"
"$CLIENT" "$EXT" "$U" init
set +e
"$CLIENT" "$EXT" "$U&provider=tcp" counter tcp 150 >"$WORK/c1.out" 2>&1 &
P1=$!
"$CLIENT" "$EXT" "$U" counter shm 150 >"$WORK/c2.out" 2>&1
r2=$?
wait "$P1"
r1=$?
set -e
cat "$WORK/c1.out" "$WORK/c2.out" | sed 's/^/     /'
[ "$r1" -eq 0 ] && [ "$r2" -eq 0 ] && pass "contention: both writers finished" || fail "contention: both writers finished ($r1, $r2)"
expect "contention: no lost update" "ok n=300 log=300 big=0 v=0" "$("$CLIENT" "$EXT" "$U" check 2>&1)"
expect "contention: stock sqlite3 on the export" "ok|300|300" \
    "$(sqlite3 "$EXP/counter.db" 'PRAGMA integrity_check; SELECT n FROM c; SELECT count(DISTINCT n) FROM log' 2>&1 | paste -sd'|')"

# ---------------------------------------------------------------- one process, two connections
U="file:/inproc.db?vfs=dafs&server=$A"
"$CLIENT" "$EXT" "$U" init
expect "two connections of one process exclude each other (two sessions)" \
    "twoconn: second writer got 5 (SQLITE_BUSY is 5), ok" "$("$CLIENT" "$EXT" "$U" twoconn 2>&1)"
out=$("$CLIENT" "$EXT" "$U" threads 100 2>&1) && pass "two threads, two connections: finished" \
    || { fail "two threads, two connections: finished"; echo "     $out"; }
expect "two threads, two connections: no lost update" "ok n=202 log=200 big=0 v=0" "$("$CLIENT" "$EXT" "$U" check 2>&1)"

# ---------------------------------------------------------------- kill -9 mid-transaction
echo "==> kill -9 of a writer mid-transaction"
U="file:/crash.db?vfs=dafs&server=$A"
"$CLIENT" "$EXT" "$U" init
"$CLIENT" "$EXT" "$U" counter setup 5 >/dev/null
"$CLIENT" "$EXT" "$U" fill 3000
before=$(md5sum <"$EXP/crash.db")
# The writer rewrites every row of big with a 10-page cache: changed pages reach the
# database file before COMMIT, so without the journal's rollback the file is torn.
"$CLIENT" "$EXT" "$U" hang >"$WORK/hang.out" 2>&1 &
HANG=$!
for _ in $(seq 300); do grep -q in-transaction "$WORK/hang.out" && break; sleep 0.05; done
if grep -q in-transaction "$WORK/hang.out" && [ -s "$EXP/crash.db-journal" ] && [ "$(md5sum <"$EXP/crash.db")" != "$before" ]; then
    pass "writer mid-transaction: database file already changed, journal on the server"
else
    fail "writer mid-transaction: database file already changed, journal on the server"; cat "$WORK/hang.out"
fi
kill -9 "$HANG"
wait "$HANG" 2>/dev/null || true
# The killed client's session (and its locks) lives until the lease (1 s) runs out; the
# busy timeout of the next opener covers that. Recovery goes through the dafs VFS
# (a local sqlite3 on the export would not see the server's locks).
expect "after kill -9: hot journal rolled back, integrity_check ok" "ok n=5 log=5 big=3000 v=3000" \
    "$("$CLIENT" "$EXT" "$U" check 2>&1)"
[ ! -s "$EXP/crash.db-journal" ] && pass "after kill -9: the hot journal is gone" || fail "after kill -9: the hot journal is gone"
expect "after kill -9: stock sqlite3 on the export" "ok|5|3000" \
    "$(sqlite3 "$EXP/crash.db" 'PRAGMA integrity_check; SELECT n FROM c; SELECT sum(v) FROM big' 2>&1 | paste -sd'|')"

# ---------------------------------------------------------------- WAL
out=$(shell "$(uri wal.db)" "CREATE TABLE t(x); PRAGMA journal_mode=WAL;")
expect "WAL refused without locking_mode=EXCLUSIVE" \
    "Parse error near line 3: dafs VFS: journal_mode=WAL needs PRAGMA locking_mode=EXCLUSIVE first (the WAL index cannot be shared memory between dafs clients); rollback journals work in any mode" \
    "$out"
out=$(shell "$(uri wal.db)" "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL;
INSERT INTO t VALUES (1), (2); SELECT sum(x) FROM t;
.shell test -s $EXP/wal.db-wal && echo wal-file-on-server")
expect "WAL with locking_mode=EXCLUSIVE" "exclusive
wal
3
wal-file-on-server" "$out"
out=$(shell "$(uri wal.db)" "PRAGMA locking_mode=EXCLUSIVE; SELECT sum(x) FROM t; PRAGMA integrity_check;")
expect "WAL database reopened (exclusive)" "exclusive
3
ok" "$out"
out=$(shell "$(uri wal.db)" "SELECT sum(x) FROM t;")
expect "WAL database without exclusive mode: SQLITE_CANTOPEN" \
    "Parse error near line 3: unable to open database file (14)" "$out"

# ---------------------------------------------------------------- configuration
out=$(printf '.load %s\n.open file:/x.db?vfs=dafs\nCREATE TABLE t(x);\n' "$EXT" | env -u DAFS_MOUNT sqlite3 -batch 2>&1 || true)
case "$out" in *"no dafs server"*"unable to open database file"*) pass "no server configured: clear error";;
    *) fail "no server configured: clear error"; echo "     got: $out";; esac
out=$(shell "file:/x.db?vfs=dafs&server=127.0.0.1:1" "CREATE TABLE t(x);" || true)
case "$out" in *"cannot connect to 127.0.0.1:1"*"unable to open database file"*) pass "server down: clear error";;
    *) fail "server down: clear error"; echo "     got: $out";; esac
out=$(printf '.load %s\n.open file:%s?vfs=dafs\nCREATE TABLE t(x); INSERT INTO t VALUES (7);\n.open file:%s?vfs=dafs\nCREATE TABLE u(y);\n' \
    "$EXT" "/mnt-dafs/m.db" "$WORK/local/l.db" | DAFS_MOUNT="/mnt-dafs=dafs://$A/sub" sqlite3 -batch 2>&1)
[ -z "$out" ] && [ "$(sqlite3 "$EXP/sub/m.db" 'SELECT x FROM t')" = 7 ] && [ -f "$WORK/local/l.db" ] \
    && pass "DAFS_MOUNT: prefix on the server, other paths local" || { fail "DAFS_MOUNT"; echo "     $out"; }
out=$(printf '.load %s\n.open /mnt-dafs/d.db\nCREATE TABLE t(x);\n' "$EXT" \
    | DAFS_SQLITE_DEFAULT=1 DAFS_MOUNT="/mnt-dafs=dafs://$A/sub" sqlite3 -batch 2>&1)
[ -z "$out" ] && [ -f "$EXP/sub/d.db" ] && pass "DAFS_SQLITE_DEFAULT=1 makes dafs the default VFS" \
    || { fail "DAFS_SQLITE_DEFAULT=1"; echo "     $out"; }

out=$(shell "$(uri shell.db)" "ATTACH 'file:/shell.db?vfs=dafs&server=$SHM' AS other;")
case "$out" in *"already open in this process on another server"*"unable to open database"*)
    pass "one name on two servers in one process: refused";;
    *) fail "one name on two servers in one process: refused"; echo "     got: $out";; esac
out=$(shell "$(uri shell.db)" "ATTACH 'file:/jm-persist.db?vfs=dafs&server=$SHM' AS o;
BEGIN; INSERT INTO t(b) VALUES ('x'); INSERT INTO o.t VALUES (10); COMMIT;
SELECT count(*) FROM t; SELECT sum(x) FROM o.t;")
expect "two attached databases, one transaction (super-journal)" "3
13" "$out"

kill -0 "${pids[0]}" 2>/dev/null || { fail "dafsd died during the tests"; cat "$WORK/main.err" >&2; }
echo "sqlite: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
