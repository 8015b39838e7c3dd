#!/usr/bin/env bash
# POSIX interposition tests (libdafs_preload.so) against a real dafsd over loopback:
#   - builds dafs-preload and dafsd (dev profile unless DAFS_PROFILE=release);
#   - starts dafsd on 127.0.0.1:0 with a temporary export directory;
#   - runs real programs (cp, cat, dd, tar, sqlite3, python3, make + gcc, bash) with
#     LD_PRELOAD=libdafs_preload.so and DAFS_MOUNT=<prefix>=dafs://127.0.0.1:PORT/, does the
#     same operations in a local directory, and compares the results byte for byte (and
#     the server's export directory directly);
#   - runs tests/preload/fdtest.c (descriptors, dup, fork, exec, locks, stdio, errno);
#   - runs tests/preload/aiotest.c (POSIX AIO on dafs descriptors: data, EINPROGRESS with
#     the server stopped, aio_suspend timeouts, lio_listio, aio_fsync, aio_cancel,
#     notifications, the request limit, a server killed under a request; local files
#     still through glibc);
#   - negative tests: server down, paths escaping the prefix, non-prefix paths untouched.
# Prints "preload: N passed, N failed" last.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# ---------------------------------------------------------------- dependencies
source scripts/ensure-deps.sh
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need=()
[ -x /usr/bin/sqlite3 ] || need+=(sqlite3)
[ -x /usr/bin/python3 ] || need+=(python3)
command -v make >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1 || need+=(build-essential)
command -v tar >/dev/null 2>&1 || need+=(tar)
command -v dd >/dev/null 2>&1 || need+=(coreutils)
command -v find >/dev/null 2>&1 || need+=(findutils)
command -v git >/dev/null 2>&1 || need+=(git)
command -v sed >/dev/null 2>&1 || need+=(sed)
command -v postmark >/dev/null 2>&1 || need+=(postmark)
if [ ${#need[@]} -gt 0 ]; then
    echo "==> installing Debian packages: ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
PY=/usr/bin/python3

# ---------------------------------------------------------------- build
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
export DAFS_PROFILE=${DAFS_PROFILE:-debug}
echo "==> cargo build ($DAFS_PROFILE) -p dafs-preload -p dafs-cli"
source scripts/lib-build.sh
cargo_build -p dafs-preload -p dafs-cli
REL=$CARGO_TARGET_DIR/$DAFS_PROFILE
LIB=$REL/libdafs_preload.so
[ -f "$LIB" ] || { echo "error: $LIB was not built" >&2; exit 1; }

WORK=$(mktemp -d /tmp/dafs-test-preload.XXXXXX)
pids=()
source scripts/lib-dafsd.sh
DAFSD=$REL/dafsd
cleanup() {
    stop_pids
    rm -rf "$WORK"
}
trap cleanup EXIT
EXPORT=$WORK/export L=$WORK/local
mkdir -p "$EXPORT" "$L"
cc -std=gnu11 -Wall -Wextra -Werror -O1 tests/preload/fdtest.c -o "$WORK/fdtest" -pthread
cc -std=gnu11 -Wall -Wextra -Werror -O1 tests/preload/aiotest.c -o "$WORK/aiotest" -pthread

start_dafsd main "$EXPORT"
MAIN_PID=$PID
# The prefix must not exist locally (it is virtual).
M=/dafs-preload-test-$$
[ ! -e "$M" ] || { echo "error: $M exists locally" >&2; exit 1; }
echo "==> dafsd on $ADDR (export $EXPORT), prefix $M"
# dafs CMD...: run a program with the interposer; everything under $M is dafs.
# (Every program run under the library has a time limit: a hang fails, never blocks CI.)
dafs() { LD_PRELOAD=$LIB DAFS_MOUNT="$M=dafs://$ADDR/" timeout 120 "$@"; }

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; }
# check NAME CMD...: pass if CMD succeeds (its output is shown on failure).
check() {
    local name=$1; shift
    if out=$("$@" 2>&1); then pass "$name"; else fail "$name"; echo "$out" | tail -15 | sed 's/^/    | /'; fi
}
same() { cmp "$1" "$2" >/dev/null 2>&1; }
tree_same() { diff -r "$1" "$2" >/dev/null 2>&1; }

# ---------------------------------------------------------------- data
head -c $((5 * 1024 * 1024 + 777)) /dev/urandom > "$WORK/src.bin"
mkdir -p "$WORK/tree/a/b/c" "$WORK/tree/empty"
for i in $(seq 1 20); do head -c $((i * 997)) /dev/urandom > "$WORK/tree/a/f$i"; done
echo "small text" > "$WORK/tree/a/b/c/deep.txt"
: > "$WORK/tree/zero-length"
head -c 300000 /dev/urandom > "$WORK/tree/a/b/big"
chmod 0600 "$WORK/tree/a/f3"; chmod 0755 "$WORK/tree/a/f4"

# ---------------------------------------------------------------- cp
echo "==> cp"
check "cp file into the prefix" dafs cp "$WORK/src.bin" "$M/src.bin"
check "cp'd file on the server equals the source" same "$WORK/src.bin" "$EXPORT/src.bin"
check "cp file out of the prefix" dafs cp "$M/src.bin" "$L/back.bin"
check "file copied back equals the source" same "$WORK/src.bin" "$L/back.bin"
check "cp -r tree into the prefix" dafs cp -r "$WORK/tree" "$M/tree"
check "tree on the server equals the source (diff -r)" tree_same "$WORK/tree" "$EXPORT/tree"
check "cp -r tree out of the prefix" dafs cp -r "$M/tree" "$L/tree-back"
check "tree copied back equals the source" tree_same "$WORK/tree" "$L/tree-back"
check "cp within the prefix" dafs cp "$M/tree/a/f7" "$M/f7-copy"
check "copy within the prefix equals the source" same "$WORK/tree/a/f7" "$EXPORT/f7-copy"
touch -d '2001-02-03 04:05:06' "$WORK/tree/a/f5"
check "cp -p into the prefix" dafs cp -p "$WORK/tree/a/f5" "$WORK/tree/a/f3" "$M/"
check "cp -p kept mode and mtime (f5)" test "$(stat -c '%a %Y %s' "$WORK/tree/a/f5")" = "$(stat -c '%a %Y %s' "$EXPORT/f5")"
check "cp -p kept mode 0600 (f3)" test "$(stat -c '%a' "$EXPORT/f3")" = 600
check "stat under the prefix agrees with the server's file" test "$(dafs stat -c '%a %Y %s %F' "$M/f5")" = "$(stat -c '%a %Y %s %F' "$EXPORT/f5")"
check "ls -l lists the same names as the export" test "$(dafs ls -A "$M/tree/a" | tr '\n' ' ')" = "$(ls -A "$EXPORT/tree/a" | tr '\n' ' ')"

# ---------------------------------------------------------------- cat
echo "==> cat"
check "cat a dafs file" bash -c "LD_PRELOAD='$LIB' DAFS_MOUNT='$M=dafs://$ADDR/' timeout 120 cat '$M/src.bin' | cmp - '$WORK/src.bin'"
check "shell redirection into a dafs file (bash >)" dafs bash -c "cat '$WORK/src.bin' > '$M/cat.bin'"
check "redirected file equals the source" same "$WORK/src.bin" "$EXPORT/cat.bin"
check "shell <, >> and exec 3< on dafs files" dafs bash -c "exec 3<'$M/tree/a/b/c/deep.txt'; cat <&3 > '$M/deep2.txt'; echo more >> '$M/deep2.txt'"
check "... gives the expected content" test "$(cat "$EXPORT/deep2.txt")" = "$(printf 'small text\nmore')"
cp "$WORK/tree/a/b/c/deep.txt" "$L/sed.txt"; sed -i 's/small/SMALL/' "$L/sed.txt"
check "sed -i on a dafs file (temporary file + rename in the prefix)" dafs sed -i 's/small/SMALL/' "$M/tree/a/b/c/deep.txt"
check "... same result as locally, no temporary file left" bash -c "cmp '$L/sed.txt' '$EXPORT/tree/a/b/c/deep.txt' && test \"\$(ls '$EXPORT/tree/a/b/c')\" = deep.txt"
seq 1 5000 | shuf > "$WORK/unsorted"; cp "$WORK/unsorted" "$EXPORT/unsorted"
check "stdin/stdout of an exec'd stdio program on dafs files (sort < in > out)" dafs bash -c "sort -n < '$M/unsorted' > '$M/sorted'"
check "... sorted output equals the local sort" bash -c "sort -n '$WORK/unsorted' | cmp - '$EXPORT/sorted'"
SHM_URL=$(sed -n 's/^shared memory: //p' "$WORK/main.out")
if [ -n "$SHM_URL" ]; then
    check "a dafs+shm:// mount URL" bash -c "LD_PRELOAD='$LIB' DAFS_MOUNT='/dafs-shm-$$=$SHM_URL/' timeout 60 cat '/dafs-shm-$$/src.bin' | cmp - '$WORK/src.bin'"
    check "a plain dafs://127.0.0.1 mount URL switches to shared memory" bash -c "DAFS_PRELOAD_DEBUG=1 LD_PRELOAD='$LIB' DAFS_MOUNT='$M=dafs://$ADDR/' timeout 60 cat '$M/src.bin' 2>&1 >/dev/null | grep -q '(shm, session'"
fi
check "cat several dafs files" bash -c "LD_PRELOAD='$LIB' DAFS_MOUNT='$M=dafs://$ADDR/' timeout 120 cat '$M/tree/a/f1' '$M/tree/a/f2' > '$L/two'; cat '$WORK/tree/a/f1' '$WORK/tree/a/f2' | cmp - '$L/two'"

# ---------------------------------------------------------------- dd
echo "==> dd"
ddboth() { # NAME ARGS...: same dd on local and dafs files (if=/of= with @ for the dir)
    local name=$1; shift
    local largs=() dargs=()
    for a in "$@"; do largs+=("${a//@/$L}"); dargs+=("${a//@/$M}"); done
    dd "${largs[@]}" status=none 2>/dev/null || true
    dafs dd "${dargs[@]}" status=none 2>"$WORK/dd.err" || { fail "$name (dd failed)"; cat "$WORK/dd.err"; return; }
}
cp "$WORK/src.bin" "$L/src.bin"
ddboth "dd bs=1M count=3" if=@/src.bin of=@/dd1 bs=1M count=3
check "dd bs=1M count=3: same bytes" same "$L/dd1" "$EXPORT/dd1"
ddboth "dd conv=notrunc seek" if=@/src.bin of=@/dd1 bs=4k count=5 skip=3 seek=7 conv=notrunc
check "dd conv=notrunc seek=7 skip=3: same bytes" same "$L/dd1" "$EXPORT/dd1"
ddboth "dd seek beyond end (hole)" if=@/src.bin of=@/dd2 bs=64k count=2 seek=10
check "dd seek beyond end: same bytes (hole reads as zeros)" same "$L/dd2" "$EXPORT/dd2"
check "dd from the prefix with skip" bash -c "LD_PRELOAD='$LIB' DAFS_MOUNT='$M=dafs://$ADDR/' timeout 120 dd if='$M/src.bin' bs=64k skip=5 count=7 status=none | cmp - <(dd if='$WORK/src.bin' bs=64k skip=5 count=7 status=none)"

# ---------------------------------------------------------------- tar
echo "==> tar"
tar -cf "$WORK/tree.tar" -C "$WORK" tree
mkdir -p "$L/tx"; tar -xf "$WORK/tree.tar" -C "$L/tx"
check "mkdir in the prefix" dafs mkdir "$M/tx"
check "tar -x -C into the prefix" dafs tar -xf "$WORK/tree.tar" -C "$M/tx"
check "extracted tree on the server equals the source" tree_same "$WORK/tree" "$EXPORT/tx/tree"
check "extracted mtimes equal the local extraction" test "$(cd "$L/tx" && find . -type f -printf '%p %T@ %m\n' | sort)" = "$(cd "$EXPORT/tx" && find . -type f -printf '%p %T@ %m\n' | sort)"
check "tar -c of the prefix" dafs tar --sort=name -cf "$L/from-dafs.tar" -C "$M/tx" tree
tar --sort=name -cf "$L/from-local.tar" -C "$L/tx" tree
check "archive made from the prefix equals the local one byte for byte" same "$L/from-local.tar" "$L/from-dafs.tar"
check "tar -c writing the archive into the prefix" dafs tar --sort=name -cf "$M/out.tar" -C "$L/tx" tree
check "archive written into the prefix equals the local one" same "$L/from-local.tar" "$EXPORT/out.tar"
check "tar -t reads an archive from the prefix" test "$(dafs tar -tf "$M/out.tar" | sort)" = "$(tar -tf "$L/from-local.tar" | sort)"
check "tar -x with cwd in the prefix (cd; tar -x)" dafs bash -c "mkdir '$M/tx2' && cd '$M/tx2' && tar -xf '$WORK/tree.tar' && test \"\$(pwd)\" = '$M/tx2'"
check "... extracted tree equals the source" tree_same "$WORK/tree" "$EXPORT/tx2/tree"

# ---------------------------------------------------------------- sqlite3
echo "==> sqlite3 $(sqlite3 --version | awk '{print $1}')"
cat > "$WORK/db.sql" <<'SQL'
PRAGMA journal_mode=DELETE;
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL, blob BLOB);
CREATE INDEX t_name ON t(name);
BEGIN;
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 10000)
INSERT INTO t(id, name, v, blob) SELECT i, 'name-' || (i * 7919 % 10007), i * 1.5, zeroblob(i % 300) FROM c;
COMMIT;
UPDATE t SET v = v * 2 WHERE id % 3 = 0;
DELETE FROM t WHERE id % 10 = 0;
SELECT count(*), sum(v), sum(length(blob)), min(name), max(name) FROM t;
SELECT name, count(*) FROM t GROUP BY substr(name, 1, 7) ORDER BY 1 LIMIT 5;
PRAGMA integrity_check;
SQL
sqlite3 "$L/local.db" < "$WORK/db.sql" > "$L/sqlite.out" 2>&1
check "sqlite3 create/insert 10k rows in a transaction/query under the prefix" bash -c "LD_PRELOAD='$LIB' DAFS_MOUNT='$M=dafs://$ADDR/' timeout 120 sqlite3 '$M/test.db' < '$WORK/db.sql' > '$L/sqlite-dafs.out' 2>&1"
check "sqlite3 output equals the local run" same "$L/sqlite.out" "$L/sqlite-dafs.out"
check "integrity_check is ok" grep -qx ok "$L/sqlite-dafs.out"
check "the server's database file answers the same query directly" test "$(sqlite3 "$EXPORT/test.db" 'SELECT count(*), sum(v) FROM t;')" = "$(sqlite3 "$L/local.db" 'SELECT count(*), sum(v) FROM t;')"
check "no journal left behind" test ! -e "$EXPORT/test.db-journal"
check "second session reads what the first wrote" test "$(dafs sqlite3 "$M/test.db" 'SELECT count(*) FROM t WHERE id > 5000;')" = "$(sqlite3 "$L/local.db" 'SELECT count(*) FROM t WHERE id > 5000;')"

