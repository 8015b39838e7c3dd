#!/usr/bin/env bash
# Build the DAFS C library (release) and install it under PREFIX (default /usr/local):
#
#   PREFIX/lib/libdafs.so.VERSION   (soname libdafs.so.1; symlinks libdafs.so.1, libdafs.so)
#   PREFIX/lib/libdafs.a
#   PREFIX/include/dafs.h
#   PREFIX/lib/pkgconfig/dafs.pc
#
# Usage: scripts/install-capi.sh [PREFIX]
#   LIBDIR=...          library directory (default PREFIX/lib)
#   DAFS_NO_BUILD=1     install what target/release already holds (no cargo build)
#   CARGO_TARGET_DIR    honoured, like cargo does
# Then: cc prog.c $(pkg-config --cflags --libs dafs)   (PKG_CONFIG_PATH=PREFIX/lib/pkgconfig
# for a prefix pkg-config does not search).
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=${1:-/usr/local}
case "$PREFIX" in /*) ;; *) PREFIX="$PWD/$PREFIX" ;; esac
LIBDIR=${LIBDIR:-$PREFIX/lib}
INCLUDEDIR=$PREFIX/include
TARGET_DIR=${CARGO_TARGET_DIR:-target}
# DAFS_PROFILE=debug installs the dev-profile build (the test suite uses it: no second build)
PROFILE=${DAFS_PROFILE:-release}
REL=$TARGET_DIR/$PROFILE

if [ -z "${DAFS_NO_BUILD:-}" ]; then
    if ! command -v cargo >/dev/null 2>&1; then
        source scripts/ensure-deps.sh
    fi
    echo "==> cargo build ($PROFILE) -p dafs-capi"
    if [ "$PROFILE" = release ]; then cargo build --release -p dafs-capi -q; else cargo build -p dafs-capi -q; fi
fi
for f in libdafs.so libdafs.a; do
    [ -f "$REL/$f" ] || { echo "install-capi: $REL/$f missing (build first)" >&2; exit 1; }
done

VERSION=$(sed -n 's/^#define DAFS_VERSION "\(.*\)"$/\1/p' include/dafs.h)
ABI=$(sed -n 's/^#define DAFS_API_VERSION \([0-9]*\)$/\1/p' include/dafs.h)
[ -n "$VERSION" ] && [ -n "$ABI" ] || { echo "install-capi: cannot read the version from include/dafs.h" >&2; exit 1; }
# What a static link needs besides libdafs.a (rustc --print native-static-libs, Linux/glibc).
# libfabric: the libfabric provider's C shim (crates/dafs-ofi) is linked into libdafs.
LIBS_PRIVATE="-lfabric -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"

echo "==> installing libdafs $VERSION into $PREFIX"
install -d "$LIBDIR" "$LIBDIR/pkgconfig" "$INCLUDEDIR"
install -m 0755 "$REL/libdafs.so" "$LIBDIR/libdafs.so.$VERSION"
ln -sfn "libdafs.so.$VERSION" "$LIBDIR/libdafs.so.$ABI"
ln -sfn "libdafs.so.$ABI" "$LIBDIR/libdafs.so"
install -m 0644 "$REL/libdafs.a" "$LIBDIR/libdafs.a"
install -m 0644 include/dafs.h "$INCLUDEDIR/dafs.h"
sed -e "s|@PREFIX@|$PREFIX|g" -e "s|@LIBDIR@|$LIBDIR|g" -e "s|@INCLUDEDIR@|$INCLUDEDIR|g" \
    -e "s|@VERSION@|$VERSION|g" -e "s|@LIBS_PRIVATE@|$LIBS_PRIVATE|g" \
    crates/dafs-capi/dafs.pc.in > "$LIBDIR/pkgconfig/dafs.pc"
chmod 0644 "$LIBDIR/pkgconfig/dafs.pc"

# Refresh the dynamic linker's cache for system prefixes.
if [ "$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null 2>&1 && [ -d /etc/ld.so.conf.d ]; then
    case "$LIBDIR" in /usr/lib|/usr/local/lib) ldconfig ;; esac
fi
echo "installed: $LIBDIR/libdafs.so.$VERSION (libdafs.so.$ABI, libdafs.so), $LIBDIR/libdafs.a,"
echo "           $INCLUDEDIR/dafs.h, $LIBDIR/pkgconfig/dafs.pc"
