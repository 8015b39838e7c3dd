#!/usr/bin/env bash
# Build libdafs_bdb.so (Berkeley DB 5.3 on dafs through db_env_set_func_*) against an
# installed libdafs and install it with its header:
#
#   PREFIX/lib/libdafs_bdb.so      (libdafs linked in statically: one library to preload)
#   PREFIX/include/dafs_bdb.h
#
# Usage: adapters/bdb/install.sh [PREFIX]   (default /usr/local)
#   libdafs must be installed first (scripts/install-capi.sh PREFIX); PKG_CONFIG_PATH
#   defaults to PREFIX/lib/pkgconfig. Installs libdb5.3-dev if missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
PREFIX=${1:-/usr/local}
case "$PREFIX" in /*) ;; *) PREFIX="$PWD/$PREFIX" ;; esac
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need=()
[ -f /usr/include/db.h ] || need+=(libdb5.3-dev)
command -v db5.3_verify >/dev/null 2>&1 || need+=(db5.3-util)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v cc >/dev/null 2>&1 || need+=(build-essential)
if [ ${#need[@]} -gt 0 ]; then
    echo "==> installing Debian packages: ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
pkg-config --exists dafs || { echo "install-bdb: libdafs not found (run scripts/install-capi.sh $PREFIX first)" >&2; exit 1; }
LIBDIR=$(pkg-config --variable=libdir dafs)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# libdafs.a inside, its symbols hidden (--exclude-libs): only dafs_bdb_* is exported, so
# the library can be preloaded next to anything else that carries libdafs.
cc -shared -fPIC -O2 -std=c11 -Wall -Wextra -Werror -fvisibility=hidden \
    $(pkg-config --cflags dafs) -I adapters/bdb \
    adapters/bdb/dafs_bdb.c adapters/bdb/bdb_hooks.c adapters/bdb/bdb_regions.c \
    "$LIBDIR/libdafs.a" -Wl,--exclude-libs,ALL -Wl,--no-undefined -Wl,-soname,libdafs_bdb.so \
    -ldb-5.3 $(pkg-config --static --libs-only-l dafs | sed 's/-ldafs//') -o "$out/libdafs_bdb.so"
install -d "$PREFIX/lib" "$PREFIX/include"
install -m 0755 "$out/libdafs_bdb.so" "$PREFIX/lib/libdafs_bdb.so"
install -m 0644 adapters/bdb/dafs_bdb.h "$PREFIX/include/dafs_bdb.h"
echo "installed: $PREFIX/lib/libdafs_bdb.so, $PREFIX/include/dafs_bdb.h"
