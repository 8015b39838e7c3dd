#!/usr/bin/env bash
# Build the SQLite VFS extension libdafs_sqlite.so and install it under PREFIX (default
# /usr/local): PREFIX/lib/libdafs_sqlite.so. libdafs is linked in statically (its symbols
# hidden), so the extension needs nothing but SQLite at run time.
#
# Usage: adapters/sqlite/install.sh [PREFIX]
#   Builds and installs libdafs first (scripts/install-capi.sh PREFIX, honouring
#   DAFS_NO_BUILD/DAFS_PROFILE) unless PREFIX/lib/pkgconfig/dafs.pc exists already.
#   Installs Debian's libsqlite3-dev, pkg-config and a C compiler if missing.
# Then:  sqlite3  ->  .load PREFIX/lib/libdafs_sqlite
#                     .open file:/app.db?vfs=dafs&server=HOST:PORT
set -euo pipefail
cd "$(dirname "$0")/../.."
PREFIX=${1:-/usr/local}
case "$PREFIX" in /*) ;; *) PREFIX="$PWD/$PREFIX" ;; esac

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need=()
[ -f /usr/include/sqlite3ext.h ] || need+=(libsqlite3-dev)
command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v cc >/dev/null 2>&1 || need+=(build-essential)
if [ ${#need[@]} -gt 0 ]; then
    echo "==> installing Debian packages: ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ ! -f "$PREFIX/lib/pkgconfig/dafs.pc" ]; then
    scripts/install-capi.sh "$PREFIX"
fi
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
LIBDIR=$(pkg-config --variable=libdir dafs)
OUT=$(mktemp -d /tmp/dafs-sqlite-build.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
echo "==> building libdafs_sqlite.so against libdafs $(pkg-config --modversion dafs) and SQLite $(sqlite3 --version | cut -d' ' -f1)"
cc -std=gnu11 -Wall -Wextra -Werror -O2 -fPIC -shared -fvisibility=hidden \
    $(pkg-config --cflags dafs) adapters/sqlite/conn.c adapters/sqlite/io.c adapters/sqlite/vfs.c \
    "$LIBDIR/libdafs.a" -Wl,--exclude-libs,ALL \
    $(pkg-config --static --libs-only-l dafs | sed 's/-ldafs//') -o "$OUT/libdafs_sqlite.so"
install -d "$LIBDIR"
install -m 0755 "$OUT/libdafs_sqlite.so" "$LIBDIR/libdafs_sqlite.so"
echo "installed: $LIBDIR/libdafs_sqlite.so"
