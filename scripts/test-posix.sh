#!/usr/bin/env bash
# POSIX conformance (issue 19): tests/posix/posixtest.c (main, the cases by area in
# tests/posix/posix_*.c), the project's own suite of named cases (errno of every error
# case, ownership, modes, times, special files, rename semantics, sticky and set-group-ID
# directories, long names, symlink attributes...), run as root from inside the directory
# under test, in three places:
#   local    a directory on the same file system as dafsd's export (the reference: the
#            suite must pass there completely);
#   mount    a FUSE mount of the export (`dafs mount -d -o allow_other`: the identity
#            cases run as other users, who must be let in);
#   preload  under LD_PRELOAD=libdafs_preload.so, the directory under the virtual prefix
#            of DAFS_MOUNT=/dafs-posix-PID=dafs://ADDR/.
# Server configuration (the columns "mount" and "preload"): dafsd --identity asserted
# --no-root-squash. Behaving like a local file system for several users needs the server to
# act, per request, as the user who made it: the client states its caller's uid, gid and
# groups with SET_CRED (the mount: those of each FUSE request; the preload library: the
# process's), dafsd (root) switches its file-system ids to them and ext4 itself enforces
# permissions, sticky directories, the ownership of new objects, set-group-ID inheritance
# and set-ID clearing; root stays root. Both clients send SET_CRED (a client that did not
# would run as the anonymous user 65534 and could not even make a case's directory).
# The columns "mount.server" and "preload.server" run the same against a dafsd with its
# default identity (every request as dafsd's own user, root): the mount relies on the
# kernel's default_permissions there, the preload library has no per-user checks at all.
# They track everything that does not depend on SET_CRED. DAFS_POSIX_CONFIGS="asserted"
# (or "server") runs one configuration only.
#
# Prints a table (per case: checks, local / mount / preload passes), the percentage of
# what local passes, and last "posix: N passed, N failed", judged by tests/posix/compare.py
# against tests/posix/known-differences.tsv: a check failing locally, a difference not
# listed, a listed difference seen with another result, or a listed one that no longer
# differs ("now passes: remove from known-differences.tsv") each count as failed.
# DAFS_POSIX_KEEP=1 keeps the work directory (results in local.tsv, mount.tsv, ...);
# DAFS_POSIX_WRITE_KNOWN=FILE writes today's differences, one line per check, as a
# candidate list (reasons taken from the entries that cover them).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# ---------------------------------------------------------------- dependencies
source scripts/ensure-deps.sh
need=()
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
    echo "==> installing Debian packages: ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "error: scripts/test-posix.sh must run as root (the suite switches users, the mount needs allow_other)" >&2
    echo "posix: 0 passed, 1 failed"
    exit 1
fi
if [ ! -c /dev/fuse ]; then
    echo "error: /dev/fuse is missing: the mount column cannot run (modprobe fuse)." >&2
    echo "posix: 0 passed, 1 failed"
    exit 1
fi

# ---------------------------------------------------------------- build
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
export DAFS_PROFILE=${DAFS_PROFILE:-debug}
echo "==> cargo build ($DAFS_PROFILE) -p dafs-preload -p dafs-cli"
source scripts/lib-build.sh
cargo_build -p dafs-preload -p dafs-cli
BIN=$CARGO_TARGET_DIR/$DAFS_PROFILE
LIB=$BIN/libdafs_preload.so
DAFS=$BIN/dafs
[ -f "$LIB" ] || { echo "error: $LIB was not built" >&2; exit 1; }