# ---------------------------------------------------------------- python3
echo "==> python3 $($PY -c 'import sys; print(sys.version.split()[0])')"
cat > "$WORK/t.py" <<'PY'
import os, sys, pathlib, shutil, hashlib, json
base = sys.argv[1]
d = os.path.join(base, "py")
os.mkdir(d)
p = os.path.join(d, "data.bin")
with open(p, "wb") as f:
    for i in range(200):
        f.write(bytes([i % 256]) * (i * 37))
with open(p, "r+b") as f:
    f.seek(1000); f.write(b"PATCH"); f.seek(0, 2); end = f.tell(); f.seek(995); mid = f.read(15)
with open(p, "rb") as f:
    digest = hashlib.sha256(f.read()).hexdigest()
st = os.stat(p)
with open(os.path.join(d, "text.txt"), "w") as f:
    f.write("alpha\nbeta\ngamma\n")
with open(os.path.join(d, "text.txt"), "a") as f:
    f.write("delta\n")
lines = open(os.path.join(d, "text.txt")).read().splitlines()
os.rename(os.path.join(d, "text.txt"), os.path.join(d, "renamed.txt"))
os.makedirs(os.path.join(d, "x", "y", "z"))
pathlib.Path(d, "x", "y", "z", "leaf.txt").write_text("leaf\n")
shutil.copyfile(p, os.path.join(d, "copy.bin"))
shutil.copytree(os.path.join(d, "x"), os.path.join(d, "x2"))
for n in ("gone1", "gone2"):
    open(os.path.join(d, n), "w").close()
