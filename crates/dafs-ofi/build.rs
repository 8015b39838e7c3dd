//! Compile the C shim (shim/shim.c) against libfabric, found with pkg-config. Debian 12:
//! `apt-get install libfabric-dev pkg-config` (scripts/ensure-deps.sh does it).
use std::process::Command;

fn pkg_config(arg: &str) -> Vec<String> {
    let out = Command::new("pkg-config").args([arg, "libfabric"]).output().unwrap_or_else(|e| {
        panic!("dafs-ofi needs pkg-config and libfabric-dev (run scripts/ensure-deps.sh): {e}")
    });
    if !out.status.success() {
        panic!(
            "pkg-config cannot find libfabric: install libfabric-dev (run scripts/ensure-deps.sh)\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_string).collect()
}

fn main() {
    println!("cargo:rerun-if-changed=shim/shim.c");
    println!("cargo:rerun-if-changed=build.rs");
    let mut b = cc::Build::new();
    b.file("shim/shim.c").warnings(true).extra_warnings(true);
    for f in pkg_config("--cflags") {
        if let Some(dir) = f.strip_prefix("-I") {
            b.include(dir);
        } else {
            b.flag(&f);
        }
    }
    b.compile("dafs_ofi_shim");
    for f in pkg_config("--libs") {
        if let Some(dir) = f.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = f.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={lib}");
        }
    }
}
