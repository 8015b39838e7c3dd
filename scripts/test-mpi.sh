#!/usr/bin/env bash
# MPI-IO tests against a real dafsd over loopback:
#   - builds libdafs, dafsd and libdafs_preload.so (dev profile unless DAFS_PROFILE=release),
#     installs libdafs + the OMPIO components fs_dafs/fbtl_dafs into a temporary prefix
#     (scripts/install-ompio.sh), compiles tests/mpi/test_ompio*.c with mpicc.openmpi and
#     mpicc.mpich;
#   - starts dafsd (TCP + shared memory) and a second "victim" dafsd (TCP only);
#   - Open MPI (mpirun.openmpi -np 2 and -np 4, OMPI_MCA_mca_base_component_path = Open
#     MPI's own directories + ours): independent and collective writes/reads, non-blocking
#     I/O, MPI_THREAD_MULTIPLE, vector and subarray file views, set_size/get_size/
#     preallocate/sync/delete and error classes, shared file pointers, over TCP and
#     shared memory, a custom name prefix, bad configuration, each memory mode
#     (percall, library, cache) with its counters checked, registration cache hits/evictions/invalidations,
#     and the victim killed under a running job (MPI errors within the deadline);
#   - MPICH (mpirun.mpich -np 2) with LD_PRELOAD=libdafs_preload.so on a prefix path:
#     independent I/O, views, sizes, and non-blocking I/O (MPI_File_iwrite_at/iread_at +
#     MPI_Wait/MPI_Testall, also from 4 threads: ROMIO runs it on POSIX AIO, served by
#     the library's aio_* calls);
#   - every file the jobs wrote is compared byte for byte with the export directory;
#   - the MPI-IO benchmark's own correctness test (adapters/ompio/bench/test.sh).
# Prints "mpi: N passed, N failed" last.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# ---------------------------------------------------------------- dependencies
source scripts/ensure-deps.sh
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need=()
command -v mpicc.openmpi >/dev/null 2>&1 || need+=(libopenmpi-dev)
command -v mpirun.openmpi >/dev/null 2>&1 || need+=(openmpi-bin)
command -v mpicc.mpich >/dev/null 2>&1 || need+=(libmpich-dev)
command -v mpirun.mpich >/dev/null 2>&1 || need+=(mpich)
command -v make >/dev/null 2>&1 && command -v cc >/dev/null 2>&1 || need+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
if [ ${#need[@]} -gt 0 ]; then
    echo "==> installing Debian packages: ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

# ---------------------------------------------------------------- build
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
export DAFS_PROFILE=${DAFS_PROFILE:-debug}
echo "==> cargo build ($DAFS_PROFILE) -p dafs-capi -p dafs-cli -p dafs-preload"
source scripts/lib-build.sh
cargo_build -p dafs-capi -p dafs-cli -p dafs-preload
REL=$CARGO_TARGET_DIR/$DAFS_PROFILE
BUILD=$CARGO_TARGET_DIR/mpi-tests
PREFIX=$BUILD/prefix
rm -rf "$PREFIX"
mkdir -p "$BUILD"
DAFS_NO_BUILD=1 scripts/install-ompio.sh "$PREFIX" >"$BUILD/install.log" 2>&1 \
    || { cat "$BUILD/install.log"; exit 1; }
source "$PREFIX/lib/dafs-ompio/env.sh"
CWARN="-std=gnu11 -Wall -Wextra -Werror -O1"
mpicc.openmpi $CWARN tests/mpi/test_ompio.c tests/mpi/test_ompio_more.c -o "$BUILD/test_ompio" -pthread
mpicc.mpich $CWARN tests/mpi/test_ompio.c tests/mpi/test_ompio_more.c -o "$BUILD/test_ompio_mpich" -pthread
PRELOAD=$REL/libdafs_preload.so
[ -f "$PRELOAD" ] || { echo "error: $PRELOAD was not built" >&2; exit 1; }

# ---------------------------------------------------------------- servers
WORK=$(mktemp -d /tmp/dafs-test-mpi.XXXXXX)
pids=()
source scripts/lib-dafsd.sh
DAFSD=$REL/dafsd
cleanup() {
    stop_pids
    rm -rf "$WORK"
}
trap cleanup EXIT
EXPORT=$WORK/export
mkdir -p "$EXPORT" "$WORK/victim"
start_dafsd main "$EXPORT" --shm-socket "$WORK/dafsd.sock"
MAIN_ADDR=$ADDR MAIN_SHM=$SHM
[ -n "$MAIN_SHM" ] || { echo "error: dafsd did not offer shared memory" >&2; exit 1; }
start_dafsd victim "$WORK/victim" --no-shm
VICTIM_ADDR=$ADDR VICTIM_PID=$PID
echo "==> dafsd on $MAIN_ADDR and $MAIN_SHM (export $EXPORT); victim on $VICTIM_ADDR"

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; }

# ompi LABEL NP [VAR=VALUE...] -- ARGS...: run test_ompio under Open MPI; its "ok"/"FAIL"
# lines count, and so does its exit status. Output in $WORK/LABEL.out.
ompi() {
    local label=$1 np=$2; shift 2
    local envs=(-x OMPI_MCA_mca_base_component_path -x OMPI_MCA_fs_dafs_server="$MAIN_ADDR"
                -x OMPI_MCA_fbtl_dafs_verbose_stats=1)
    while [ "$1" != -- ]; do envs+=(-x "$1"); shift; done
    shift
    run_counted "$label" timeout 120 mpirun.openmpi --allow-run-as-root --oversubscribe \
        -np "$np" "${envs[@]}" "$BUILD/test_ompio" "$@"
}
run_counted() {
    local label=$1; shift
    local out=$WORK/$label.out rc
    set +e
    "$@" >"$out" 2>&1
    rc=$?
    set -e
    local ok bad
    ok=$(grep -c '^ok ' "$out" || true)
    bad=$(grep -c '^FAIL ' "$out" || true)
    passed=$((passed + ok)); failed=$((failed + bad))
    grep -E '^(ok|FAIL) ' "$out" | sed "s/^\(ok\|FAIL\) */&[$label] /" || true
    if [ "$rc" -eq 0 ] && [ "$ok" -gt 0 ]; then
        pass "[$label] exit status 0"
    else
        fail "[$label] exit status $rc"
        tail -25 "$out" | sed 's/^/    | /'
    fi
}
# same_as_expected NAME SEED NBYTES: the export's file equals the pattern.
same_as_expected() {
    if cmp -s "$EXPORT/$1" <("$BUILD/test_ompio" expect "$2" "$3"); then
        pass "export/$1 equals the expected $3 bytes"
    else
        fail "export/$1 differs from the expected $3 bytes ($(stat -c %s "$EXPORT/$1" 2>/dev/null || echo missing))"
    fi
}
# stat_of LABEL RANK KEY: a counter from the dafs_ompio_stats line of that rank.
stat_of() {
    sed -n "s/^dafs_ompio_stats rank=$2 .* $3=\([0-9]*\).*/\1/p" "$WORK/$1.out" | head -1
}
# expect_stat LABEL RANK KEY OP VALUE: check a counter (OP: -eq -ge -gt ...).
expect_stat() {
    local v
    v=$(stat_of "$1" "$2" "$3")
    if [ -n "$v" ] && [ "$v" "$4" "$5" ]; then
        pass "[$1] rank $2 $3=$v ($4 $5)"
    else
        fail "[$1] rank $2 $3=${v:-missing}, expected $4 $5"
    fi
}

MiB=1048576
# ---------------------------------------------------------------- Open MPI
echo "==> Open MPI $(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p') with fs_dafs/fbtl_dafs"
ompi rw-np2-tcp 2 OMPI_MCA_fs_dafs_provider=tcp -- rw dafs:/rw2.dat $MiB
same_as_expected rw2.dat 1 $((2 * MiB))
expect_stat rw-np2-tcp 0 direct_ops -gt 0
ompi rw-np4-shm 4 OMPI_MCA_fs_dafs_server="$MAIN_SHM" -- rw dafs:rw4.dat $((MiB / 4 + 123))
same_as_expected rw4.dat 1 $((4 * (MiB / 4 + 123)))
if grep -q '^dafs_ompio_stats rank=0 provider=shm ' "$WORK/rw-np4-shm.out"; then
    pass "[rw-np4-shm] the component used shared memory"
else
    fail "[rw-np4-shm] the component did not use shared memory"
fi
ompi nb-np2 2 -- nb dafs:/nb2.dat $MiB
same_as_expected nb2.dat 2 $((2 * 4 * MiB))
expect_stat nb-np2 0 nb_requests -ge 9
ompi nb-np4-small 4 -- nb dafs:/nb4.dat 1000
same_as_expected nb4.dat 2 $((4 * 4 * 1000))
expect_stat nb-np4-small 1 inline_ops -gt 0
ompi vector-np4 4 -- vector dafs:/vector.dat 4000
same_as_expected vector.dat 3 $((4 * 16 * 4000))
ompi subarray-np4 4 -- subarray dafs:/subarray.dat 700
same_as_expected subarray.dat 4 $((700 * 700 * 4))
ompi sizes-np2 2 -- sizes dafs:/sizes.dat
if [ ! -e "$EXPORT/sizes.dat" ] && [ ! -e "$EXPORT/sizes.dat.tmp" ]; then
    pass "deleted files are gone from the export"
else
    fail "deleted files are still in the export"
fi
ompi threads-np2 2 -- threads dafs:/threads.dat 300000
same_as_expected threads.dat 17 $((2 * 4 * 300000))
ompi shared-np4 4 -- shared dafs:/shared.dat
ompi prefix-np2 2 OMPI_MCA_fs_dafs_prefix=dafsfs:// -- rw dafsfs://prefixed.dat 4096
same_as_expected prefixed.dat 1 $((2 * 4096))

echo "==> memory modes and the registration cache"
ompi mem-percall 2 OMPI_MCA_fbtl_dafs_mem=percall -- regcache dafs:/percall.dat $MiB
expect_stat mem-percall 0 reg_hits -eq 0
expect_stat mem-percall 0 registrations -ge 15
ompi mem-library 2 OMPI_MCA_fbtl_dafs_mem=library -- regcache dafs:/library.dat $MiB
expect_stat mem-library 0 registrations -eq 0
expect_stat mem-library 0 direct_ops -ge 15
ompi mem-cache 2 -- regcache dafs:/cache.dat $MiB
for r in 0 1; do
    expect_stat mem-cache $r reg_hits -ge 5
    expect_stat mem-cache $r reg_invalidations -ge 1
done
expect_stat mem-cache 0 reg_evictions -eq 0
ompi mem-cache-size1 2 OMPI_MCA_fbtl_dafs_regcache_size=1 -- regcache dafs:/cache1.dat $MiB
expect_stat mem-cache-size1 0 reg_evictions -ge 4
timeout 60 mpirun.openmpi --allow-run-as-root -np 1 -x OMPI_MCA_mca_base_component_path \
    -x OMPI_MCA_fs_dafs_server="$MAIN_ADDR" -x OMPI_MCA_fbtl_dafs_mem=bogus \
    "$BUILD/test_ompio" rw dafs:/never.dat 4096 >"$WORK/bad-mem.out" 2>&1 || true
if grep -q 'fbtl_dafs_mem=bogus: must be percall, library or cache' "$WORK/bad-mem.out" \
    && grep -q '^FAIL rw: MPI_File_open' "$WORK/bad-mem.out" && [ ! -e "$EXPORT/never.dat" ]; then
    pass "an unknown fbtl_dafs_mem: MPI_File_open fails with a clear message"
else
    fail "an unknown fbtl_dafs_mem is not reported"
fi
timeout 60 mpirun.openmpi --allow-run-as-root -np 1 -x OMPI_MCA_mca_base_component_path \
    -x OMPI_MCA_fs_dafs_server="$MAIN_ADDR" -x OMPI_MCA_fbtl=posix \
    "$BUILD/test_ompio" rw dafs:/never.dat 4096 >"$WORK/no-fbtl.out" 2>&1 || true
if grep -q 'the fbtl component "dafs" is not loaded' "$WORK/no-fbtl.out" \
    && grep -q '^FAIL rw: MPI_File_open' "$WORK/no-fbtl.out" && [ ! -e "$EXPORT/never.dat" ]; then
    pass "fbtl_dafs excluded: MPI_File_open of a dafs file fails with a clear message"
else
    fail "fbtl_dafs excluded: not reported"
fi

echo "==> a dafsd killed under a running job"
rm -f "$WORK/ready" "$WORK/go"
(
    ompi dead-np2 2 OMPI_MCA_fs_dafs_server="$VICTIM_ADDR" OMPI_MCA_fs_dafs_request_deadline_ms=3000 \
        DAFS_TEST_READY="$WORK/ready" DAFS_TEST_GO="$WORK/go" DAFS_TEST_LIMIT_S=20 -- dead dafs:/dead.dat $MiB
    echo "$passed $failed" >"$WORK/dead.counts"
) &
job=$!
for _ in $(seq 600); do [ -f "$WORK/ready" ] && break; sleep 0.1; done
kill -9 "$VICTIM_PID" 2>/dev/null || true
touch "$WORK/go"
wait "$job" || true
read -r passed failed <"$WORK/dead.counts"
ompi noserver-np2 2 OMPI_MCA_fs_dafs_server="$VICTIM_ADDR" -- noserver dafs:/nothing.dat
if grep -q "fs_dafs: cannot connect to $VICTIM_ADDR" "$WORK/noserver-np2.out"; then
    pass "no server: the message names the server"
else
    fail "no server: no message naming the server"
fi

# ---------------------------------------------------------------- MPICH via the preload library
echo "==> MPICH $(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*//p') through libdafs_preload.so"
M=/dafs-mpi-test-$$
[ ! -e "$M" ] || { echo "error: $M exists locally" >&2; exit 1; }
mpich() {
    local label=$1 np=$2; shift 2
    run_counted "$label" timeout 120 mpirun.mpich -np "$np" -genv LD_PRELOAD "$PRELOAD" \
        -genv DAFS_MOUNT "$M=dafs://$MAIN_ADDR/" "$BUILD/test_ompio_mpich" "$@"
}
mpich mpich-rw 2 rw "$M/mpich-rw.dat" $MiB
same_as_expected mpich-rw.dat 1 $((2 * MiB))
mpich mpich-vector 2 vector "$M/mpich-vector.dat" 3000
same_as_expected mpich-vector.dat 3 $((2 * 16 * 3000))
mpich mpich-subarray 2 subarray "$M/mpich-subarray.dat" 500
same_as_expected mpich-subarray.dat 4 $((500 * 500 * 2))
mpich mpich-sizes 2 sizes "$M/mpich-sizes.dat"
# Non-blocking: ROMIO's aio_write/aio_read/aio_error/aio_suspend on dafs descriptors
# (without the library's AIO these requests never complete: the time limit fails them).
mpich mpich-nb 2 nb "$M/mpich-nb.dat" $MiB
same_as_expected mpich-nb.dat 2 $((2 * 4 * MiB))
mpich mpich-nb-small 2 nb "$M/mpich-nb-small.dat" 1000
same_as_expected mpich-nb-small.dat 2 $((2 * 4 * 1000))
mpich mpich-threads 2 threads "$M/mpich-threads.dat" 300000
same_as_expected mpich-threads.dat 17 $((2 * 4 * 300000))

# ---------------------------------------------------------------- the MPI-IO benchmark
# adapters/ompio/bench/test.sh: the seed-004 benchmark under mpirun -np 2 on local files and
# dafs (and NFS when its baseline runs), every read checked; its own dafsd. Its lines count.
echo "==> the MPI-IO benchmark checks what it reads (adapters/ompio/bench/test.sh)"
set +e
adapters/ompio/bench/test.sh >"$WORK/mpibench.out" 2>&1
rc=$?
set -e
grep -E '^(ok|FAIL|note:) ' "$WORK/mpibench.out" | sed 's/^\(ok\|FAIL\) */&[mpibench] /' || true
line=$(grep -E '^mpibench: [0-9]+ passed, [0-9]+ failed$' "$WORK/mpibench.out" | tail -1 || true)
if [ -n "$line" ]; then
    passed=$((passed + $(echo "$line" | awk '{print $2}')))
    failed=$((failed + $(echo "$line" | awk '{print $4}')))
    [ "$rc" -eq 0 ] || [ "$(echo "$line" | awk '{print $4}')" -gt 0 ] || fail "[mpibench] exit status $rc"
else
    fail "[mpibench] no summary (exit status $rc)"
    tail -25 "$WORK/mpibench.out" | sed 's/^/    | /'
fi

if ! kill -0 "${pids[0]}" 2>/dev/null; then
    fail "dafsd died during the tests"
    cat "$WORK/main.err" >&2
fi
echo "mpi: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
