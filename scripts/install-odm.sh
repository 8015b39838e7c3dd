#!/usr/bin/env bash
# Build and install the ODM-style I/O library over DAFS and its two benchmarks:
#
#   PREFIX/lib/libdafs_odm.so.1 (symlink libdafs_odm.so)   adapters/odm/src
#   PREFIX/include/dafs_odm.h                              adapters/odm/include
#   PREFIX/lib/pkgconfig/dafs_odm.pc
#   PREFIX/bin/odmblast, PREFIX/bin/odmlat                 adapters/odm/*.c
#
# Usage: scripts/install-odm.sh [PREFIX]    (default /usr/local)
#   libdafs is taken from PREFIX (pkg-config dafs); if PREFIX has none, it is installed
#   there first with scripts/install-capi.sh (DAFS_NO_BUILD, DAFS_PROFILE honoured).
# Then: cc prog.c $(pkg-config --cflags --libs dafs_odm)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PREFIX=${1:-/usr/local}
case "$PREFIX" in /*) ;; *) PREFIX="$PWD/$PREFIX" ;; esac
LIBDIR=$PREFIX/lib

if ! command -v cc >/dev/null 2>&1 || ! command -v pkg-config >/dev/null 2>&1; then
    source scripts/ensure-deps.sh
fi
if [ ! -f "$LIBDIR/pkgconfig/dafs.pc" ]; then
    scripts/install-capi.sh "$PREFIX" >/dev/null
fi
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
VERSION=$(pkg-config --modversion dafs)
CFLAGS="-std=c11 -Wall -Wextra -Werror -O2 -I$ROOT/adapters/odm/include"
BUILD=$(mktemp -d /tmp/dafs-odm-build.XXXXXX)
trap 'rm -rf "$BUILD"' EXIT

echo "==> building libdafs_odm $VERSION against libdafs in $PREFIX"
# shellcheck disable=SC2046
cc $CFLAGS -fPIC -shared -fvisibility=hidden -pthread $(pkg-config --cflags dafs) \
    adapters/odm/src/*.c -o "$BUILD/libdafs_odm.so.1" -Wl,-soname,libdafs_odm.so.1 \
    $(pkg-config --libs dafs) -Wl,-rpath,"$LIBDIR"
for prog in odmblast odmlat; do
    cc $CFLAGS -pthread "adapters/odm/$prog.c" -o "$BUILD/$prog" -L"$BUILD" -l:libdafs_odm.so.1 \
        -Wl,-rpath,"$LIBDIR"
done

install -d "$LIBDIR/pkgconfig" "$PREFIX/include" "$PREFIX/bin"
install -m 0755 "$BUILD/libdafs_odm.so.1" "$LIBDIR/libdafs_odm.so.1"
ln -sfn libdafs_odm.so.1 "$LIBDIR/libdafs_odm.so"
install -m 0644 adapters/odm/include/dafs_odm.h "$PREFIX/include/dafs_odm.h"
install -m 0755 "$BUILD/odmblast" "$BUILD/odmlat" "$PREFIX/bin/"
cat > "$LIBDIR/pkgconfig/dafs_odm.pc" <<PC
prefix=$PREFIX
libdir=$LIBDIR
includedir=$PREFIX/include

Name: dafs_odm
Description: ODM-style I/O library over DAFS (create/commit/abort/identify/resize, odm_io)
Version: $VERSION
Requires: dafs
Libs: -L\${libdir} -ldafs_odm -Wl,-rpath,\${libdir}
Cflags: -I\${includedir}
PC
if [ "$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null 2>&1; then
    case "$LIBDIR" in /usr/lib|/usr/local/lib) ldconfig ;; esac
fi
echo "installed: $LIBDIR/libdafs_odm.so.1, $PREFIX/include/dafs_odm.h, $LIBDIR/pkgconfig/dafs_odm.pc,"
echo "           $PREFIX/bin/odmblast, $PREFIX/bin/odmlat"
