//! Give libdafs.so a soname carrying the ABI version (DAFS_API_VERSION in
//! include/dafs.h), so programs linked against it find a compatible library at run time.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdafs.so.1");
}
