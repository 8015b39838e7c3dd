# shellcheck shell=bash disable=SC2034
# (SC2034: the variables set here are the interface, used by the scripts that source this.)
# Shared by adapters/ompio/bench.sh and the benchmark's correctness test (sourced, not run).
#
#   mpibench_deps                 apt packages (Open MPI, python3, libnfs-dev), idempotent
#   mpibench_build DIR            libdafs (DAFS_PROFILE) and the OMPIO components into
#                                 DIR/prefix (scripts/install-ompio.sh), mpiio_bench and the
#                                 NFS preload shim into DIR; sets REL, BENCH, MPIRUN,
#                                 COMPONENT_PATH, NFS_SHIM
#   mpibench_name BACKEND KIND    the MPI-IO file name of KIND (data, wdata) on BACKEND
#   mpibench_env BACKEND MODE CMD...  runs CMD with the environment of BACKEND (and the
#                                 memory MODE of fbtl_dafs: percall, library, cache)
#   mpibench_nfs_setup            finds (or with START_NFS=1 starts) the NFS baseline; sets
#                                 NFS_STATUS ("" when usable), NFS_ROUTE, NFS_PID
# Needs WORK (scratch directory); DAFS_ADDR / DAFS_SHM for the dafs backends.

MPIBENCH_DIR=$ROOT/adapters/ompio/bench
NFS_ROUTE="OMPIO fs ufs + fbtl posix on nfs:// names; adapters/ompio/bench/nfs_preload.c (LD_PRELOAD) maps open/pread(v)/pwrite(v)/fstat/ftruncate/fsync/unlink onto libnfs's synchronous calls (NFSv3); server NFS-Ganesha 4.3 (shared/peers/nfs)"

mpibench_deps() {
    source "$ROOT/scripts/ensure-deps.sh"
    local need=() p
    for p in openmpi-bin libopenmpi-dev python3 libnfs-dev libnfs-utils pkg-config; do
        dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
    done
    if [ ${#need[@]} -gt 0 ]; then
        local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
        echo "==> installing Debian packages: ${need[*]}" >&2
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
    fi
}

mpibench_build() {
    local dir=$1
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
    echo "==> cargo build ($DAFS_PROFILE) -p dafs-capi -p dafs-cli" >&2
    # shellcheck source=../../../scripts/lib-build.sh
    (cd "$ROOT" && source scripts/lib-build.sh && cargo_build -p dafs-capi -p dafs-cli)
    REL=$CARGO_TARGET_DIR/$DAFS_PROFILE
    mkdir -p "$dir"
    local prefix=$dir/prefix
    rm -rf "$prefix"
    # The project's installer: libdafs, the OMPIO components and env.sh with the component
    # path a user would source.
    (cd "$ROOT" && DAFS_NO_BUILD=1 scripts/install-ompio.sh "$prefix" >"$dir/install.log" 2>&1) ||
        { cat "$dir/install.log" >&2; return 1; }
    export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    COMPONENT_PATH=$(sed -n 's/^export OMPI_MCA_mca_base_component_path="\(.*\)"$/\1/p' \
        "$prefix/lib/dafs-ompio/env.sh")
    [ -n "$COMPONENT_PATH" ] || { echo "error: no component path in $prefix/lib/dafs-ompio/env.sh" >&2; return 1; }
    local cflags="-std=c11 -O2 -Wall -Wextra -Werror"
    BENCH=$dir/mpiio_bench
    # shellcheck disable=SC2086
    mpicc.openmpi $cflags -o "$BENCH" "$MPIBENCH_DIR/mpiio_bench.c" "$MPIBENCH_DIR/bench_util.c"
    NFS_SHIM=$dir/nfs_preload.so
    # shellcheck disable=SC2086,SC2046
    cc $cflags -shared -fPIC -o "$NFS_SHIM" "$MPIBENCH_DIR/nfs_preload.c" \
        $(pkg-config --cflags --libs libnfs) -ldl
    MPIRUN=mpirun.openmpi
}

mpibench_name() {
    local backend=$1 kind=$2
    case "$backend" in
    local) echo "$WORK/local/mpiio.$kind" ;;
    dafs-*) echo "dafs:/mpiio.$kind" ;;
    nfs) echo "${NFS_URL_BASE:-nfs://127.0.0.1/export}/mpiio-$$.$kind${NFS_URL_OPTS:-?version=3&nfsport=2049&mountport=20048}" ;;
    esac
}

mpibench_env() {
    local backend=$1 mode=$2; shift 2
    # Open MPI's own MPI-IO (OMPIO: the components plug in there), root allowed, one node.
    local env=(OMPI_MCA_io=ompio OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
        OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none)
    case "$backend" in
    local) ;;
    dafs-shm | dafs-tcp)
        local target=$DAFS_ADDR provider=tcp
        if [ "$backend" = dafs-shm ]; then target=$DAFS_SHM provider=auto; fi
        env+=("OMPI_MCA_mca_base_component_path=$COMPONENT_PATH"
            "OMPI_MCA_fs_dafs_server=$target" "OMPI_MCA_fs_dafs_provider=$provider"
            "OMPI_MCA_fbtl_dafs_mem=$mode" OMPI_MCA_fbtl_dafs_verbose_stats=1)
        ;;
    nfs) env+=("LD_PRELOAD=$NFS_SHIM") ;;
    esac
    env "${env[@]}" "$@"
}

mpibench_nfs_setup() {
    NFS_STATUS="" NFS_PID=""
    local peer=${NFS_PEER_DIR:-$ROOT/../shared/peers/nfs}
    if ! ss -Hltn 'sport = :2049' | grep -q . && [ "${START_NFS:-0}" = 1 ]; then
        if [ ! -x "$peer/run_baseline.sh" ] && [ ! -f "$peer/run_baseline.sh" ]; then
            NFS_STATUS="not available: no $peer/run_baseline.sh (set NFS_PEER_DIR)"
            return 0
        fi
        local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
        echo "==> starting the NFS baseline ($peer, SERVE_ONLY=1)" >&2
        $sudo env SERVE_ONLY=1 bash "$peer/run_baseline.sh" >"$WORK/nfs.log" 2>&1 &
        NFS_PID=$!
        for _ in $(seq 600); do
            timeout 5 nfs-ls "${NFS_URL_BASE:-nfs://127.0.0.1/export}${NFS_URL_OPTS:-?version=3&nfsport=2049&mountport=20048}" \
                >/dev/null 2>&1 && break
            kill -0 "$NFS_PID" 2>/dev/null || break
            sleep 0.5
        done
    fi
    if ! timeout 5 nfs-ls "${NFS_URL_BASE:-nfs://127.0.0.1/export}${NFS_URL_OPTS:-?version=3&nfsport=2049&mountport=20048}" >/dev/null 2>&1; then
        NFS_STATUS="not running (start with: sudo SERVE_ONLY=1 shared/peers/nfs/run_baseline.sh, or pass --start-nfs)"
        if [ -n "$NFS_PID" ]; then tail -5 "$WORK/nfs.log" >&2 || true; fi
    fi
    return 0
}