os.remove(os.path.join(d, "gone1")); os.unlink(os.path.join(d, "gone2"))
walk = sorted((os.path.relpath(r, d), sorted(ds), sorted(fs)) for r, ds, fs in os.walk(d))
out = {
    "end": end, "mid": mid.hex(), "sha": digest, "size": st.st_size, "isfile": os.path.isfile(p),
    "isdir": os.path.isdir(d), "exists_gone": os.path.exists(os.path.join(d, "gone1")),
    "lines": lines, "listdir": sorted(os.listdir(d)), "walk": walk,
    "glob": sorted(str(x.relative_to(d)) for x in pathlib.Path(d).rglob("*.txt")),
    "leaf": pathlib.Path(d, "x2", "y", "z", "leaf.txt").read_text(),
    "scandir": sorted((e.name, e.is_dir()) for e in os.scandir(d)),
    "copy_same": open(p, "rb").read() == open(os.path.join(d, "copy.bin"), "rb").read(),
}
try:
    os.rmdir(os.path.join(d, "x"))
    out["rmdir_nonempty"] = "no error"
except OSError as e:
    out["rmdir_nonempty"] = e.strerror
try:
    open(os.path.join(d, "missing"))
except FileNotFoundError as e:
    out["missing"] = e.strerror
import fcntl, tempfile
with open(p, "r+b") as f:
    fcntl.lockf(f, fcntl.LOCK_EX); fcntl.lockf(f, fcntl.LOCK_UN)
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB); fcntl.flock(f, fcntl.LOCK_UN)
    out["pread"] = os.pread(f.fileno(), 4, 1000).hex()
    os.pwrite(f.fileno(), b"PW", 2000)
    out["after_pwrite"] = os.pread(f.fileno(), 4, 1999).hex()
