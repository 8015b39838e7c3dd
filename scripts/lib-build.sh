# Shared by the adapter test scripts (sourced, not run): build what a script needs.
#
#   cargo_build -p dafs-capi -p dafs-cli   # the packages the script uses, in $DAFS_PROFILE
#
# scripts/test.sh sets DAFS_CARGO_SELECTION="--workspace --all-targets" (what it has just
# built for the Rust tests); in the dev profile the scripts then build that same selection,
# which cargo finds fresh. Building only the named packages there would not be free: cargo
# resolves dependency features for the packages selected, and without the test targets
# (their dev-dependencies: proptest turns on regex-syntax's Unicode features, rand
# getrandom's std) it would compile a second copy of regex-syntax, regex-automata,
# tracing-subscriber, getrandom and tempfile and of everything above them (dafs-bench,
# dafs, dafsd). Run on their own, the scripts build the named packages only.
cargo_build() {
    if [ "${DAFS_PROFILE:-debug}" = release ]; then
        cargo build --release -q "$@"
    elif [ -n "${DAFS_CARGO_SELECTION:-}" ]; then
        # shellcheck disable=SC2086 # a list of cargo arguments
        cargo build -q $DAFS_CARGO_SELECTION
    else
        cargo build -q "$@"
    fi
}
