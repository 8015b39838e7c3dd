#!/usr/bin/env bash
# The Python package's test suite: build dafsd, build and pip-install the `dafs` package
# (crates/dafs-python, pyo3 + maturin, release build) into a venv, run its pytest suite
# against real dafsd processes, and print "python: N passed, N failed" last.
#
# The venv lives in $CARGO_TARGET_DIR/python-venv (default target/python-venv) and is
# reused while the interpreter and the tool list below stay the same. PYTHON=/path/to/python3
# picks the interpreter (>= 3.11; default: python3 on PATH, else /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
source scripts/ensure-deps.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
export PYTHONDONTWRITEBYTECODE=1
venv=$CARGO_TARGET_DIR/python-venv
tools="maturin>=1.5,<2 pytest"

apt_install() {
    local SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "==> installing Debian packages: $*"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@"
}

py_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; }

# --- an interpreter that can make venvs ------------------------------------------------
py=""
for cand in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null 2>&1 && py_ok "$cand"; then py=$(command -v "$cand"); break; fi
done
if [ -z "$py" ]; then
    apt_install python3 python3-venv
    py=/usr/bin/python3
    py_ok "$py" || { echo "error: Python >= 3.11 is required" >&2; exit 1; }
fi
# --- the venv (cached) -------------------------------------------------------------------
make_venv() {
    rm -rf "$venv"
    "$py" -m venv "$venv" >/dev/null 2>&1 && "$venv/bin/python" -m pip --version >/dev/null 2>&1
}
stamp="$("$py" -c 'import sys; print(sys.executable, sys.version.split()[0])') | $tools | numpy"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.dafs-stamp" 2>/dev/null)" != "$stamp" ] \
    || ! "$venv/bin/python" -c 'import maturin, pytest' >/dev/null 2>&1; then
    echo "==> creating $venv ($py)"
    if ! make_venv; then
        # Debian's own python3 has no ensurepip (so venv cannot install pip) until
        # python3-venv is installed.
        case "$(readlink -f "$py")" in
        /usr/bin/*) apt_install python3-venv ;;
        esac
        make_venv || { echo "error: $py cannot create a virtual environment with pip" >&2; exit 1; }
    fi
    # shellcheck disable=SC2086
    "$venv/bin/python" -m pip install -q --disable-pip-version-check $tools
    # numpy is optional: without it only the numpy tests are skipped (with a reason).
    "$venv/bin/python" -m pip install -q --disable-pip-version-check numpy \
        || echo "warning: numpy could not be installed; the numpy tests will be skipped"
    echo "$stamp" >"$venv/.dafs-stamp"
else
    echo "==> reusing $venv"
fi
export PATH="$venv/bin:$PATH" # the maturin build backend runs `maturin`

# --- build ---------------------------------------------------------------------------------
# dafsd from the dev profile by default (scripts/test.sh has just built it).
profile=${DAFS_PROFILE:-debug}
echo "==> cargo build ($profile) -p dafs-cli"
source scripts/lib-build.sh
DAFS_PROFILE=$profile cargo_build -p dafs-cli
# The extension in the same profile, not a second, release build. maturin builds this one
# package (cargo rustc -p dafs-python): it reuses the dependencies that resolve to the same
# features as in the workspace build (crates/dafs-python/Cargo.toml names two for that);
# serde, dafs-cluster, dafs-client and pyo3 (whose build script sees maturin's PYO3_PYTHON)
# are compiled again.
if [ "$profile" = release ]; then export MATURIN_PEP517_ARGS=""; else export MATURIN_PEP517_ARGS="--profile dev"; fi
echo "==> pip install ./crates/dafs-python (maturin, $profile)"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation \
    --force-reinstall --no-deps ./crates/dafs-python

# --- test ----------------------------------------------------------------------------------
echo "==> pytest crates/dafs-python/tests"
log=$(mktemp /tmp/dafs-test-python.XXXXXX.log)
set +e
DAFSD="$CARGO_TARGET_DIR/$profile/dafsd" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    -rfEs crates/dafs-python/tests 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
summary=$(grep -E '^=*[ ]*[0-9]+ (passed|failed|errors?|skipped)|no tests ran' "$log" | tail -1 || true)
count() { echo "$summary" | grep -oE "[0-9]+ $1" | head -1 | awk '{print $1}' || true; }
passed=$(count passed); failed=$(count failed); errors=$(count 'errors?'); skipped=$(count skipped)
passed=${passed:-0}; failed=$(( ${failed:-0} + ${errors:-0} ))
if [ -n "${skipped:-}" ]; then echo "python: ${skipped} skipped"; fi
if [ "$rc" -eq 5 ]; then
    echo "error: pytest collected no tests"
    failed=$((failed + 1))
elif [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    echo "error: pytest exited with status $rc; full log: $log"
    failed=1
fi
echo "python: $passed passed, $failed failed"
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ]