fd, tmp = tempfile.mkstemp(dir=d, prefix="tmp")
os.write(fd, b"temp"); os.close(fd)
out["tmp"] = open(tmp).read(); os.remove(tmp)
shutil.rmtree(os.path.join(d, "x2"))
out["after_rmtree"] = sorted(os.listdir(d))
print(json.dumps(out, indent=1, sort_keys=True))
PY
$PY "$WORK/t.py" "$L" > "$L/py.out" 2>&1 || true
check "python3 script under the prefix" bash -c "LD_PRELOAD='$LIB' DAFS_MOUNT='$M=dafs://$ADDR/' timeout 120 $PY '$WORK/t.py' '$M' > '$L/py-dafs.out' 2>&1"
check "python3 output equals the local run" same "$L/py.out" "$L/py-dafs.out"
check "python3 result tree on the server equals the local one" tree_same "$L/py" "$EXPORT/py"

# Python's subprocess runs children with vfork: their dup2/close must not change the
# parent's descriptor table, yet the exec'd child must get its dafs stdin/stdout.
cat > "$WORK/sp.py" <<'PY'
import subprocess, sys, os
m = sys.argv[1]
with open(m + "/unsorted") as f:
    r = subprocess.run(["sort", "-n"], stdin=f, capture_output=True)
