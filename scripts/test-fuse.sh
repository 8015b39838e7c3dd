#!/usr/bin/env bash
# FUSE mount tests, against a real dafsd over loopback:
#   - builds dafs and dafsd (dev profile), starts dafsd on 127.0.0.1:0 with a temporary
#     export, mounts it with `dafs mount -d -o allow_other`;
#   - runs the same scenario (cp, dd, tar, sqlite3, python, make of a small C project,
#     links, truncate, chmod, touch, rename, a 10,000-entry directory, xattrs) in a
#     local directory and in the mount, and compares the output and the resulting
#     trees byte for byte; then compares the mount with the export on the server's disk;
#   - checks permissions for a non-root user, close-to-open visibility of writes made
#     on the server, unmount by SIGTERM, SIGINT and `dafs umount`, errors of `dafs
#     umount`, and a server killed under a mount (errors within seconds, unmount works).
# Needs /dev/fuse: without it the script fails loudly (it never passes by skipping).
# Prints "fuse: N passed, N failed" last. DAFS_FUSE_SCENARIOS="cp tar" runs only the
# scenarios named (the other checks all run). DAFS_FUSE_KEEP=1 keeps the work directory
# (each scenario's output in NAME.local and NAME.mnt) for inspection.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# ---------------------------------------------------------------- dependencies
source scripts/ensure-deps.sh
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need=()
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3)
command -v setfattr >/dev/null 2>&1 || need+=(attr)
command -v make >/dev/null 2>&1 || need+=(build-essential)
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
command -v tar >/dev/null 2>&1 || need+=(tar)
command -v postmark >/dev/null 2>&1 || need+=(postmark)
if [ ${#need[@]} -gt 0 ]; then
    echo "==> installing Debian packages: ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ ! -c /dev/fuse ]; then
    echo "error: /dev/fuse is missing: the FUSE tests cannot run on this machine." >&2
    echo "       Load the fuse module (modprobe fuse) or give the container the device." >&2
    echo "fuse: 0 passed, 1 failed"
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    # The permission test switches to another user, and allow_other needs root or
    # user_allow_other; run as root (CI does).
    echo "error: scripts/test-fuse.sh must run as root" >&2
    echo "fuse: 0 passed, 1 failed"
    exit 1
fi

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
export DAFS_PROFILE=${DAFS_PROFILE:-debug}
echo "==> cargo build ($DAFS_PROFILE) -p dafs-cli"
source scripts/lib-build.sh
cargo_build -p dafs-cli
BIN=$CARGO_TARGET_DIR/$DAFS_PROFILE
DAFS=$BIN/dafs

# ---------------------------------------------------------------- servers and mounts
WORK=$(mktemp -d /tmp/dafs-test-fuse.XXXXXX)
chmod 755 "$WORK"
pids=()
mounts=()
source scripts/lib-dafsd.sh
DAFSD=$BIN/dafsd
cleanup() {
    set +e
    for m in "${mounts[@]}"; do
        grep -q " $m " /proc/mounts && { "$DAFS" umount "$m" 2>/dev/null || "$DAFS" umount --lazy "$m" 2>/dev/null; }
    done
    kill "$WATCHDOG" 2>/dev/null
    stop_pids
    if [ -n "${DAFS_FUSE_KEEP:-}" ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'echo "error: scripts/test-fuse.sh interrupted (or stopped by its 10-minute watchdog)" >&2; exit 143' TERM INT
# A hung file system operation must not hang CI: give up after 10 minutes. The watchdog
# holds none of our output descriptors (scripts/test.sh reads our output to its end) and
# takes its sleep with it when the cleanup stops it.
( trap 'kill $! 2>/dev/null; exit 0' TERM; sleep 600 & wait $!; kill -TERM $$ ) >/dev/null 2>&1 </dev/null &
WATCHDOG=$!
disown "$WATCHDOG"
mkdir -p "$WORK/export" "$WORK/victim" "$WORK/local" "$WORK/mnt" "$WORK/m2" "$WORK/m3" "$WORK/src"

mounted() { grep -q " $1 " /proc/mounts; }
wait_gone() { # pid seconds
    for _ in $(seq $(( $2 * 10 ))); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
    return 1
}
wait_mounted() { # pid output-file
    # The pid in the line: an earlier run's line in a reused file does not count.
    for _ in $(seq 100); do grep -q "^dafs: mounted .*(pid $1)" "$2" && return 0; sleep 0.1; done
    echo "error: mount process $1 did not report a mount within 10 s:" >&2; sed 's/^/     /' "$2" >&2
    return 1
}
reap() { # pid: exit status of a mount process, waiting at most 10 s (then kill -9: 137)
    if ! wait_gone "$1" 10; then echo "mount process $1 still running; killing it" >&2; kill -9 "$1"; fi
    local rc=0; wait "$1" 2>/dev/null || rc=$?; return "$rc"
}

start_dafsd main "$WORK/export" --shm-socket "$WORK/shm.sock"
MAIN_ADDR=$ADDR
EXPORT=$WORK/export
MNT=$WORK/mnt
LOCAL=$WORK/local
echo "==> dafsd on $MAIN_ADDR (export $EXPORT)"
mounts+=("$MNT")
if ! out=$("$DAFS" mount "dafs://$MAIN_ADDR/" "$MNT" -d -o allow_other 2>&1); then
    echo "$out" >&2
    echo "error: cannot mount (is FUSE usable here? /dev/fuse exists but mounting failed)" >&2
    echo "fuse: 0 passed, 1 failed"
    exit 1
fi
echo "$out"
MOUNT_PID=$(echo "$out" | sed -n 's/.*(pid \([0-9]*\)).*/\1/p')
mounted "$MNT" || { echo "error: $MNT not in /proc/mounts after dafs mount -d" >&2; echo "fuse: 0 passed, 1 failed"; exit 1; }

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; }
check() { # name command... : pass if the command succeeds
    local name=$1; shift
    if timeout 120 "$@" >"$WORK/check.out" 2>&1; then pass "$name"; else fail "$name"; sed 's/^/     /' "$WORK/check.out" | head -20; fi
}

# A tree's contents as text: type, mode, links, size, symlink target and a checksum of
# every file (inode numbers, times and directory sizes differ legitimately).
tree_manifest() {
    (cd "$1" && find . -mindepth 1 -printf '%y %m %n %s %p -> %l\n' | LC_ALL=C sort \
        | awk '{ if ($1 == "d") $4 = "-"; print }'
     cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r md5sum)
}

# Run scenario NAME (a shell function) in $LOCAL/NAME and in $MNT/NAME; compare its
# output, the two trees, and the mount with the server's copy of the tree.
scenario() { # NAME [TAG]: TAG tells runs of one scenario on different mounts apart
    local fn=scn_$1 name=$1${2:-}
    mkdir "$LOCAL/$name" "$MNT/$name"
    local rl=0 rm=0
    (cd "$LOCAL/$name" && "$fn") >"$WORK/$name.local" 2>&1 || rl=$?
    (cd "$MNT/$name" && "$fn") >"$WORK/$name.mnt" 2>&1 || rm=$?
    sed -i "s#$LOCAL#ROOT#g; s#$MNT#ROOT#g" "$WORK/$name.local" "$WORK/$name.mnt"
    if [ "$rl" -ne 0 ] || [ "$rm" -ne 0 ]; then
        fail "$name: exit status local $rl, mount $rm"
        { diff "$WORK/$name.local" "$WORK/$name.mnt" | head -20 | sed 's/^/     /'; } || true
        tail -5 "$WORK/$name.mnt" | sed 's/^/     mount: /'
        return
    fi
    if ! diff "$WORK/$name.local" "$WORK/$name.mnt" >"$WORK/$name.diff"; then
        fail "$name: output differs (local < > mount)"; head -30 "$WORK/$name.diff" | sed 's/^/     /'; return
    fi
    if ! diff <(tree_manifest "$LOCAL/$name") <(tree_manifest "$MNT/$name") >"$WORK/$name.tdiff"; then
        fail "$name: trees differ (local < > mount)"; head -30 "$WORK/$name.tdiff" | sed 's/^/     /'; return
    fi
    if ! diff -r --no-dereference "$MNT/$name" "$EXPORT/$name" >"$WORK/$name.sdiff" 2>&1 \
        || ! diff <(tree_manifest "$MNT/$name") <(tree_manifest "$EXPORT/$name") >>"$WORK/$name.sdiff"; then
        fail "$name: mount and server export differ"; head -30 "$WORK/$name.sdiff" | sed 's/^/     /'; return
    fi
    pass "$name ($(wc -l <"$WORK/$name.mnt") lines of output identical, trees identical, server copy identical)"
}

# ---------------------------------------------------------------- source data
python3 - "$WORK/src" <<'EOF'
import os, random, sys
r = random.Random(7)
root = sys.argv[1]
os.makedirs(f"{root}/sub/deeper", exist_ok=True)
with open(f"{root}/big.bin", "wb") as f:
    f.write(r.randbytes(5 * 1024 * 1024 + 123))
for i in range(40):
    d = f"{root}/sub" if i % 2 else f"{root}/sub/deeper"
    with open(f"{d}/file{i:02}.txt", "w") as f:
        f.write("".join(r.choice("abcdefgh\n") for _ in range(r.randrange(0, 20000))))
open(f"{root}/empty", "w").close()
os.symlink("big.bin", f"{root}/link-to-big")
os.symlink("no-such-target", f"{root}/dangling")
os.link(f"{root}/sub/file01.txt", f"{root}/hardlink01")
os.chmod(f"{root}/sub/file03.txt", 0o600)
os.chmod(f"{root}/sub/file05.txt", 0o755)
os.utime(f"{root}/big.bin", ns=(1_000_000_000_123_456_789, 1_100_000_000_987_654_321))
EOF
SRC=$WORK/src

# ---------------------------------------------------------------- scenarios
scn_cp() {
    cp -r "$SRC" tree
    cp -p "$SRC/big.bin" big-p.bin
    stat -c '%s %a %X %Y' big-p.bin
    stat -c '%y' big-p.bin
    cp -a "$SRC" tree-a
    stat -c '%n %h %a %Y' tree-a/big.bin tree-a/hardlink01 tree-a/sub/file01.txt
    cat tree/sub/*.txt | md5sum
    cat tree/big.bin > cat-big.bin
    dd if=tree/big.bin of=dd-part.bin bs=64k skip=3 count=10 status=none
    dd if=/dev/zero of=sparse.bin bs=1 count=1 seek=3000000 status=none
    dd if=tree/big.bin of=dd-over.bin bs=1M status=none
    dd if=/dev/zero of=dd-over.bin bs=4096 count=3 seek=5 conv=notrunc status=none
    md5sum cat-big.bin dd-part.bin sparse.bin dd-over.bin
    cmp tree/big.bin "$SRC/big.bin" && echo same
}

# Debian's stock PostMark (dafs bench postmark runs it on the mount): the same seed does
# the same work (counts and bytes; rates are left out) and leaves no file.
scn_postmark() {
    local out
    out=$(printf 'set location %s\nset number 60\nset transactions 400\nset size 500 20000\nset read 4096\nset write 4096\nset seed 5\nrun\nquit\n' "$PWD" | postmark) || return 1
    grep -q '^Files:' <<<"$out" || { echo "no PostMark report"; return 1; }
    sed -n '/^Files:/,$p' <<<"$out" | sed 's/ (.*//'
    ls -A | wc -l
}

scn_tar() {
    tar -C "$SRC" --sort=name -cf src.tar .
    md5sum src.tar
    mkdir ex
    tar -C ex -xpf src.tar
    tar -C ex --sort=name --numeric-owner -cf ex.tar .
    md5sum ex.tar
    tar tvf ex.tar --numeric-owner
    tar -C ex -czf ex.tgz --sort=name --mtime=@0 --numeric-owner .
    mkdir ex2 && tar -C ex2 -xzf ex.tgz && diff -r --no-dereference ex ex2 && echo extracted-same
    stat -c '%n %h' ex/hardlink01 ex/sub/file01.txt
}

scn_sqlite() {
    sqlite3 t.db <<'SQL'
PRAGMA journal_mode=DELETE;
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL);
CREATE INDEX t_name ON t(name);
BEGIN;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10000)
INSERT INTO t(name, v) SELECT printf('row-%05d', x), x * 1.5 FROM c;
COMMIT;
SELECT count(*), sum(v), min(name), max(name) FROM t;
UPDATE t SET v = v * 2 WHERE id % 7 = 0;
DELETE FROM t WHERE id % 11 = 0;
SELECT count(*), sum(v) FROM t;
SELECT name FROM t WHERE name LIKE 'row-0999%' ORDER BY name;
PRAGMA integrity_check;
VACUUM;
PRAGMA integrity_check;
SQL
    sqlite3 t.db .dump | md5sum
    sqlite3 t.db 'PRAGMA journal_mode=WAL; INSERT INTO t(name, v) VALUES ("wal", 1); SELECT count(*) FROM t; PRAGMA wal_checkpoint(TRUNCATE); PRAGMA integrity_check;'
    sqlite3 t.db 'PRAGMA journal_mode=DELETE;'
}

scn_python() {
    python3 - <<'EOF'
import os, pathlib, shutil, stat
with open("data.bin", "wb") as f:
    f.write(bytes(range(256)) * 4096)
with open("data.bin", "r+b") as f:
    f.seek(1000); f.write(b"HELLO")
    f.seek(-10, os.SEEK_END); print(f.read())
    f.seek(1000); print(f.read(5))
    f.seek(0, os.SEEK_END); print(f.tell())
    f.truncate(5000); f.seek(0, os.SEEK_END); print(f.tell())
with open("append.txt", "a") as f:
    f.write("first\n")
with open("append.txt", "a") as f:
    f.write("second\n")
print(open("append.txt").read(), end="")
fd = os.open("rw.txt", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o640)
os.write(fd, b"0123456789"); os.pwrite(fd, b"xy", 3); print(os.pread(fd, 10, 0))
try:
    os.open("rw.txt", os.O_CREAT | os.O_EXCL | os.O_RDWR)
except FileExistsError:
    print("O_EXCL refused")
os.close(fd)
fd = os.open("rw.txt", os.O_RDWR | os.O_TRUNC); print(os.fstat(fd).st_size); os.close(fd)
p = pathlib.Path("pl")
(p / "a" / "b").mkdir(parents=True)
(p / "a" / "b" / "c.txt").write_text("pathlib\n")
print((p / "a" / "b" / "c.txt").read_text(), end="")
print(sorted(str(x) for x in p.rglob("*")))
os.rename("pl/a/b/c.txt", "pl/moved.txt")
os.replace("data.bin", "pl/moved.txt")
st = os.stat("pl/moved.txt")
print(st.st_size, stat.filemode(st.st_mode), st.st_nlink)
shutil.copytree("pl", "pl-copy")
print(sorted(os.listdir("pl-copy")), sorted(os.listdir(".")))
os.mkdir("d0"); os.rmdir("d0")
try:
    os.rmdir("pl")
except OSError as e:
    print("rmdir non-empty:", e.strerror)
try:
    os.unlink("no-such")
except FileNotFoundError:
    print("ENOENT")
# A temporary file used after unlink (the tmpfile pattern).
f = open("tmpf", "w+b"); os.unlink("tmpf"); f.write(b"still here"); f.flush(); f.seek(0)
print(f.read(), os.fstat(f.fileno()).st_nlink); f.close()
print(sorted(os.listdir(".")))
shutil.rmtree("pl-copy")
EOF
}

scn_make() {
    mkdir -p proj/src proj/include
    cat > proj/include/calc.h <<'EOF'
int add(int a, int b);
int mul(int a, int b);
EOF
    cat > proj/src/add.c <<'EOF'
#include "calc.h"
int add(int a, int b) { return a + b; }
EOF
    cat > proj/src/mul.c <<'EOF'
#include "calc.h"
int mul(int a, int b) { int r = 0; for (int i = 0; i < b; i++) r = add(r, a); return r; }
EOF
    cat > proj/src/main.c <<'EOF'
#include <stdio.h>
#include "calc.h"
int main(void) {
    for (int i = 1; i <= 12; i++) printf("%d * 7 = %d, %d + 7 = %d\n", i, mul(i, 7), i, add(i, 7));
    return 0;
}
EOF
    cat > proj/Makefile <<'EOF'
CFLAGS = -O2 -Wall -Iinclude
OBJS = build/add.o build/mul.o build/main.o
calc: $(OBJS)
	$(CC) -o $@ $(OBJS)
build/%.o: src/%.c include/calc.h | build
	$(CC) $(CFLAGS) -c $< -o $@
build:
	mkdir -p build
clean:
	rm -rf build calc
EOF
    make -s -C proj
    ./proj/calc
    make -q -C proj && echo "up to date"
    sleep 1.1; touch proj/src/add.c
    make -q -C proj || echo "rebuild needed after touch"
    make -s -C proj
    ./proj/calc | md5sum
    md5sum proj/build/*.o
}

scn_links() {
    echo content > a
    ln a b
    mkdir d && ln a d/c
    stat -c '%n %h %s' a b d/c
    [ "$(stat -c %i a)" = "$(stat -c %i b)" ] && [ "$(stat -c %i a)" = "$(stat -c %i d/c)" ] && echo "one inode"
    echo more >> b; cat a d/c
    rm a; stat -c '%n %h' b d/c
    ln -s b sym; ln -s d symdir; ln -s /nonexistent/x dangling; ln -s ../b d/up
    readlink sym symdir dangling d/up; readlink -f d/up | sed 's#.*/##'
    cat sym d/up symdir/c
    ls -l sym symdir dangling | awk '{print $1, $2, $(NF-2), $(NF-1), $NF}'
    stat -c '%n %F %s' sym dangling
    [ -e dangling ] || echo "dangling does not resolve"
    ln sym hardsym 2>/dev/null; stat -c '%n %F %h' hardsym sym
}

scn_truncate() {
    head -c 100000 "$SRC/big.bin" > f
    truncate -s 1M f; stat -c %s f; md5sum f
    truncate -s 100 f; stat -c %s f; md5sum f
    truncate -s +5000 f; stat -c %s f; md5sum f
    truncate -s 0 f; stat -c %s f
    printf abc > g; python3 -c 'import os; fd = os.open("g", os.O_RDWR); os.ftruncate(fd, 2); os.write(fd, b"Z"); os.ftruncate(fd, 10); os.close(fd)'
    od -c g
    : > g; stat -c %s g
}

scn_chmod() {
    echo x > f
    for m in 600 640 755 700 444 1777 2755 000 644; do chmod "$m" f; stat -c '%a %A' f; done
    mkdir dd; chmod 711 dd; stat -c '%a %F' dd
    chmod u+s,g+w f; stat -c '%a' f
    umask 0; printf y > u0; mkdir u0d; stat -c '%n %a' u0 u0d
    umask 077; printf y > u77; mkdir u77d; stat -c '%n %a' u77 u77d
    umask 022
    echo secret > private; chmod 600 private
    chown 65534:65534 f; stat -c '%u %g' f; chown 0:0 f
    mkdir sg; chgrp 65534 sg; chmod 2775 sg; touch sg/f; mkdir sg/d; ln -s f sg/l
    stat -c '%n %a %g' sg sg/f sg/d; stat -c '%n %g' sg/l
}

scn_touch() {
    touch -d '2001-02-03 04:05:06.123456789' f; stat -c '%x | %y' f
    touch -m -d '2010-01-01 00:00:00' f; stat -c '%x | %y' f
    touch -a -d '1999-12-31 23:59:59.5' f; stat -c '%x | %y' f
    touch -d '1960-06-01 12:00:00' old; stat -c '%y' old
    mkdir d; touch -d '2005-05-05 05:05:05' d; stat -c '%y' d
    touch -r f g; stat -c '%x | %y' g
    touch now; [ "$(( $(date +%s) - $(stat -c %Y now) ))" -le 5 ] && echo "now is recent"
    python3 -c 'import os; os.utime("f", ns=(5, 1234567890123456789)); s = os.stat("f"); print(s.st_atime_ns, s.st_mtime_ns)'
}

scn_rename() {
    echo 1 > a; echo 2 > b
    mv a b; cat b; ls
    mkdir d1 d2 d3; echo in > d1/x
    mv d1 d2/; ls d2 d2/d1
    mv -T d3 d2/d1 2>/dev/null || echo "refused over non-empty dir"
    mkdir e; mv -T e d3; ls -d d3
    mv d2/d1/x d2/d1/y; cat d2/d1/y
    mv d2/d1 top; cat top/y
    echo keep > k; ln -s k ks; mv ks ks2; readlink ks2; cat ks2
    mv -n b k; cat k
    python3 -c 'import os
try:
    os.rename("top", "top/inside")
except OSError as e:
    print("into itself:", e.strerror)'
    ls
}

scn_bigdir() {
    mkdir many
    python3 -c 'import os
for i in range(10000):
    open(f"many/f{i:05}", "w").close()'
    ls many | wc -l
    ls many | LC_ALL=C sort | md5sum
    ls -f many | grep -c '^f'
    find many -type f | wc -l
    python3 -c 'import os; print(len(os.listdir("many")), len(list(os.scandir("many"))))'
    ls -l many | tail -n +2 | awk '{print $1, $5}' | sort | uniq -c
    python3 -c 'import os
for i in range(0, 10000, 2):
    os.unlink(f"many/f{i:05}")'
    ls many | wc -l
    ls many | LC_ALL=C sort | md5sum
    rm -r many; ls
}

scn_xattr() {
    echo data > f
    setfattr -n user.color -v blue f
    setfattr -n user.empty f
    python3 -c 'import os; os.setxattr("f", "user.bin", bytes(range(256)))'
    getfattr -d --absolute-names f | grep -v '^# file'
    getfattr -n user.color --only-values f; echo
    python3 -c 'import os; print(sorted(os.listxattr("f")), os.getxattr("f", "user.bin") == bytes(range(256)))'
    setfattr -x user.color f
    getfattr -n user.color f 2>&1 | sed 's/^f: //'
    python3 -c 'import os, errno
try:
    os.setxattr("f", "user.empty", b"x", os.XATTR_CREATE)
except OSError as e:
    print("XATTR_CREATE on existing:", errno.errorcode[e.errno])
try:
    os.setxattr("f", "user.none", b"x", os.XATTR_REPLACE)
except OSError as e:
    print("XATTR_REPLACE on missing:", errno.errorcode[e.errno])'
    python3 -c 'import os; print(sorted(os.listxattr("f")))'
}

# DAFS_FUSE_SCENARIOS="cp tar" runs only those scenarios (default: all).
for s in ${DAFS_FUSE_SCENARIOS:-cp tar sqlite python make links truncate chmod touch rename bigdir xattr postmark}; do
    scenario "$s"
done

# The same programs on a server whose handle table holds only 16 handles: the kernel
# keeps far more inodes than that, so the mount keeps meeting STALE handles and must
# look them up again by name, invisibly to the programs.
printf 'handles_max = 16\nvolatile_handles = true\n' > "$WORK/tiny.toml"
mkdir -p "$WORK/tiny-export" "$WORK/m4"
start_dafsd tiny "$WORK/tiny-export" --config "$WORK/tiny.toml"
mounts+=("$WORK/m4")
DAFS_LOG=dafs_fuse=debug "$DAFS" mount "dafs://$ADDR/" "$WORK/m4" >"$WORK/m4.log" 2>&1 &
M4_PID=$!
if wait_mounted "$M4_PID" "$WORK/m4.log"; then
    (MNT=$WORK/m4 EXPORT=$WORK/tiny-export
     for s in cp python make links rename; do scenario "$s" -tiny-handle-table; done) | tee "$WORK/tiny.results"
    passed=$((passed + $(grep -c '^ok' "$WORK/tiny.results" || true))); failed=$((failed + $(grep -c '^FAIL' "$WORK/tiny.results" || true)))
    check "tiny handle table: STALE handles were met and looked up again" grep -q 'looked up again' "$WORK/m4.log"
    check "tiny handle table: dafs umount" "$DAFS" umount "$WORK/m4"
else
    fail "mount of the tiny-handle-table server"
fi

# ---------------------------------------------------------------- mount-only checks
# Namespaces without a DAFS counterpart are refused clearly.
check "xattr: trusted.* refused with ENOTSUP" python3 -c "
import os, errno, sys
open('$MNT/xa', 'w').close()
try:
    os.setxattr('$MNT/xa', 'trusted.x', b'1'); sys.exit('accepted')
except OSError as e:
    sys.exit(0 if e.errno == errno.EOPNOTSUPP else 'errno %s' % e.errno)"

check "statfs: df and stat -f in the mount show the export's file system" bash -c "
    [ \"\$(stat -f -c '%b %S %l %c' $MNT)\" = \"\$(stat -f -c '%b %S %l %c' $EXPORT)\" ] && df $MNT >/dev/null"

# Kernel permission checks against the server's modes and owners.
echo root-data > "$MNT/rootfile"; chmod 644 "$MNT/rootfile"
mkdir "$MNT/public"; chmod 1777 "$MNT/public"
NOBODY="setpriv --reuid=nobody --regid=nogroup --clear-groups"
check "permissions: nobody reads a 0644 root file" bash -c "$NOBODY cat $MNT/rootfile | grep -qx root-data"
check "permissions: nobody cannot write a 0644 root file" bash -c "! $NOBODY sh -c 'echo x >> $MNT/rootfile' 2>$WORK/perm.err && grep -q 'Permission denied' $WORK/perm.err && grep -qx root-data $MNT/rootfile"
check "permissions: nobody cannot read a 0600 root file" bash -c "chmod 600 $MNT/rootfile && ! $NOBODY cat $MNT/rootfile 2>/dev/null"
check "permissions: nobody cannot create in a 0755 root directory" bash -c "! $NOBODY touch $MNT/nobody-was-here 2>/dev/null && [ ! -e $EXPORT/nobody-was-here ]"
check "permissions: file nobody creates is owned by nobody (on the server too)" bash -c "$NOBODY sh -c 'echo mine > $MNT/public/n.txt' && [ \"\$(stat -c %U $MNT/public/n.txt)\" = nobody ] && [ \"\$(stat -c %U $EXPORT/public/n.txt)\" = nobody ] && $NOBODY sh -c 'echo more >> $MNT/public/n.txt'"
check "permissions: symlink and directory nobody creates are owned by nobody" bash -c "$NOBODY sh -c 'ln -s n.txt $MNT/public/nl && mkdir $MNT/public/nd' && [ \"\$(stat -c %U:%G $MNT/public/nl $EXPORT/public/nd | sort -u)\" = nobody:nogroup ]"
check "read-only mount refuses writes with EROFS, reads work" bash -c "
    $DAFS mount dafs://$MAIN_ADDR/ $WORK/m2 -d -o ro >/dev/null || exit 1
    r=0; if { echo x > $WORK/m2/ro-test; } 2>$WORK/ro.err; then r=1; fi
    grep -q 'Read-only file system' $WORK/ro.err || r=1
    cat $WORK/m2/c2o-absent 2>/dev/null; cat $WORK/m2/public/n.txt >/dev/null || r=1
    $DAFS umount $WORK/m2 || r=1; exit \$r"

# Close-to-open: a change made on the server is seen by the next open once the
# attribute cache (default 1 s) has expired; with attr_ttl_ms=0 at once.
check "dafs+shm:// URL mounts over shared memory" bash -c "
    $DAFS mount -d dafs+shm://$WORK/shm.sock/ $WORK/m2 >/dev/null || exit 1
    echo via-shm > $WORK/m2/shm-file; r=0; grep -qx via-shm $EXPORT/shm-file || r=1
    $DAFS umount $WORK/m2 || r=1; exit \$r"
# The path ordinary users take (fusermount3 opens /dev/fuse and passes the descriptor),
# forced as root: the suite cannot count on a setuid helper working for another user.
check "mount through fusermount3: allow_other, files, SIGTERM unmounts, exit 0" bash -c "
    DAFS_MOUNT_VIA_FUSERMOUNT=1 $DAFS mount dafs://$MAIN_ADDR/ $WORK/m2 -o allow_other >$WORK/fm.out 2>&1 &
    pid=\$!
    for i in \$(seq 100); do grep -q 'mounted' $WORK/fm.out && break; sleep 0.1; done
    grep -q ' $WORK/m2 fuse.dafs ' /proc/mounts || { cat $WORK/fm.out; exit 1; }
    r=0
    echo helper > $WORK/m2/helper-file && grep -qx helper $EXPORT/helper-file || r=1
    $NOBODY cat $WORK/m2/helper-file | grep -qx helper || r=1
    kill -TERM \$pid; wait \$pid || r=1
    ! grep -q ' $WORK/m2 ' /proc/mounts || r=1
    exit \$r"
check "mount through fusermount3 without allow_other: other users are kept out" bash -c "
    DAFS_MOUNT_VIA_FUSERMOUNT=1 $DAFS mount -d dafs://$MAIN_ADDR/ $WORK/m2 >/dev/null || exit 1
    r=0; ls $WORK/m2 >/dev/null || r=1
    ! $NOBODY ls $WORK/m2 2>/dev/null || r=1
    $DAFS umount $WORK/m2 || r=1; exit \$r"
check "consistency: server-side write visible after attr_ttl" bash -c "
    echo old > $MNT/c2o; cat $MNT/c2o >/dev/null
    printf 'new contents\n' > $EXPORT/c2o.tmp && mv $EXPORT/c2o.tmp $EXPORT/c2o
    sleep 1.3; grep -qx 'new contents' $MNT/c2o"
check "consistency: data rewritten in place on the server is read at the next open" bash -c "
    printf 'version-1\n' > $MNT/inplace; grep -qx version-1 $MNT/inplace &&
    printf 'version-2\n' | dd of=$EXPORT/inplace conv=notrunc status=none && grep -qx version-2 $MNT/inplace"
check "consistency: attr_ttl_ms=0 sees server-side appends at once" bash -c "
    $DAFS mount dafs://$MAIN_ADDR/ $WORK/m2 -d -o attr_ttl_ms=0 >/dev/null &&
    echo a > $WORK/m2/strict; cat $WORK/m2/strict >/dev/null; echo b >> $EXPORT/strict;
    [ \"\$(cat $WORK/m2/strict)\" = \"\$(printf 'a\nb')\" ]; r=\$?; $DAFS umount $WORK/m2; exit \$r"

# ---------------------------------------------------------------- caching and listings
# READDIRPLUS: a fresh mount (nothing cached) lists a directory with attributes; what
# `find -printf` shows from that listing (inode, type, mode, links, owner, size, mtime)
# must equal the server's own view, and the lookups it saved must have been chained.
mkdir -p "$EXPORT/plus/sub"
for i in $(seq 300); do head -c $((i * 7)) /dev/zero > "$EXPORT/plus/f$i"; done
chmod 600 "$EXPORT/plus/f7"; ln "$EXPORT/plus/f1" "$EXPORT/plus/hard"; ln -s f2 "$EXPORT/plus/sym"
plus_listing() { (cd "$1" && find . -mindepth 1 -printf '%i %y %m %n %U %G %s %T@ %p\n' | LC_ALL=C sort); }
check "readdirplus: a cold listing's attributes equal the server's (300 entries)" bash -c "
    DAFS_LOG=dafs_fuse=debug $DAFS mount dafs://$MAIN_ADDR/ $WORK/m2 >$WORK/plus.log 2>&1 &
    for i in \$(seq 100); do grep -q ' $WORK/m2 ' /proc/mounts && break; sleep 0.1; done
    $(declare -f plus_listing); r=0
    plus_listing $WORK/m2/plus > $WORK/plus.mnt; plus_listing $EXPORT/plus > $WORK/plus.srv
    diff $WORK/plus.srv $WORK/plus.mnt || r=1
    grep -q 'readdirplus: .* entries' $WORK/plus.log || { echo 'no READDIRPLUS served'; r=1; }
    sleep 1.2  # attributes expired: stat now looks each name up and asks for attributes
    (cd $WORK/m2/plus && for f in *; do stat -c '%i %h %s %Y %n' \$f; done) > $WORK/plus.stat
    (cd $EXPORT/plus && for f in *; do stat -c '%i %h %s %Y %n' \$f; done) | diff - $WORK/plus.stat || r=1
    $DAFS umount $WORK/m2 || r=1; exit \$r"
# Close-to-open between two clients (two mounts): pages are kept across opens while the
# file is unchanged (fincore counts the pages the kernel holds after its own open), and
# dropped at the open after another client's in-place rewrite, which is then read.
check "cache=cto: unchanged file keeps its pages across opens; another client's change is read at the next open" bash -c "
    $DAFS mount -d dafs://$MAIN_ADDR/ $WORK/m2 >/dev/null || exit 1; r=0
    head -c 65536 /dev/urandom > $MNT/cto; cat $WORK/m2/cto > /dev/null
    [ \"\$(fincore -n -o PAGES $WORK/m2/cto | tr -d ' ')\" = 16 ] || { echo 'pages not kept'; fincore $WORK/m2/cto; r=1; }
    head -c 65536 /dev/urandom | dd of=$MNT/cto conv=notrunc status=none
    cmp $MNT/cto $WORK/m2/cto || { echo 'stale data after reopen'; r=1; }
    $DAFS umount $WORK/m2 || r=1; exit \$r"
check "cache=strict: another client's change is read at once through a file opened before it" bash -c "
    $DAFS mount -d dafs://$MAIN_ADDR/ $WORK/m2 -o cache=strict >/dev/null || exit 1; r=0
    printf 'first-\n' > $MNT/strictdata
    python3 -c '
import sys, time
f = open(sys.argv[1], \"rb\", buffering=0); a = f.read()
open(sys.argv[2], \"r+b\").write(b\"second\")
f.seek(0); b = f.read()
sys.exit(0 if (a, b) == (b\"first-\n\", b\"second\n\") else print(a, b) or 1)' $WORK/m2/strictdata $MNT/strictdata || r=1
    $DAFS umount $WORK/m2 || r=1; exit \$r"
check "writeback_cache: buffered writes reach the server by fsync and by close" bash -c "
    $DAFS mount -d dafs://$MAIN_ADDR/ $WORK/m2 -o writeback_cache >/dev/null || exit 1; r=0
    python3 -c '
import os, sys
m, e = sys.argv[1], sys.argv[2]
fd = os.open(m, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b\"a\" * 5000); os.pwrite(fd, b\"XY\", 10)
os.fsync(fd)
assert open(e, \"rb\").read() == b\"a\" * 10 + b\"XY\" + b\"a\" * 4988, \"not on the server after fsync\"
os.write(fd, b\"tail\"); os.close(fd)
assert open(e, \"rb\").read().endswith(b\"atail\"), \"not on the server after close\"
assert os.path.getsize(m) == 5004' $WORK/m2/wb $EXPORT/wb || r=1
    $DAFS umount $WORK/m2 || r=1; exit \$r"

# ---------------------------------------------------------------- unmounting
foreground_mount() { # mountpoint -> sets FG_PID
    DAFS_LOG=info "$DAFS" mount "dafs://$MAIN_ADDR/" "$1" >"$WORK/fg.out" 2>&1 &
    FG_PID=$!
    wait_mounted "$FG_PID" "$WORK/fg.out" || true
}
check "dafs umount of a directory that is not mounted: clear error, exit 1" bash -c "
    ! $DAFS umount $WORK/m3 2>$WORK/um.err; grep -q 'not a dafs mount point' $WORK/um.err &&
    { $DAFS umount $WORK/m3 2>/dev/null; [ \$? -eq 1 ]; }"
check "dafs mount on a missing directory: clear error, exit 1" bash -c "
    ! $DAFS mount dafs://$MAIN_ADDR/ $WORK/no-such-dir 2>$WORK/mm.err; grep -q 'No such file' $WORK/mm.err"
check "dafs mount with an unknown -o option: exit 2" bash -c "$DAFS mount dafs://$MAIN_ADDR/ $WORK/m3 -o frobnicate 2>/dev/null; [ \$? -eq 2 ]"
check "dafs mount to a closed port: exit 3" bash -c "$DAFS mount dafs://127.0.0.1:1/ $WORK/m3 2>/dev/null; [ \$? -eq 3 ] && ! grep -q ' $WORK/m3 ' /proc/mounts"

mounts+=("$WORK/m2" "$WORK/m3")
foreground_mount "$WORK/m2"
check "SIGTERM to the mount process unmounts and exits 0" bash -c "
    grep -q ' $WORK/m2 ' /proc/mounts && kill -TERM $FG_PID &&
    for i in \$(seq 100); do kill -0 $FG_PID 2>/dev/null || break; sleep 0.1; done;
    ! kill -0 $FG_PID 2>/dev/null && ! grep -q ' $WORK/m2 ' /proc/mounts"
rc=0; reap "$FG_PID" || rc=$?
[ "$rc" -eq 0 ] && pass "SIGTERM: exit status 0" || fail "SIGTERM: exit status $rc"

# Background jobs of a script start with SIGINT ignored; python resets it to default
# so the mount process gets it as it would from a terminal's ^C.
python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
    "$DAFS" mount "dafs://$MAIN_ADDR/" "$WORK/m2" >"$WORK/fg.out" 2>&1 &
FG_PID=$!
wait_mounted "$FG_PID" "$WORK/fg.out" || true
check "SIGINT to the mount process unmounts" bash -c "
    grep -q ' $WORK/m2 ' /proc/mounts && kill -INT $FG_PID &&
    for i in \$(seq 100); do kill -0 $FG_PID 2>/dev/null || break; sleep 0.1; done;
    ! kill -0 $FG_PID 2>/dev/null && ! grep -q ' $WORK/m2 ' /proc/mounts"
reap "$FG_PID" >/dev/null 2>&1 || true

foreground_mount "$WORK/m2"
check "dafs umount unmounts and the mount process exits 0" bash -c "
    $DAFS umount $WORK/m2 && ! grep -q ' $WORK/m2 ' /proc/mounts &&
    for i in \$(seq 100); do kill -0 $FG_PID 2>/dev/null || break; sleep 0.1; done; ! kill -0 $FG_PID 2>/dev/null"
rc=0; reap "$FG_PID" || rc=$?
[ "$rc" -eq 0 ] && pass "dafs umount: mount process exit status 0" || fail "dafs umount: mount process exit status $rc"
cat "$WORK/fg.out"

foreground_mount "$WORK/m2"
(cd "$WORK/m2" && sleep 3) &
BUSY=$!
sleep 0.3
check "dafs umount of a busy mount fails clearly; --lazy detaches it" bash -c "
    ! $DAFS umount $WORK/m2 2>$WORK/busy.err && grep -q 'busy' $WORK/busy.err &&
    $DAFS umount --lazy $WORK/m2 && ! grep -q ' $WORK/m2 ' /proc/mounts"
wait "$BUSY" 2>/dev/null || true
check "lazy-unmounted mount process exits once the last user leaves" bash -c "
    for i in \$(seq 100); do kill -0 $FG_PID 2>/dev/null || break; sleep 0.1; done; ! kill -0 $FG_PID 2>/dev/null"
reap "$FG_PID" >/dev/null 2>&1 || true

foreground_mount "$WORK/m2"
(cd "$WORK/m2" && sleep 3) &
BUSY=$!
sleep 0.3
check "SIGTERM on a busy mount detaches it; the process exits once it is no longer used" bash -c "
    kill -TERM $FG_PID; for i in \$(seq 50); do grep -q ' $WORK/m2 ' /proc/mounts || break; sleep 0.1; done
    ! grep -q ' $WORK/m2 ' /proc/mounts && kill -0 $FG_PID 2>/dev/null && kill -0 $BUSY 2>/dev/null &&
    while kill -0 $BUSY 2>/dev/null; do sleep 0.1; done &&
    for i in \$(seq 100); do kill -0 $FG_PID 2>/dev/null || break; sleep 0.1; done; ! kill -0 $FG_PID 2>/dev/null"
wait "$BUSY" 2>/dev/null || true
reap "$FG_PID" >/dev/null 2>&1 || true

foreground_mount "$WORK/m2"
check "fusermount3 -u unmounts; the mount process exits" bash -c "
    fusermount3 -u $WORK/m2 && ! grep -q ' $WORK/m2 ' /proc/mounts &&
    for i in \$(seq 100); do kill -0 $FG_PID 2>/dev/null || break; sleep 0.1; done; ! kill -0 $FG_PID 2>/dev/null"
rc=0; reap "$FG_PID" || rc=$?
[ "$rc" -eq 0 ] && pass "fusermount3 -u: mount process exit status 0" || fail "fusermount3 -u: mount process exit status $rc"

# A server killed under a mount, over TCP and over shared memory: operations fail
# within seconds (EIO or ENOTCONN), and the mount can still be unmounted.
server_killed() { # label dafsd-args...
    local label=$1; shift
    rm -rf "$WORK/victim"; mkdir -p "$WORK/victim"
    start_dafsd "victim-$label" "$WORK/victim" "$@"
    local vpid=$PID out mpid
    if ! out=$("$DAFS" mount "dafs://$ADDR/" "$WORK/m3" -d); then fail "server killed ($label): mount failed"; return; fi
    mpid=$(echo "$out" | sed -n 's/.*(pid \([0-9]*\)).*/\1/p')
    echo before > "$WORK/m3/f"
    exec 7<"$WORK/m3/f"
    kill -9 "$vpid"; sleep 0.2
    check "server killed ($label): operations fail within 5 s with EIO/ENOTCONN" bash -c "
        ! timeout 5 cat $WORK/m3/f >/dev/null 2>$WORK/dead.err
        ! timeout 5 cat <&7 >/dev/null 2>>$WORK/dead.err
        ! timeout 5 touch $WORK/m3/new 2>>$WORK/dead.err
        ! timeout 5 ls $WORK/m3/sub-does-not-exist-yet 2>>$WORK/dead.err
        cat $WORK/dead.err; ! grep -q 'Terminated\|timed out' $WORK/dead.err &&
        [ \$(grep -Ec 'Input/output error|not connected' $WORK/dead.err) -ge 4 ]"
    { exec 7<&-; } 2>/dev/null  # close fails with EIO on the dead mount: expected
    check "server killed ($label): dafs umount still works and the mount process exits" bash -c "
        timeout 10 $DAFS umount $WORK/m3 && ! grep -q ' $WORK/m3 ' /proc/mounts &&
        for i in \$(seq 100); do kill -0 $mpid 2>/dev/null || break; sleep 0.1; done; ! kill -0 $mpid 2>/dev/null"
}
server_killed tcp --no-shm
server_killed shm --shm-socket "$WORK/victim.sock"

# A server restarted under a mount, on the same address: the session is gone with it,
# so the mount starts a new one; the first operation may fail, then everything goes on
# (nodes are looked up again by name). Connection breaks without a restart never show:
# the client library re-binds the session by itself.
server_restarted() {
    rm -rf "$WORK/rs"; mkdir -p "$WORK/rs" "$WORK/m4"
    local port p1 p2 out mpid
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$BIN/dafsd" "$WORK/rs" --listen "127.0.0.1:$port" --no-shm --no-admin >"$WORK/rs1.out" 2>&1 & p1=$!; disown "$p1"; pids+=("$p1")
    for _ in $(seq 100); do grep -q '^dafsd listening' "$WORK/rs1.out" 2>/dev/null && break; sleep 0.1; done
    if ! out=$("$DAFS" mount "dafs://127.0.0.1:$port/" "$WORK/m4" -d); then fail "server restarted: mount failed"; return; fi
    mpid=$(echo "$out" | sed -n 's/.*(pid \([0-9]*\)).*/\1/p')
    mkdir "$WORK/m4/d" && echo one > "$WORK/m4/d/f"
    kill "$p1"; wait_gone "$p1" 10
    "$BIN/dafsd" "$WORK/rs" --listen "127.0.0.1:$port" --no-shm --no-admin >"$WORK/rs2.out" 2>&1 & p2=$!; disown "$p2"; pids+=("$p2")
    for _ in $(seq 100); do grep -q '^dafsd listening' "$WORK/rs2.out" 2>/dev/null && break; sleep 0.1; done
    for _ in $(seq 25); do timeout 5 cat "$WORK/m4/d/f" >/dev/null 2>&1 && break; sleep 0.2; done
    check "server restarted: the mount continues with a new session (read old, write new)" bash -c "
        [ \"\$(timeout 5 cat $WORK/m4/d/f)\" = one ] && echo two > $WORK/m4/d/g && [ \"\$(cat $WORK/rs/d/g)\" = two ] &&
        [ \"\$(ls $WORK/m4/d | tr '\n' ' ')\" = 'f g ' ]"
    check "server restarted: dafs umount, the mount process exits" bash -c "
        timeout 10 $DAFS umount $WORK/m4 && ! grep -q ' $WORK/m4 ' /proc/mounts &&
        for i in \$(seq 100); do kill -0 $mpid 2>/dev/null || break; sleep 0.1; done; ! kill -0 $mpid 2>/dev/null"
}
server_restarted

# A mount process killed with SIGKILL leaves a dead mount ("Transport endpoint is not
# connected"); dafs umount still removes it.
out=$("$DAFS" mount "dafs://$MAIN_ADDR/" "$WORK/m2" -d)
kpid=$(echo "$out" | sed -n 's/.*(pid \([0-9]*\)).*/\1/p')
kill -9 "$kpid"; sleep 0.3
check "mount process SIGKILLed: access fails at once, dafs umount cleans up" bash -c "
    ! timeout 5 ls $WORK/m2 2>$WORK/k.err; grep -q 'not connected' $WORK/k.err &&
    timeout 10 $DAFS umount $WORK/m2 && ! grep -q ' $WORK/m2 ' /proc/mounts && ls $WORK/m2 >/dev/null"

# The main mount, unmounted last by dafs umount, leaves nothing behind.
check "main mount: dafs umount, process exits, /proc/mounts clean" bash -c "
    $DAFS umount $MNT && for i in \$(seq 100); do kill -0 $MOUNT_PID 2>/dev/null || break; sleep 0.1; done;
    ! kill -0 $MOUNT_PID 2>/dev/null && ! grep -q '$WORK' /proc/mounts"

echo "fuse: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
