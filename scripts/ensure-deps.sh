#!/usr/bin/env bash
# Install what building and testing dafs needs, on a fresh Debian 12 machine.
# Idempotent: quick when everything is already there.
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v cmp >/dev/null 2>&1 || need_apt+=(diffutils)
# The libfabric provider (crates/dafs-ofi) compiles a C shim against libfabric 1.17+.
pkg-config --exists libfabric 2>/dev/null || need_apt+=(libfabric-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "==> installing Debian packages: ${need_apt[*]}"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

# Rust: use the rustup toolchain when present (dafs needs Rust >= 1.87).
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if command -v rustup >/dev/null 2>&1; then
    rustup show active-toolchain >/dev/null 2>&1 || rustup default stable
    # The test command checks formatting and lints.
    for comp in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$comp" || rustup component add "$comp"
    done
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "error: no Rust toolchain found. Install Rust >= 1.87 with rustup, then rerun." >&2
    exit 1
fi
ver=$(rustc --version | awk '{print $2}')
if [ "$(printf '%s\n1.87.0\n' "$ver" | sort -V | head -n1)" != "1.87.0" ]; then
    echo "error: rustc $ver is too old; dafs needs >= 1.87 (rustup update stable)." >&2
    exit 1
fi

# etcd: the dafs-cluster tests (cargo test) start their own etcd server.
source "$(dirname "${BASH_SOURCE[0]}")/lib-etcd.sh"
ensure_etcd