print("child sorted:", r.stdout == subprocess.run(["sort", "-n", sys.argv[2]], capture_output=True).stdout, r.returncode)
with open(m + "/sp-out.txt", "w") as out:
    subprocess.run(["echo", "to-dafs"], stdout=out)
print("child wrote:", open(m + "/sp-out.txt").read().strip())
print("shell:", subprocess.run("cat " + m + "/unsorted | wc -l", shell=True, capture_output=True).stdout.strip().decode())
print("parent stdin:", sys.stdin.readline().strip())
PY
check "python3 subprocess (vfork) with dafs stdin/stdout; the parent's own stdin/stdout unchanged" test "$(echo parent-line | dafs $PY "$WORK/sp.py" "$M" "$WORK/unsorted")" = "$(printf 'child sorted: True 0\nchild wrote: to-dafs\nshell: 5000\nparent stdin: parent-line')"

# ---------------------------------------------------------------- C project
echo "==> make + gcc with sources and objects under the prefix"
P=$WORK/proj; mkdir -p "$P/src" "$P/include"
cat > "$P/include/calc.h" <<'C'
#ifndef CALC_H
#define CALC_H
unsigned long fib(unsigned n);
unsigned long checksum(const char *s);
#endif
C
cat > "$P/src/calc.c" <<'C'
#include "calc.h"
unsigned long fib(unsigned n) { unsigned long a = 0, b = 1; while (n--) { unsigned long t = a + b; a = b; b = t; } return a; }
unsigned long checksum(const char *s) { unsigned long h = 5381; while (*s) h = h * 33 + (unsigned char)*s++; return h; }
C
cat > "$P/src/main.c" <<'C'
#include <stdio.h>
#include "calc.h"
int main(int argc, char **argv) {
    for (unsigned i = 0; i < 60; i += 7) printf("fib(%u) = %lu\n", i, fib(i));
    for (int i = 0; i < argc; i++) printf("checksum(arg%d) = %lu\n", i > 0, checksum(i > 0 ? argv[i] : "hello"));
    return 0;
}
C
cat > "$P/Makefile" <<'MK'
CFLAGS = -O2 -Wall -Iinclude
OBJS = src/main.o src/calc.o
calc: $(OBJS)
	$(CC) -o $@ $(OBJS)
src/%.o: src/%.c include/calc.h
	$(CC) $(CFLAGS) -c -o $@ $<
clean:
	rm -f calc $(OBJS)
MK
cp -r "$P" "$L/proj"
check "copy the project into the prefix" dafs cp -r "$P" "$M/proj"
make -s -C "$L/proj" >/dev/null 2>&1
check "make -C (compile + link) under the prefix" dafs make -s -C "$M/proj"
check "object files equal the local build" bash -c "cmp '$L/proj/src/main.o' '$EXPORT/proj/src/main.o' && cmp '$L/proj/src/calc.o' '$EXPORT/proj/src/calc.o'"
"$L/proj/calc" abc > "$L/calc.out"
check "run the binary stored under the prefix (exec from dafs)" dafs bash -c "'$M/proj/calc' abc > '$L/calc-dafs.out'"
check "its output equals the local build's" same "$L/calc.out" "$L/calc-dafs.out"
check "make is up to date the second time (mtimes)" test -z "$(dafs make -s -C "$M/proj" 2>&1)"
check "make in a dafs working directory (cd; make clean; make)" dafs bash -c "cd '$M/proj' && make -s clean && make -s && ./calc abc > '$L/calc-dafs2.out'"
check "... same output" same "$L/calc.out" "$L/calc-dafs2.out"