WORK=$(mktemp -d /tmp/dafs-test-posix.XXXXXX)
chmod 755 "$WORK" # the identity cases run as other users: they must get in
pids=()
MNT=$WORK/mnt
source scripts/lib-dafsd.sh
DAFSD=$BIN/dafsd
cleanup() {
    set +e
    if grep -q " $MNT " /proc/mounts; then "$DAFS" umount "$MNT" 2>/dev/null || "$DAFS" umount --lazy "$MNT"; fi
    stop_pids
    if [ -n "${DAFS_POSIX_KEEP:-}" ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
echo "==> cc tests/posix/posixtest.c tests/posix/posix_*.c"
cc -std=gnu11 -Wall -Wextra -Werror -O1 tests/posix/posixtest.c tests/posix/posix_*.c -o "$WORK/posixtest"

# run NAME DIR [env...]: the suite in DIR, results in $WORK/NAME.tsv (stderr: NAME.err).
# Every run has a time limit: a hang fails the column, never blocks CI.
run() {
    local name=$1 dir=$2; shift 2
    local rc=0
    # A fresh real working directory per run: what the preload library does not
    # interpose (mknod, bind...) resolves relative paths there.
    mkdir -m 755 "$WORK/cwd-$name"
    (cd "$WORK/cwd-$name" && env "$@" timeout -k 10 120 "$WORK/posixtest" "$dir") >"$WORK/$name.tsv" 2>"$WORK/$name.err" || rc=$?
    echo "    $name: $(grep -c $'\tok' "$WORK/$name.tsv" || true) ok, $(grep -c $'\tFAIL' "$WORK/$name.tsv" || true) failed (exit $rc)"
    grep -q '^# end' "$WORK/$name.tsv" || { echo "    $name: did not run to its end; stderr:"; tail -5 "$WORK/$name.err" | sed 's/^/      /'; }
}
mkdir -p "$WORK/local" "$MNT"
chmod 755 "$WORK/local" "$MNT"

FSTYPE=$(df --output=fstype "$WORK" | tail -1)
echo "==> local directory ($FSTYPE)"
run local "$WORK/local"

# columns NAME_SUFFIX DAFSD-ARGS...: one dafsd, its export mounted with FUSE and used
# through the preload library; columns mountSUFFIX and preloadSUFFIX.
columns() {
    local sfx=$1; shift
    local export=$WORK/export$sfx
    mkdir -m 755 "$export"
    start_dafsd "dafsd$sfx" "$export" "$@"
    local addr=$ADDR dpid=$PID
    echo "==> dafsd on $addr (export $export; ${*:---identity server})"
    # The directories the suite runs in are made on the server's disk, as the local one
    # is: owned by root, mode 0755.
    mkdir -m 755 "$export/mount-run" "$export/preload-run"
    echo "==> mount$sfx: FUSE mount (dafs mount -d -o allow_other)"
    local out
    if out=$("$DAFS" mount -d -o allow_other "dafs://$addr/" "$MNT" 2>&1); then
        run "mount$sfx" "$MNT/mount-run"
        "$DAFS" umount "$MNT" || "$DAFS" umount --lazy "$MNT" || true
    else
        echo "$out" | sed 's/^/    /'
        echo "    mount failed: every check of the column is missing"
        : >"$WORK/mount$sfx.tsv"
    fi
    local m=/dafs-posix-$$
    [ ! -e "$m" ] || { echo "error: $m exists locally" >&2; exit 1; }
    echo "==> preload$sfx: LD_PRELOAD (DAFS_MOUNT=$m=dafs://$addr/)"
    run "preload$sfx" "$m/preload-run" LD_PRELOAD="$LIB" DAFS_MOUNT="$m=dafs://$addr/"
    if ! kill -0 "$dpid" 2>/dev/null; then
        echo "error: dafsd$sfx died during the runs" >&2
        tail -20 "$WORK/dafsd$sfx.err" >&2
    fi
    cols+=("mount$sfx=$WORK/mount$sfx.tsv" "preload$sfx=$WORK/preload$sfx.tsv")
}
cols=()
for cfg in ${DAFS_POSIX_CONFIGS:-asserted server}; do
    case "$cfg" in
        asserted) columns "" --identity asserted --no-root-squash ;;
        server) columns .server ;;
        *) echo "error: DAFS_POSIX_CONFIGS: $cfg: expected asserted and/or server" >&2; exit 1 ;;
    esac
done

echo "==> comparison (tests/posix/known-differences.tsv)"
write=()
[ -n "${DAFS_POSIX_WRITE_KNOWN:-}" ] && write=(--write-known "$DAFS_POSIX_WRITE_KNOWN")
set +e
python3 tests/posix/compare.py tests/posix/known-differences.tsv "$WORK/local.tsv" "${cols[@]}" \
    --local-name "$FSTYPE" "${write[@]}"
rc=$?
set -e
exit "$rc"