# ---------------------------------------------------------------- git
echo "==> git (private mmap of dafs files)"
check "git init/add/commit in a repository under the prefix" dafs bash -c "cd '$M' && git init -q repo && cd repo && cp -r '$P/src' . && git add src && git -c user.email=t@example.invalid -c user.name=t commit -qm one && git log --oneline | grep -q one"
check "... the server's copy passes git fsck and has the files" bash -c "cd '$EXPORT/repo' && git fsck --strict 2>&1 >/dev/null && git diff --quiet HEAD && test \"\$(git ls-files | sort | tr '\n' ' ')\" = 'src/calc.c src/main.c '"

# ---------------------------------------------------------------- postmark
# Debian's stock PostMark, unmodified (stdio buffered I/O; remove(3) for its deletes):
# the same seed through the library and on a local directory must do exactly the
# same work, and leave no file behind.
echo "==> stock PostMark"
pm_cfg() { printf 'set location %s\nset number 60\nset transactions 400\nset size 500 20000\nset read 4096\nset write 4096\nset seed 5\nrun\nquit\n' "$1" > "$2"; }
pm_work() { sed -n '/^Files:/,$p' "$1" | sed 's/ (.*//'; } # counts and bytes, no rates
mkdir -p "$EXPORT/pm" "$L/pm"
pm_cfg "$M/pm" "$WORK/pm-dafs.cfg"
pm_cfg "$L/pm" "$WORK/pm-local.cfg"
(cd "$WORK" && timeout 120 postmark pm-local.cfg > pm-local.out 2>&1) || true
check "postmark through the library: exit 0, no error lines" bash -c "cd '$WORK' && LD_PRELOAD='$LIB' DAFS_MOUNT='$M=dafs://$ADDR/' timeout 120 postmark pm-dafs.cfg > pm-dafs.out 2>&1 && ! grep -q Error pm-dafs.out && grep -q 'created' pm-dafs.out"
pm_work "$WORK/pm-local.out" > "$WORK/pm-local.work"
pm_work "$WORK/pm-dafs.out" > "$WORK/pm-dafs.work" 2>/dev/null || true
check "... the same files created, read, appended, deleted and bytes as on a local directory" bash -c "grep -q created '$WORK/pm-local.work' && cmp '$WORK/pm-local.work' '$WORK/pm-dafs.work'"
check "... and every file it made is gone from the server" test -z "$(ls -A "$EXPORT/pm")"

# ---------------------------------------------------------------- fdtest
# ---------------------------------------------------------------- C test programs
# run_ctest LABEL [VAR=VALUE...] -- PROGRAM ARGS...: run a C test program under the
# library (VAR=VALUE may override DAFS_MOUNT); its "N passed, N failed" summary line
# counts (and a crash without one fails).
run_ctest() {
    local label=$1; shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    local out=$WORK/$label.out rc
    set +e
    (cd "$WORK" && env LD_PRELOAD="$LIB" DAFS_MOUNT="$M=dafs://$ADDR/" "${envs[@]}" timeout 120 "$@") > "$out" 2>&1
    rc=$?
    set -e
    grep -v '^ok' "$out" | sed 's/^/    /' || true
    local line
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -1 || true)
    if [ -n "$line" ]; then
        echo "    $label: $line"
        passed=$((passed + $(echo "$line" | awk '{print $1}')))
        failed=$((failed + $(echo "$line" | awk '{print $3}')))
        [ "$rc" -eq 0 ] || [ "$(echo "$line" | awk '{print $3}')" -gt 0 ] || fail "$label exit status $rc"
    else
        fail "$label (exit status $rc, no summary: crashed or hung?)"
    fi
}
echo "==> tests/preload/fdtest.c (descriptors, dup, fork, exec, locks, stdio, errno)"
run_ctest fdtest -- "$WORK/fdtest" "$M" "$L"
echo "==> tests/preload/aiotest.c (POSIX AIO)"
mkdir -p "$L/aio"
run_ctest aiotest DAFS_TEST_SERVER_PID="$MAIN_PID" -- "$WORK/aiotest" "$M" "$EXPORT" "$L/aio"
# A stopped server must never be left behind by a failed run.
kill -CONT "$MAIN_PID" 2>/dev/null || true
run_ctest aiotest-limit DAFS_AIO_REQUESTS_MAX=4 -- "$WORK/aiotest" "$M" "$EXPORT" "$L/aio" limit
# A server killed under a request in progress: the request fails (EIO), nothing hangs.
mkdir -p "$WORK/victim"
MAIN_ADDR=$ADDR
start_dafsd victim "$WORK/victim" --no-shm
VICTIM_ADDR=$ADDR VICTIM_PID=$PID ADDR=$MAIN_ADDR
run_ctest aiotest-dead DAFS_MOUNT="/dafs-victim-$$=dafs://$VICTIM_ADDR/" DAFS_REQUEST_DEADLINE_MS=3000 \
    DAFS_TEST_SERVER_PID="$VICTIM_PID" -- "$WORK/aiotest" "/dafs-victim-$$" "$WORK/victim" "$L/aio" dead
check "a malformed DAFS_AIO_REQUESTS_MAX is reported (and the default used)" bash -c "DAFS_AIO_REQUESTS_MAX=bogus LD_PRELOAD='$LIB' DAFS_MOUNT='$M=dafs://$ADDR/' timeout 60 '$WORK/aiotest' '$M' '$EXPORT' '$L/aio' limit 2>&1 | grep -q 'DAFS_AIO_REQUESTS_MAX=\"bogus\" is not a positive number; using 1024'"

# ---------------------------------------------------------------- negative / isolation
echo "==> isolation and errors"
check "non-prefix paths are untouched (md5sum of a system file)" test "$(dafs md5sum /bin/ls)" = "$(md5sum /bin/ls)"
check "a path escaping the prefix via .. is local" test "$(dafs cat "$M/../etc/hostname")" = "$(cat /etc/hostname)"
check "a sibling name of the prefix is local (ENOENT)" bash -c "! LD_PRELOAD='$LIB' DAFS_MOUNT='$M=dafs://$ADDR/' timeout 120 stat '${M}x' 2>/dev/null"
check "local writes next to dafs ones stay local" bash -c "LD_PRELOAD='$LIB' DAFS_MOUNT='$M=dafs://$ADDR/' timeout 120 cp '$M/f7-copy' '$L/f7-local' && cmp '$L/f7-local' '$WORK/tree/a/f7' && test ! -e '$EXPORT/f7-local'"
check "missing dafs file: ENOENT message" bash -c "LD_PRELOAD='$LIB' DAFS_MOUNT='$M=dafs://$ADDR/' timeout 120 cat '$M/nope' 2>&1 | grep -q 'No such file or directory'"
check "nothing leaked into the export" test "$(ls "$EXPORT" | grep -c "^$(basename "$L")" || true)" = 0
# A server that is down: start one, note its address, stop it.
mkdir -p "$WORK/down"
start_dafsd down "$WORK/down"
DOWN=$ADDR; kill "$PID"; for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
set +e
out=$(LD_PRELOAD=$LIB DAFS_MOUNT="/dafs-down-$$=dafs://$DOWN/" timeout 60 cat "/dafs-down-$$/x" 2>&1); rc=$?
set -e
if [ "$rc" -ne 0 ] && echo "$out" | grep -q 'dafs-preload: cannot connect' && echo "$out" | grep -q 'Connection refused'; then
    pass "server down: clean ECONNREFUSED and a one-line message"
else
    fail "server down (rc $rc): $out"
fi
set +e
out=$(LD_PRELOAD=$LIB DAFS_MOUNT="/dafs-down-$$=dafs://$DOWN/" timeout 60 $PY -c "
import os
try:
    os.stat('/dafs-down-$$/x')
except OSError as e:
    print('errno', e.errno)
print(open('/etc/hostname').read() == open('/etc/hostname').read())" 2>/dev/null)
set -e
check "server down: Python gets ECONNREFUSED and local files still work" test "$out" = "$(printf 'errno 111\nTrue')"
out=$(LD_PRELOAD=$LIB DAFS_MOUNT="bad-entry" timeout 60 cat /etc/hostname 2>&1 || true)
check "bad DAFS_MOUNT: message, nothing redirected" bash -c "echo '$out' | grep -q 'DAFS_MOUNT' && echo '$out' | grep -q \"\$(cat /etc/hostname)\""

# A connection lost while a file is open: the call in flight fails (ENOTCONN), the next
# one reconnects (server restarted on the same port) and re-opens the file by path.
mkdir -p "$WORK/rx"; head -c 100000 /dev/urandom > "$WORK/rx/f"
RPORT=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$REL/dafsd" "$WORK/rx" --listen "127.0.0.1:$RPORT" >"$WORK/rx1.out" 2>&1 & R1=$!; disown "$R1"; pids+=("$R1")
for _ in $(seq 100); do grep -q '^dafsd listening' "$WORK/rx1.out" 2>/dev/null && break; sleep 0.1; done
cat > "$WORK/reconnect.py" <<'PY'
import os, sys, time
w = sys.argv[1]
fd = os.open("/dafs-rx/f", os.O_RDONLY)
a = os.read(fd, 1000)
open(w + "/rc.ready", "w").close()
while not os.path.exists(w + "/rc.go"):
    time.sleep(0.02)
try:
    os.read(fd, 1000)
    print("no error after restart")
except OSError as e:
    print("errno", e.errno)
b = os.read(fd, 2000)
print("data ok", a + b == open(w + "/rx/f", "rb").read()[:3000])
PY
LD_PRELOAD=$LIB DAFS_MOUNT="/dafs-rx=dafs://127.0.0.1:$RPORT/" timeout 60 $PY "$WORK/reconnect.py" "$WORK" > "$WORK/rc.out" 2>"$WORK/rc.err" & RC=$!
for _ in $(seq 200); do [ -e "$WORK/rc.ready" ] && break; sleep 0.05; done
kill "$R1"; for _ in $(seq 50); do kill -0 "$R1" 2>/dev/null || break; sleep 0.1; done
"$REL/dafsd" "$WORK/rx" --listen "127.0.0.1:$RPORT" >"$WORK/rx2.out" 2>&1 & R2=$!; disown "$R2"; pids+=("$R2")
for _ in $(seq 100); do grep -q '^dafsd listening' "$WORK/rx2.out" 2>/dev/null && break; sleep 0.1; done
touch "$WORK/rc.go"
wait "$RC" || true
check "lost connection: ENOTCONN once, then reconnect + re-open continue at the offset" test "$(cat "$WORK/rc.out")" = "$(printf 'errno 107\ndata ok True')"
check "... and one line on stderr" grep -q 'dafs-preload: connection to .* lost' "$WORK/rc.err"

# ---------------------------------------------------------------- a full file system
# A write that only partly fits is a short write(2) (the bytes that reached the file are
# reported), and the next write fails with ENOSPC. The export is a 1 MiB tmpfs (root).
SMALL=$WORK/small
mkdir -p "$SMALL"
if mount -t tmpfs -o size=1m tmpfs "$SMALL"; then
    MAIN_ADDR=$ADDR
    start_dafsd small "$SMALL"
    cat > "$WORK/short.py" <<'PY'
import errno, os
fd = os.open("/dafs-small/full", os.O_WRONLY | os.O_CREAT, 0o644)
assert os.write(fd, b"h" * 100000) == 100000
n = os.write(fd, b"d" * (2 << 20))
try:
    os.write(fd, b"e" * 4096)
    print(n, "no error")
except OSError as e:
    print(n, errno.errorcode[e.errno])
PY
    LD_PRELOAD=$LIB DAFS_MOUNT="/dafs-small=dafs://$ADDR/" timeout 60 $PY "$WORK/short.py" > "$WORK/short.out" 2>&1 || true
    read -r short_n short_err < "$WORK/short.out" || true
    check "a 2 MiB write(2) into a 1 MiB file system is short (~1 MiB), the next ENOSPC" \
        test "${short_err:-}" = ENOSPC -a "${short_n:-0}" -gt 800000 -a "${short_n:-0}" -lt 2097152
    check "... and the file holds exactly the bytes reported" \
        test "$(stat -c %s "$SMALL/full")" = "$((100000 + ${short_n:-0}))"
    kill "$PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    umount "$SMALL" || umount -l "$SMALL" || true
    ADDR=$MAIN_ADDR
else
    fail "mount -t tmpfs for the full-file-system test (needs root)"
fi

# ---------------------------------------------------------------- sessions end with the process
# Every preloaded process ends its session when it exits, and before an exec (the new
# program starts its own): parked for the whole lease instead, a few hundred short
# commands would fill --max-sessions. 200 cat runs and 100 exec'ing shells (200 sessions
# more) against a server allowing 64 sessions must all succeed and leave no session
# behind: six times the limit, so leaking every process's session fails the runs, and
# `dafs admin sessions` counts any single leaked one (the 1,000 cat runs before this
# repeated the same check 15 times past the limit).
MAIN_ADDR=$ADDR
start_dafsd sess "$EXPORT" --max-sessions 64 --admin-socket "$WORK/sess.admin"
echo "one line" > "$EXPORT/sess.txt"
sess() { LD_PRELOAD=$LIB DAFS_MOUNT="/dafs-sess=dafs://$ADDR/" timeout 20 "$@" >/dev/null 2>>"$WORK/sess.err"; }
sess_failed=0
for _ in $(seq 200); do sess cat /dafs-sess/sess.txt || sess_failed=$((sess_failed + 1)); done
for _ in $(seq 100); do
    sess bash -c 'read l < /dafs-sess/sess.txt; exec cat /dafs-sess/sess.txt' || sess_failed=$((sess_failed + 1))
done
check "200 preloaded cat runs and 100 exec'ing shells against --max-sessions 64 all succeed" test "$sess_failed" = 0
sessions_left() { "$REL/dafs" admin --socket "$WORK/sess.admin" --json sessions | $PY -c 'import json, sys; print(len(json.load(sys.stdin)))'; }
check "... and leave no session behind (dafs admin sessions)" test "$(sessions_left)" = 0
ADDR=$MAIN_ADDR

if ! kill -0 "$MAIN_PID" 2>/dev/null; then
    fail "dafsd died during the tests"
    cat "$WORK/main.err" >&2
fi
echo "preload: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
